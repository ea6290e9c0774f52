"""`gang-scheduler simulate`: replay a trace through the scheduler's own decision code."""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from scheduler.cli import _simulate_sweeps
from scheduler.cli._args import integer, iso_date, number, output_dir_problem, output_file_problem
from scheduler.cli._executor import add_ray_address, executor
from scheduler.model.numerals import parse_float

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

EPILOG = """\
examples:
  # the shipped defaults: a Philly slice on a 24-node cluster, three policies side by side
  gang-scheduler simulate --out sim-out

  # another cluster and queue file (a queue per team of the trace), arrivals 2x as fast
  gang-scheduler simulate --cluster scheduler/examples/clusters/sim-two-pools.yaml \\
      --queues simulator/samples/two_pools_queues.yaml --trace synthetic-two-pools-sample \\
      --time-scale 0.5 --out sim-out

  # the first 5,000 jobs of the full Philly trace on the 256-node Philly-sized cluster
  gang-scheduler simulate --cluster scheduler/examples/clusters/sim-philly.yaml \\
      --trace ../shared/traces/philly/philly.csv --limit 5000 --out sim-out

  # what if the default cluster's v100 pool had 32, 48 or 52 nodes? the smallest that keeps
  # p95 queueing under an hour (52); with --out also sweep.csv, sweep.json and
  # sweep_tradeoff.png (waiting, utilization and cost per size). If no size does, the
  # sweep suggests the next size to try.
  gang-scheduler simulate --sweep v100=32,48,52 --target-p95 3600 --out sweep-out

  # the same sweep on a Ray cluster (pip install 'gang-scheduler[ray]'), one size a run;
  # the input files travel with the runs and the output is the same as on local processes
  gang-scheduler simulate --sweep v100=32,48,52 --target-p95 3600 --out sweep-out \\
      --ray-address 10.0.0.5:6379

  # how often to checkpoint? 60 s per checkpoint, a node fails every 24 h on average: the
  # waste at each interval against T* = sqrt(2 W MTBF)
  gang-scheduler simulate --mtbf v100=24 --checkpoint-write 60 \\
      --checkpoint-sweep 900,1800,3220,6000,12000 --out ckpt-out

  # the same replay with every GPU a DRA device and every pod claiming its GPUs (the same
  # allocation code as live); the start times match the run without it
  gang-scheduler simulate --policy gang-scheduler --gpus-as-devices --limit 300

  # a week of notebooks, HPO searches and training with the policies of issue 38 (guards,
  # usage memory, per-user notebook caps, semi-preemptible teams); the summary adds a table
  # per class of work
  gang-scheduler simulate --cluster simulator/samples/mixed_cluster.yaml \
      --queues simulator/samples/mixed_queues_policies.yaml --trace synthetic-mixed-sample \
      --policy gang-scheduler

  # the bill of one run: GPU-hours and cost per (queue, namespace, pool) and day, counted by
  # the live scheduler's own accrual, the trace's start taken as 2026-12-01 00:00 UTC
  gang-scheduler simulate --policy gang-scheduler --price 2.5 --limit 200 \\
      --chargeback bill.csv --chargeback-start 2026-12-01

policies:
  per-pod         pods placed one at a time, like kube-scheduler (partial gangs, deadlocks)
  fifo-gang       whole gangs in strict arrival order; no backfill, reservation, preemption
  gang-scheduler  fair share, quotas with borrowing, preemption, reservations, backfill

traces: philly CSV, openb pod CSV, the generic CSV, or a synthetic spec (.yaml); shipped
samples by name: philly-sample, openb-sample, synthetic-sample, synthetic-mixed-sample,
generic-sample. See simulator/README.md for the formats.
"""


