"""The two sweeps of `gang-scheduler simulate`: cluster sizes and checkpoint intervals.

Both run the gang-scheduler policy once per point, in local worker processes or on a Ray
cluster (``args.executor``, simulator/sweep.py), print one line per point with its units, and
with ``--out`` write CSV, JSON and a trade-off plot (simulator/report/sweeps.py).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

from scheduler.model.numerals import parse_int

if TYPE_CHECKING:
    from rich.console import Console

    from simulator.session import Inputs, SessionSpec

POLICY = "gang-scheduler"


def parse_intervals(text: str) -> tuple[int, ...]:
    """``"600,1200,2400"`` -> seconds, sorted and unique, each >= 1."""
    try:
        values = sorted({parse_int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise ValueError(f"--checkpoint-sweep: intervals must be whole seconds, got {text!r}"
                         ) from None
    if not values or values[0] < 1:
        raise ValueError(f"--checkpoint-sweep: need at least one interval >= 1 s, got {text!r}")
    return tuple(values)


def _portable(args: argparse.Namespace, spec: SessionSpec) -> SessionSpec:
    """*spec* as the runs need it: by path for runs that read this machine's files, carrying
    its input files for runs elsewhere (a Ray cluster's machines do not have them)."""
    from simulator.session import carry_files

    return spec if args.executor.shares_files else carry_files(spec)


def capacity(args: argparse.Namespace, spec: SessionSpec, inputs: Inputs,
             swept: tuple[str, tuple[int, ...]], target: float, console: Console) -> int:
    from rich.markup import escape

    from simulator.executors import ExecutorError
    from simulator.report import sweeps
    from simulator.session import SizedRun
    from simulator.sweep import SweepError, suggest_size, sweep

    pool, sizes = swept
    try:
        result = sweep(SizedRun(_portable(args, spec), pool, POLICY), sizes,
                       target_p95_seconds=target, executor=args.executor,
                       progress=not args.no_progress, console=console)
    except (SweepError, ExecutorError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
        return 1
    per_node = next(p.gpus_per_node for p in inputs.spec.pools if p.name == pool)
    price = inputs.pricing.per_pool.get(pool, inputs.pricing.per_gpu_hour)
    rows = sweeps.capacity_rows(result, per_node, price)
    currency = inputs.pricing.currency
    for r in rows:
        p95 = "n/a" if r.p95_hours is None else f"{r.p95_hours:,.2f} h"
        util = "n/a" if r.utilization is None else f"{100 * r.utilization:.1f}%"
        console.print(f"  {pool}={r.nodes} nodes ({r.gpus} GPUs, {r.pool_cost_per_hour:,.0f} "
                      f"{currency}/h): p95 queueing {p95}, utilization {util} (arrival "
                      f"window), GPU-hours used cost {r.cost:,.0f} {currency}"
                      f"{'' if not r.never_started else f', {r.never_started} never started'}"
                      f" ({'meets' if r.meets_target else 'misses'} target)", markup=False)
    if args.out:
        files = sweeps.write_capacity(Path(args.out), rows, pool, target / 3600, currency)
        console.print(f"wrote {', '.join(files)} to {args.out}/", markup=False)
    if result.chosen is None:
        largest = result.points[-1]
        console.print(f"no size meets p95 <= {target / 3600:,.2f} h; try {pool}="
                      f"{suggest_size(result, per_node)} nodes: {largest.size} nodes plus its "
                      f"mean backlog of {largest.report.backlog_gpus_mean or 0:,.0f} GPUs "
                      "waiting (arrival window)", markup=False)
        return 1
    console.print(f"smallest {pool} pool meeting p95 <= {target / 3600:,.2f} h: "
                  f"{result.chosen} nodes")
    return 0


def intervals(args: argparse.Namespace, spec: SessionSpec, points: tuple[int, ...],
              mtbf_hours: float, console: Console) -> int:
    from rich.markup import escape

    from simulator.executors import ExecutorError
    from simulator.report import sweeps
    from simulator.session import IntervalRun
    from simulator.sweep import SweepError, sweep

    write, mtbf = float(args.checkpoint_write), mtbf_hours * 3600.0
    try:
        result = sweep(IntervalRun(_portable(args, spec), POLICY), points,
                       target_p95_seconds=math.inf, require_all_started=False,
                       executor=args.executor, progress=not args.no_progress, console=console)
    except (SweepError, ExecutorError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc).replace('size', 'interval'))}",
                      soft_wrap=True)
        return 1
    rows = sweeps.interval_rows([(p.size, p.report) for p in result.points], write, mtbf)
    best = math.sqrt(2 * write * mtbf)
    console.print(f"checkpoint write W = {write:g} s, node MTBF = {mtbf_hours:g} h: "
                  f"T* = sqrt(2 W MTBF) = {best:,.0f} s ({best / 3600:.2f} h) for a one-node "
                  "job (a job on k nodes fails k times as often: divide MTBF by k)",
                  markup=False)
    for r in rows:
        waste = "n/a" if r.waste is None else f"{100 * r.waste:.2f}%"
        console.print(f"  T = {r.interval:,.0f} s: wasted {waste} of busy GPU-time "
                      f"(model {100 * r.expected_waste:.2f}%): {r.lost_gpu_hours:,.1f} GPU-h "
                      f"lost to failures, {r.writing_gpu_hours:,.1f} GPU-h writing",
                      markup=False)
    measured = [r for r in rows if r.waste is not None]
    if measured:
        least = min(measured, key=lambda r: (r.waste, r.interval))
        console.print(f"least waste at T = {least.interval:,.0f} s", markup=False)
    if args.out:
        files = sweeps.write_intervals(Path(args.out), rows, write, mtbf)
        console.print(f"wrote {', '.join(files)} to {args.out}/", markup=False)
    return 0
