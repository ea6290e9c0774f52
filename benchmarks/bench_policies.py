"""Benchmark: each policy of issue 38 on its own and all together, per class of work.

Run from the repository root:

    .venv/bin/python benchmarks/bench_policies.py mixed      # synthetic-mixed-sample
    .venv/bin/python benchmarks/bench_policies.py philly --trace ../shared/traces/philly/philly.csv

``mixed`` replays ``synthetic-mixed-sample`` on ``simulator/samples/mixed_cluster.yaml`` with
the queues of ``mixed_queues_policies.yaml`` taken apart: ``none`` (no guard, no usage memory,
every notebook batch: ``mixed_queues.yaml`` with ``simulate --batch-only``), then each policy
alone (``tier``: notebooks interactive with the per-user caps; ``guards``; ``memory``;
``semi``: every team semi-preemptible), then ``all`` (the file as it is) and
``all-but-semi`` (the file without ``semiPreemptible``: what the field changes beside the
other policies). ``philly`` replays a Philly trace on ``sim-philly.yaml`` (or ``--cluster``)
with the simulator's default queues (one per virtual cluster): ``none``, ``guards`` (every
queue stops a gang after ``--max-runtime-hours``), ``memory`` (a six-hour usage half-life,
``fair_memory_policy.yaml``), ``semi`` (every queue semi-preemptible) and ``all``. The Philly
trace names no class of work, so its jobs are grouped by size (``simulator.classes``).

Prints two Markdown tables: per (variant, class) the jobs, p50 and p95 queueing delay in
hours, GPU-hours lost, gangs preempted and jobs stopped by guards; per variant the overall
p95, fairness (Jain, demand-capped), the fair-share gap per 6 h window (worst and mean,
percentage points), work lost and stopped jobs. Variants run in worker processes (``--jobs``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from policies.guards import NO_GUARDS, Guards  # noqa: E402
from policies.interactive import NO_CAPS  # noqa: E402
from policies.queues import Queue, QueueSet, SchedulerPolicy  # noqa: E402
from simulator import session  # noqa: E402
from simulator.metrics import PolicyReport  # noqa: E402

SAMPLES = ROOT / "simulator" / "samples"
CLUSTERS = ROOT / "scheduler" / "examples" / "clusters"
VARIANTS = {"mixed": ("none", "tier", "guards", "memory", "semi", "all", "all-but-semi"),
            "philly": ("none", "guards", "memory", "semi", "all")}


def _queues(queues: QueueSet, change: Callable[[Queue], Queue]) -> QueueSet:
    return QueueSet.of([change(q) for q in queues])


def _semi(queue: Queue, on: bool) -> Queue:
    """*queue* with ``spec.preemption.semiPreemptible`` set to *on*."""
    return dataclasses.replace(
        queue, preemption=dataclasses.replace(queue.preemption, semi_preemptible=on))


def _no_memory(policy: SchedulerPolicy | None) -> SchedulerPolicy | None:
    return None if policy is None else dataclasses.replace(policy, usage_half_life_seconds=0.0)


def mixed_inputs(variant: str, trace: str, limit: int | None) -> session.Inputs:
    """The mixed sample with only *variant*'s policies of mixed_queues_policies.yaml."""
    spec = session.SessionSpec(
        cluster=str(SAMPLES / "mixed_cluster.yaml"), trace=trace,
        queues=str(SAMPLES / "mixed_queues_policies.yaml"),
        trace_options=session.trace_options(limit),
        batch_only=variant not in ("tier", "all", "all-but-semi"))
    inputs = session.load_inputs(spec)
    everything = ("all", "all-but-semi")
    keep_guards, keep_caps = variant in ("guards", *everything), variant in ("tier", *everything)
    keep_semi = variant in ("semi", "all")
    queues = _queues(inputs.queues, lambda q: dataclasses.replace(
        _semi(q, q.preemption.semi_preemptible and keep_semi),
        guards=q.guards if keep_guards else NO_GUARDS,
        interactive=q.interactive if keep_caps else NO_CAPS))
    scheduler = inputs.scheduler if variant in ("memory", *everything) else _no_memory(
        inputs.scheduler)
    return dataclasses.replace(inputs, queues=queues, scheduler=scheduler)


