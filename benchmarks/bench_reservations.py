"""Benchmark: what reservation settings cost and buy, averaged over several synthetic seeds.

Run from the repository root:

    .venv/bin/python benchmarks/bench_reservations.py                 # maxGangs 1 vs 2
    .venv/bin/python benchmarks/bench_reservations.py --rates 8,14,40 --seeds 6 \\
        --variant one='{}' --variant per-pool='{maxGangs: 2}' \\
        --variant after-15m='{afterSeconds: 900}'

Each variant is a SchedulerPolicy ``reservation`` setting (YAML) run with the gang-scheduler
policy on ``clusters/sim-two-pools.yaml`` and ``synthetic-two-pools-sample`` redrawn with seeds
1..N, at each arrival rate (jobs/hour; at 14 the cluster is ~60% busy). One seed says little
about a policy: its big gangs are a handful of jobs, so this prints the mean over seeds of
GPU utilization and goodput (utilization less the work preemption threw away), queueing
delay (mean, p95, p99, in hours), the mean and max queueing delay of
gangs of >= 32 GPUs (the ones reservations exist for), preemptions, GPU-hours lost and the
hour the last job ends. The runs go to worker processes (``--jobs``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from policies.parsing import parse_scheduler_policy  # noqa: E402
from simulator import session  # noqa: E402
from simulator.loaders.synthetic import generate, load_spec  # noqa: E402
from simulator.samples import sample_path  # noqa: E402

CLUSTER = ROOT / "scheduler" / "examples" / "clusters" / "sim-two-pools.yaml"
TRACE = "synthetic-two-pools-sample"
BIG_GPUS = 32
COLUMNS = ("util %", "goodput %", "queue mean h", "queue p95 h", "queue p99 h", "big mean h",
           "big max h", "preemptions", "GPU-h lost", "last end h")


@dataclass(frozen=True)
class Case:
    variant: str
    reservation: str  # YAML of the SchedulerPolicy's spec.reservation
    rate: float
    seed: int


def run_case(case: Case) -> tuple[Case, tuple[float, ...]]:
    session.quiet_scheduler_logs()
    spec = load_spec(sample_path(TRACE))
    spec = replace(spec, seed=case.seed, rate_per_second=case.rate / 3600)
    policy, errors = parse_scheduler_policy({
        "apiVersion": "gangscheduler.io/v1alpha1", "kind": "SchedulerPolicy",
        "metadata": {"name": case.variant},
        "spec": {"reservation": yaml.safe_load(case.reservation)}})
    if policy is None:
        raise SystemExit(f"variant {case.variant}: " + "; ".join(map(str, errors)))
    base = session.load_inputs(session.SessionSpec(cluster=str(CLUSTER), trace=TRACE))
    jobs = generate(spec)
    inputs = replace(base, jobs=jobs, scheduler=policy)
    run = session.run_policy(inputs, "gang-scheduler", session.SimulationOptions())
    r = run.report
    big = [o.start_time - o.submit_time for o in run.outcomes
           if o.gpus >= BIG_GPUS and o.start_time is not None]
    ends = [o.end_time for o in run.outcomes if o.end_time is not None]
    q = r.queueing_delay
    hours = [(x or 0.0) / 3600 for x in (q.mean, q.p95, q.p99)]
    return case, (100 * (r.gpu_utilization or 0.0), 100 * (r.gpu_goodput or 0.0), *hours,
                  statistics.fmean(big) / 3600 if big else 0.0,
                  max(big) / 3600 if big else 0.0,
                  float(r.preemptions), r.gpu_hours_lost, max(ends) / 3600 if ends else 0.0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variant", action="append", metavar="NAME=YAML",
                   help="a reservation setting to compare (default: one='{}' and "
                        "per-pool='{maxGangs: 2}')")
    p.add_argument("--rates", default="14", help="arrival rates, jobs/hour (default 14)")
    p.add_argument("--seeds", type=int, default=6, help="seeds 1..N per rate (default 6)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    args = p.parse_args(argv)
    variants = [v.split("=", 1) for v in (args.variant or ["one={}", "per-pool={maxGangs: 2}"])]
    rates = [float(r) for r in args.rates.split(",")]
    cases = [Case(name, setting, rate, seed) for rate in rates for name, setting in variants
             for seed in range(1, args.seeds + 1)]
    results: dict[tuple[float, str], list[tuple[float, ...]]] = {}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for done, (case, figures) in enumerate(pool.map(run_case, cases), 1):
            results.setdefault((case.rate, case.variant), []).append(figures)
            print(f"\r{done}/{len(cases)} runs", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(f"| jobs/h | variant | {' | '.join(COLUMNS)} |")
    print("|---|---|" + "---:|" * len(COLUMNS))
    for (rate, name), runs in results.items():
        means = [statistics.fmean(col) for col in zip(*runs, strict=True)]
        print(f"| {rate:g} | {name} (x{len(runs)}) | "
              + " | ".join(f"{m:,.1f}" for m in means) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