def _default(name: str) -> str:
    return str(Path(__file__).resolve().parent.parent / "examples" / name)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "simulate", help="replay a trace offline and compare policies (capacity planning)",
        description="Replay a cluster trace on a virtual clock through the same scheduler and "
        "decide() code the live scheduler runs, once per policy, and report utilization, "
        "queueing delay, JCT, fairness, fragmentation, preemption cost and GPU-hours per team.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster", default=_default("clusters/sim-small.yaml"), metavar="FILE",
                   help="cluster description YAML (the dev-cluster format; default: %(default)s)")
    p.add_argument("--queues", metavar="FILE", help="Queue YAML (default: one queue per team, "
                   "equal split of every pool, idle quota borrowable)")
    p.add_argument("--trace", default="philly-sample", metavar="TRACE",
                   help="trace file or shipped sample name (default: %(default)s)")
    p.add_argument("--policy", action="append", metavar="NAME",
                   help="policy to run; repeat for several (default: all three)")
    p.add_argument("--out", metavar="DIR", help="write JSON, CSV, PNG plots and report.html here")
    p.add_argument("--seed", type=int, help="seed for node failures (default 0) and for a "
                   "synthetic trace (default: the seed in its spec)")
    p.add_argument("--limit", type=integer(minimum=1), metavar="N",
                   help="only the first N jobs of the trace (N >= 1)")
    p.add_argument("--time-scale", type=number(positive=True), metavar="F",
                   help="multiply inter-arrival times by F (< 1 compresses, raising the load)")
    p.add_argument("--price", type=number(), default=0.0, metavar="PRICE",
                   help="price per GPU-hour for pools without costPerGpuHour")
    p.add_argument("--currency", type=currency, default="USD", metavar="CODE",
                   help="currency of --price and costPerGpuHour, shown on every cost "
                   "(default: %(default)s)")
    p.add_argument("--estimates", choices=("exact", "none"), default="exact",
                   help="runtime estimates the scheduler sees: the true duration, or none "
                   "(queue defaults)")
    p.add_argument("--checkpoint-interval", type=number(positive=True), metavar="S",
                   help="checkpoint every S seconds (jobs without their own interval)")
    p.add_argument("--mtbf", action="append", default=[], metavar="POOL=HOURS",
                   help="node failures: mean time between failures per node of POOL")
    p.add_argument("--checkpoint-write", type=number(), metavar="S",
                   help="seconds to write one checkpoint, charged for every checkpoint; with "
                   "--mtbf and no --checkpoint-interval, jobs use the Young/Daly interval")
    p.add_argument("--checkpoint-sweep", metavar="S1,S2,...",
                   help="run the gang-scheduler policy at several checkpoint intervals "
                   "(needs --mtbf and --checkpoint-write) and compare the waste with "
                   "T* = sqrt(2 W MTBF)")
    p.add_argument("--sweep", metavar="POOL=N1,N2,...",
                   help="run the gang-scheduler policy at several sizes of POOL in parallel")
    add_ray_address(p)  # --sweep and --checkpoint-sweep
    p.add_argument("--target-p95", type=number(), metavar="S",
                   help=f"sweep target: p95 queueing delay in seconds (default: "
                   f"{DEFAULT_TARGET_P95:g}; only with --sweep)")
    p.add_argument("--gpus-as-devices", action="store_true",
                   help="GPUs as DRA devices: the cluster's pools with draDevices (true by "
                   "default) offer their GPUs only as devices (a ResourceSlice per node, a "
                   "DeviceClass per GPU model; the cluster field gpusAsDevices), and every "
                   "job's pods claim theirs, one ResourceClaim per pod from a template of N "
                   "devices of the model's class (the trace column gpus_as_devices does it "
                   "per job)")
    p.add_argument("--batch-only", action="store_true",
                   help="every job is batch: the trace's interactive tier (notebooks labelled "
                   "gangscheduler.io/tier: interactive) is dropped, the baseline for the "
                   "tier's effect")
    p.add_argument("--chargeback", metavar="FILE.csv",
                   help="write the run's chargeback CSV (per UTC day: GPU-hours allocated and "
                   "cost per queue, namespace and pool, as `gang-scheduler chargeback` shows "
                   "them; used and idle are empty, the simulation has no GPU utilisation); "
                   "needs a single --policy")
    p.add_argument("--chargeback-start", type=iso_date, metavar="YYYY-MM-DD",
                   help="the date the trace starts on (its time 0 is that day's midnight UTC; "
                   "default 1970-01-01)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=run)


DEFAULT_TARGET_P95 = 3600.0


def currency(text: str) -> str:
    if len(text) != 3 or not text.isascii() or not text.isalpha() or not text.isupper():
        raise argparse.ArgumentTypeError(f"must be a three-letter code such as USD or EUR, "
                                         f"got {text!r}")
    return text


class _Usage(ValueError):
    """A flag value that is wrong; the message names the flag."""


def _mtbf(values: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for text in values:
        pool, sep, hours = text.partition("=")
        try:
            value = parse_float(hours)
        except ValueError:
            value = math.nan
        if not sep or not pool.strip() or not (math.isfinite(value) and value > 0):
            raise _Usage(f"--mtbf {text!r}: expected POOL=HOURS with HOURS a finite number > 0")
        out[pool.strip()] = value
    return out


def _check_flags(args: argparse.Namespace) -> tuple[dict[str, float], tuple[str, tuple[int, ...]]
                                                      | None]:
    """Everything about the flags that can be checked before any file is read."""
    from simulator.policies import POLICY_NAMES
    from simulator.sweep import parse_sweep

    mtbf = _mtbf(args.mtbf)
    if args.checkpoint_sweep is not None:
        try:
            args.intervals = _simulate_sweeps.parse_intervals(args.checkpoint_sweep)
        except ValueError as exc:
            raise _Usage(str(exc)) from None
        missing = [f for f, v in (("--mtbf", mtbf), ("--checkpoint-write",
                                                      args.checkpoint_write)) if not v]
        if missing:
            raise _Usage(f"--checkpoint-sweep: needs {' and '.join(missing)} (the trade-off "
                         "is write time against work lost to failures)")
        clash = [f for f, v in (("--sweep", args.sweep),
                                ("--checkpoint-interval", args.checkpoint_interval)) if v]
        if clash:
            raise _Usage(f"--checkpoint-sweep: cannot be combined with {clash[0]}")
    swept = None
    if args.sweep is not None:
        try:
            swept = parse_sweep(args.sweep)
        except ValueError as exc:
            raise _Usage(str(exc)) from None
    elif args.target_p95 is not None:
        raise _Usage("--target-p95: only meaningful with --sweep POOL=N1,N2,...")
    _check_executor(args)
    unknown = [p for p in args.policy or () if p not in (*POLICY_NAMES, "greedy-gang")]
    if unknown:
        raise _Usage(f"--policy: unknown {', '.join(map(repr, unknown))} "
                     f"(known: {', '.join(POLICY_NAMES)}, greedy-gang)")
    if args.out is not None and (problem := output_dir_problem(Path(args.out))):
        raise _Usage(f"--out {args.out}: {problem}")
    _check_chargeback(args)
    return mtbf, swept


def _check_executor(args: argparse.Namespace) -> None:
    """Where a sweep's runs go (``args.executor``): --ray-address applies to sweeps only."""
    from simulator.executors import DEFAULT_PROCESSES, ExecutorError

    if args.ray_address is not None and args.sweep is None and args.checkpoint_sweep is None:
        raise _Usage("--ray-address: only meaningful with --sweep or --checkpoint-sweep (a "
                     "single replay runs here)")
    try:
        args.executor = executor(args, DEFAULT_PROCESSES)
    except ExecutorError as exc:
        raise _Usage(str(exc)) from None


def _check_chargeback(args: argparse.Namespace) -> None:
    """--chargeback is the bill of one run, written to a file that can be."""
    if args.chargeback is None:
        if args.chargeback_start is not None:
            raise _Usage("--chargeback-start: only meaningful with --chargeback FILE.csv")
        return
    clash = [f for f, v in (("--sweep", args.sweep),
                            ("--checkpoint-sweep", args.checkpoint_sweep)) if v]
    if clash:
        raise _Usage(f"--chargeback: cannot be combined with {clash[0]}")
    if len(args.policy or ()) != 1:
        raise _Usage("--chargeback: needs exactly one --policy (the CSV is the bill of one run)")
    if problem := output_file_problem(Path(args.chargeback)):
        raise _Usage(f"--chargeback {args.chargeback}: {problem}")


def _check_pools(pools: list[str], mtbf: dict[str, float],
                 swept: tuple[str, tuple[int, ...]] | None) -> None:
    """Flags that name a pool must name one of the cluster's."""
    named = [(f"--mtbf {p}=...", p) for p in mtbf]
    named += [(f"--sweep {swept[0]}=...", swept[0])] if swept is not None else []
    for flag, pool in named:
        if pool not in pools:
            raise _Usage(f"{flag}: unknown pool {pool!r} (the cluster's pools: "
                         f"{', '.join(pools)})")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from policies.errors import PolicyError
    from scheduler.report.chargeback import write_csv
    from scheduler.world.clusterspec import ClusterSpecError
    from simulator import report, session
    from simulator.engine import FailureModel, SimulationOptions
    from simulator.policies import POLICY_NAMES
    from simulator.trace import TraceError

    console = Console(stderr=True)
    try:
        mtbf, swept = _check_flags(args)
    except _Usage as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
        return 2
    session.quiet_scheduler_logs()
    trace_opts = session.trace_options(args.limit, args.time_scale, args.seed)
    options = SimulationOptions(
        seed=args.seed or 0, runtime_estimates=args.estimates,
        checkpoint_interval=args.checkpoint_interval,
        failures=FailureModel(mtbf_hours=mtbf, checkpoint_write_seconds=args.checkpoint_write))
    spec = session.SessionSpec(cluster=args.cluster, trace=args.trace, queues=args.queues,
                               trace_options=trace_opts, options=options,
                               price_per_gpu_hour=args.price, currency=args.currency,
                               gpus_as_devices=args.gpus_as_devices,
                               batch_only=args.batch_only)
    try:
        inputs = session.load_inputs(spec)
        pools = [p.name for p in inputs.spec.pools]
        _check_pools(pools, mtbf, swept)
        warnings = session.check_queue_pools(inputs.queues, pools, args.queues) \
            if args.queues else []
        strays = session.check_job_queues(inputs, args.queues) if args.queues else None
        warnings += [strays] if strays else []
        # A sweep resizes the cluster, so only the per-pod test is true for every size.
        unfit = session.check_jobs_fit(inputs, whole_cluster=swept is None)
    except (TraceError, ClusterSpecError, PolicyError, ValueError, OSError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
        return 2
    for line in [*warnings, *([unfit] if unfit else [])]:
        console.print(f"[yellow]warning:[/yellow] {escape(line)}", soft_wrap=True)
    console.print(f"simulating {session.describe_inputs(inputs, spec)}")

    if swept is not None:
        target = DEFAULT_TARGET_P95 if args.target_p95 is None else args.target_p95
        return _simulate_sweeps.capacity(args, spec, inputs, swept, target, console)
    if args.checkpoint_sweep is not None:
        return _simulate_sweeps.intervals(args, spec, args.intervals, min(mtbf.values()),
                                          console)

    policies = args.policy or list(POLICY_NAMES)
    charged = session.charged(inputs) if args.chargeback else None
    runs = []
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, disable=args.no_progress) as bar:
        for policy in policies:
            task = bar.add_task(f"{policy:15}", total=len(inputs.jobs))
            started = time.perf_counter()
            run_ = session.run_policy(
                inputs, policy, options,
                progress=partial(_advance, bar, task), charged=charged)
            bar.update(task, completed=len(inputs.jobs))
            runs.append(run_)
            console.log(f"{policy}: {time.perf_counter() - started:.1f}s")
    report.print_summary([r.report for r in runs])
    if charged is not None:
        try:
            with open(args.chargeback, "w", encoding="utf-8", newline="") as out:
                write_csv(charged.ledger.rows("day", origin=args.chargeback_start), out)
        except OSError as exc:
            console.print(f"[red]error:[/red] --chargeback {escape(args.chargeback)}: cannot "
                          f"write: {escape(exc.strerror or str(exc))}", soft_wrap=True)
            return 2
        console.print(f"wrote the chargeback CSV to {args.chargeback}")
    if args.out:
        info = report.RunInfo(command=shlex.join(["gang-scheduler", *sys.argv[1:]]),
                              seed=args.seed, trace=args.trace, cluster=args.cluster)
        try:
            files = report.write_report(Path(args.out), runs, info)
        except OSError as exc:
            console.print(f"[red]error:[/red] --out {escape(args.out)}: cannot write: "
                          f"{escape(exc.strerror or str(exc))}", soft_wrap=True)
            return 2
        console.print(f"wrote {len(files)} files to {args.out}/ (open report.html)")
    return 0


def _advance(bar: Progress, task: TaskID, done: int, total: int) -> None:
    """Progress callback for one policy's run (``total`` is already the bar's)."""
    bar.update(task, completed=done)
