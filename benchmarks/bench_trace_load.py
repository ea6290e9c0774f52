"""Benchmark: how fast the simulator's trace loaders read the full public traces.

Run from the repository root:  .venv/bin/python benchmarks/bench_trace_load.py [--repeat N]

Prints, per input, the items produced (jobs, or pools for the node list), the best and median
wall time and the best CPU time over N runs, and items per second of the best wall time.
The traces are read from ../shared/traces; the generic-CSV figure uses the Philly jobs
re-written in the generic format to a temporary file, so it measures that loader on 82k rows.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sized
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.loaders.generic_csv import load_generic_csv  # noqa: E402
from simulator.loaders.openb import load_openb_cluster, load_openb_pods  # noqa: E402
from simulator.loaders.philly import load_philly  # noqa: E402
from simulator.loaders.synthetic import generate, parse_spec  # noqa: E402
from simulator.trace import TraceJob  # noqa: E402

TRACES = ROOT.parent / "shared" / "traces"


def timed(fn: Callable[[], Sized], repeat: int) -> tuple[int, float, float, float]:
    """(items, best wall s, median wall s, best CPU s). CPU time is the steadier figure on a
    shared machine: other processes stretch wall time, not this process's CPU time."""
    walls, cpus, size = [], [], 0
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        size = len(fn())
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - start_cpu)
    return size, min(walls), statistics.median(walls), min(cpus)


def pools_of(nodes: Path) -> list[object]:
    pools = load_openb_cluster(nodes)["pools"]
    assert isinstance(pools, list)
    return pools


def write_generic(jobs: tuple[TraceJob, ...], path: Path) -> None:
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["job_id", "submit_time", "duration", "queue", "role", "workers",
                      "gpus_per_worker", "cpu_per_worker", "memory_per_worker"])
        for job in jobs:
            for role in job.roles:
                out.writerow([job.job_id, job.submit_time, job.duration, job.queue, role.name,
                              role.count, role.gpus, f"{role.cpu_millis}m", role.memory_bytes])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    philly = TRACES / "philly" / "philly.csv"
    pods = TRACES / "openb" / "openb_pod_list_default.csv"
    nodes = TRACES / "openb" / "openb_node_list_gpu_node.csv"
    if not philly.is_file():
        print(f"traces not found under {TRACES}", file=sys.stderr)
        return 1
    spec = parse_spec({
        "seed": 1, "jobs": 82_247, "arrivals": {"rate_per_hour": 30},
        "gang_gpus": {1: 60, 2: 10, 4: 10, 8: 15, 16: 3, 32: 2},
        "duration": {"median": 1800, "sigma": 1.5}, "teams": {"a": 1, "b": 1, "c": 1},
    })
    philly_jobs = load_philly(philly)
    with tempfile.TemporaryDirectory() as tmp:
        generic = Path(tmp) / "philly_generic.csv"
        write_generic(philly_jobs, generic)
        cases: list[tuple[str, Callable[[], Sized]]] = [
            ("philly.csv (load_philly)", lambda: load_philly(philly)),
            ("openb pods (load_openb_pods)", lambda: load_openb_pods(pods).jobs),
            ("openb 1,213 nodes -> pools (load_openb_cluster)", lambda: pools_of(nodes)),
            ("philly as generic CSV (load_generic_csv)", lambda: load_generic_csv(generic)),
            ("synthetic, 82,247 jobs (generate)", lambda: generate(spec)),
        ]
        print(f"{'input':48} {'items':>8} {'best s':>7} {'median s':>8} {'cpu s':>7} "
              f"{'items/s':>9}")
        for name, fn in cases:
            size, best, median, cpu = timed(fn, args.repeat)
            print(f"{name:48} {size:8,} {best:7.3f} {median:8.3f} {cpu:7.3f} {size / best:9,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
