"""Benchmark: how fast the offline simulator replays a trace, per policy.

Run from the repository root:

    .venv/bin/python benchmarks/bench_sim.py       # philly-sample on sim-small, 3 policies
    .venv/bin/python benchmarks/bench_sim.py --trace ../shared/traces/philly/philly.csv \\
        --cluster scheduler/examples/clusters/sim-philly.yaml --policy gang-scheduler

Prints, per policy, the jobs replayed, the events popped from the virtual clock, the
scheduling cycles run, wall and CPU seconds of the run (inputs are loaded once, before the
clock starts, and not counted), and jobs/s and events/s of the wall time. CPU time is the
steadier figure on a shared machine. ``--outcomes DIR`` writes each policy's per-job outcomes
(``DIR/<policy>.csv``) so two versions of the code can be compared job by job;
``--profile FILE`` writes a cProfile of the runs.
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator import session  # noqa: E402
from simulator.engine import Simulation, SimulationOptions, SimulationResult  # noqa: E402
from simulator.policies import POLICY_NAMES, make_preset  # noqa: E402

DEFAULT_CLUSTER = ROOT / "scheduler" / "examples" / "clusters" / "sim-small.yaml"


def run_one(inputs: session.Inputs, policy: str,
            profiler: cProfile.Profile | None) -> tuple[SimulationResult, float, float]:
    """One policy: (result, wall s, CPU s); building the simulation is counted."""
    start, start_cpu = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    sim = Simulation(inputs.nodes, inputs.jobs, make_preset(policy, inputs.queues),
                     SimulationOptions())
    result = sim.run()
    if profiler is not None:
        profiler.disable()
    return result, time.perf_counter() - start, time.process_time() - start_cpu


def write_outcomes(path: Path, result: SimulationResult) -> None:
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["job_id", "queue", "gpus", "submit_time", "start_time", "end_time",
                      "preemptions", "gpu_seconds_lost", "gpu_seconds_idle_partial"])
        for o in result.outcomes:
            out.writerow([o.job_id, o.queue, o.gpus, o.submit_time, o.start_time, o.end_time,
                          o.preemptions, o.gpu_seconds_lost, o.gpu_seconds_idle_partial])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="philly-sample",
                        help="trace file or shipped sample name (default: %(default)s)")
    parser.add_argument("--cluster", default=str(DEFAULT_CLUSTER),
                        help="cluster description YAML (default: sim-small.yaml)")
    parser.add_argument("--queues", help="Queue YAML (default: one queue per team)")
    parser.add_argument("--policy", action="append", choices=POLICY_NAMES,
                        help="policy to run; repeat for several (default: all three)")
    parser.add_argument("--limit", type=int, help="only the first N jobs of the trace")
    parser.add_argument("--time-scale", type=float, help="multiply inter-arrival times by F")
    parser.add_argument("--outcomes", metavar="DIR", help="write DIR/<policy>.csv per policy")
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the runs")
    args = parser.parse_args()

    session.quiet_scheduler_logs()
    spec = session.SessionSpec(cluster=args.cluster, trace=args.trace, queues=args.queues,
                               trace_options=session.trace_options(args.limit, args.time_scale))
    started = time.perf_counter()
    inputs = session.load_inputs(spec)
    print(f"{session.describe_inputs(inputs, spec)}; loaded in "
          f"{time.perf_counter() - started:.2f} s")
    profiler = cProfile.Profile() if args.profile else None
    out_dir = Path(args.outcomes) if args.outcomes else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    header = (f"{'policy':<16}{'jobs':>8}{'started':>9}{'events':>9}{'cycles':>9}"
              f"{'wall s':>9}{'CPU s':>9}{'jobs/s':>10}{'events/s':>10}")
    print(header)
    total_wall = total_cpu = 0.0
    for policy in args.policy or POLICY_NAMES:
        result, wall, cpu = run_one(inputs, policy, profiler)
        total_wall += wall
        total_cpu += cpu
        jobs = len(result.outcomes)
        started_jobs = sum(1 for o in result.outcomes if o.start_time is not None)
        print(f"{policy:<16}{jobs:>8,}{started_jobs:>9,}{result.events:>9,}{result.cycles:>9,}"
              f"{wall:>9.2f}{cpu:>9.2f}{jobs / wall:>10,.0f}{result.events / wall:>10,.0f}",
              flush=True)
        if out_dir is not None:
            write_outcomes(out_dir / f"{policy}.csv", result)
    print(f"{'total':<16}{'':>44}{total_wall:>9.2f}{total_cpu:>9.2f}")
    if profiler is not None:
        profiler.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
