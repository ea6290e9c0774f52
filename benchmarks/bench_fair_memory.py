"""Fair share with memory on the shipped two-tenant week: who runs first on Monday.

    .venv/bin/python benchmarks/bench_fair_memory.py

Runs ``simulator/samples/fair_memory_trace.csv`` on ``fair_memory_cluster.yaml`` with the
queues and two-day half-life of ``fair_memory_queues.yaml``, then with no half-life, and
prints the Monday jobs' figures per queue (``simulator.fair_memory``): the table in
simulator/README.md, "Fair share with memory".
"""

from __future__ import annotations

from pathlib import Path

from simulator import fair_memory
from simulator.session import SessionSpec, load_inputs, quiet_scheduler_logs

SAMPLES = Path(__file__).resolve().parents[1] / "simulator" / "samples"
MONDAY = 7 * 86400.0


def main() -> None:
    quiet_scheduler_logs()
    spec = SessionSpec(cluster=str(SAMPLES / "fair_memory_cluster.yaml"),
                       trace=str(SAMPLES / "fair_memory_trace.csv"),
                       queues=str(SAMPLES / "fair_memory_queues.yaml"))
    comparison = fair_memory.compare(load_inputs(spec), since=MONDAY, window=16 * 3600.0)
    print("\n".join(fair_memory.table(comparison)))


if __name__ == "__main__":
    main()