def philly_inputs(variant: str, trace: str, cluster: str, limit: int | None,
                  max_runtime_hours: float) -> session.Inputs:
    memory = variant in ("memory", "all")
    spec = session.SessionSpec(
        cluster=cluster, trace=trace,
        queues=str(SAMPLES / "fair_memory_policy.yaml") if memory else None,
        trace_options=session.trace_options(limit))
    inputs = session.load_inputs(spec)
    if variant in ("guards", "all"):
        guards = Guards(max_runtime_seconds=max_runtime_hours * 3600)
        inputs = dataclasses.replace(inputs, queues=_queues(inputs.queues, lambda q: (
            dataclasses.replace(q, guards=guards) if inputs.queues.is_leaf(q.name) else q)))
    if variant in ("semi", "all"):
        inputs = dataclasses.replace(inputs, queues=_queues(inputs.queues, lambda q: (
            _semi(q, True) if inputs.queues.is_leaf(q.name) else q)))
    return inputs


def run_variant(args: tuple[str, str, str, str, int | None, float]) -> PolicyReport:
    workload, variant, trace, cluster, limit, max_runtime_hours = args
    session.quiet_scheduler_logs()
    inputs = (mixed_inputs(variant, trace, limit) if workload == "mixed"
              else philly_inputs(variant, trace, cluster, limit, max_runtime_hours))
    run = session.run_policy(inputs, "gang-scheduler", session.SimulationOptions())
    return dataclasses.replace(run.report, policy=variant)


def _h(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:,.2f}"


def _pts(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}"


def print_tables(reports: list[PolicyReport]) -> None:
    print("| variant | class | jobs | queueing p50 h | queueing p95 h | GPU-h lost "
          "| preempted | stopped |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in reports:
        for c in r.classes:
            print(f"| {r.policy} | {c.job_class} | {c.jobs:,} | {_h(c.queueing_delay_p50)} | "
                  f"{_h(c.queueing_delay_p95)} | {c.gpu_hours_lost:,.1f} | {c.preemptions:,} "
                  f"| {c.stopped:,} |")
    print()
    print("| variant | queueing p95 h | utilization, arrival window % | fairness (Jain) "
          "| fair-share gap worst / mean 6 h (pts) | GPU-h lost | stopped |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in reports:
        util = "-" if r.gpu_utilization_arrivals is None \
            else f"{100 * r.gpu_utilization_arrivals:.1f}"
        jain = "-" if r.jain_index_demand is None else f"{r.jain_index_demand:.3f}"
        print(f"| {r.policy} | {_h(r.queueing_delay.p95)} | {util} | {jain} | "
              f"{_pts(r.fair_share_gap_max)} / {_pts(r.fair_share_gap_mean)} | "
              f"{r.gpu_hours_lost:,.1f} | {r.stopped:,} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=sorted(VARIANTS))
    parser.add_argument("--trace", help="trace (default: synthetic-mixed-sample for mixed, "
                        "philly-sample for philly)")
    parser.add_argument("--cluster", default=str(CLUSTERS / "sim-philly.yaml"),
                        help="philly's cluster (default: sim-philly.yaml; the mixed sample "
                        "always runs on mixed_cluster.yaml)")
    parser.add_argument("--limit", type=int, help="only the first N jobs")
    parser.add_argument("--variant", action="append", help="run only these variants")
    parser.add_argument("--max-runtime-hours", type=float, default=48.0,
                        help="philly's guards variant: maxRuntimeSeconds of every queue, in "
                        "hours (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default: 2)")
    args = parser.parse_args(argv)
    trace = args.trace or ("synthetic-mixed-sample" if args.workload == "mixed"
                           else "philly-sample")
    variants = args.variant or list(VARIANTS[args.workload])
    unknown = [v for v in variants if v not in VARIANTS[args.workload]]
    if unknown:
        parser.error(f"--variant: unknown {unknown} (known: {VARIANTS[args.workload]})")
    cases = [(args.workload, v, trace, args.cluster, args.limit, args.max_runtime_hours)
             for v in variants]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        reports = list(pool.map(run_variant, cases))
    print_tables(reports)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
