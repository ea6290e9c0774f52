"""How one ``decide`` scales: in pending gangs of one shape, and in nodes. Prints the curves
(CPU seconds per cycle, median of ``--runs``) and, with ``--plot FILE``, draws them.

- gangs: ``--nodes`` 8-GPU nodes each with 7 GPUs allocated to a running gang, and 1 .. N pending
  gangs of one 8-GPU pod: none fits, and after the first the failure memo answers each one
  (a gang no easier than one that failed this cycle gets its reason without a search), so the
  curve should stay far below linear;
- gangs that fit: the same nodes empty, and 1 .. N pending gangs of one one-GPU pod (what a
  backlog of lone pods is): each one placed is assumed into the snapshot before the next;
- nodes: 250 .. M empty 8-GPU nodes and ``--gangs`` pending gangs of 8 one-GPU pods, all of
  which fit: every placement scans the candidates, so the curve should be near linear.

No cluster: the same ``decide`` the live scheduler and the simulator run, on snapshots built
from plain lists. No assertions.

    .venv/bin/python benchmarks/bench_curves.py
    .venv/bin/python benchmarks/bench_curves.py --plot /tmp/curves.png
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from policies.queues import Limits, PolicySet, PoolQuota, Queue, QueueSet, SchedulerPolicy
from scheduler.decide.cycle import decide
from scheduler.model import Gang, Node, PodRequirements, Role, RunningGang
from scheduler.model.resources import GPU, Resources
from scheduler.world.snapshot import Snapshot

POOL_LABEL = "gangscheduler.io/pool"
POOL = "bench"
NOW = 100_000.0


def nodes(count: int) -> list[Node]:
    alloc = Resources({GPU: 8, "cpu": 96_000, "memory": 1 << 40, "pods": 110})
    return [Node.build(f"n{i:05d}", alloc, {POOL_LABEL: POOL}) for i in range(count)]


def gang(name: str, pods: int, gpus_per_pod: int) -> Gang:
    req = PodRequirements(Resources({GPU: gpus_per_pod, "cpu": 1000, "memory": 1 << 30}))
    return Gang(id=f"ns/{name}", uid=f"uid-{name}", namespace="ns", name=name, queue="q",
                roles=(Role("worker", pods, req),), creation_time=NOW - 1)


def policies(gpus: int) -> PolicySet:
    quota = PoolQuota(POOL, Resources({GPU: gpus}), frozenset({GPU}), Limits(), Limits())
    return PolicySet(QueueSet.of([Queue("q", namespaces=("*",), quotas=(quota,))]),
                     SchedulerPolicy())


def cpu_per_cycle(snapshot: Snapshot, pending: list[Gang], pols: PolicySet,
                  runs: int) -> float:
    times = []
    for _ in range(runs):
        c0 = time.process_time()
        decide(snapshot, pending, pols, NOW)
        times.append(time.process_time() - c0)
    return statistics.median(times)


def gang_curve(node_count: int, counts: list[int], runs: int) -> list[tuple[int, float]]:
    """Pending gangs that do not fit, one shape: CPU per cycle by how many are pending."""
    world = nodes(node_count)
    running = []
    for i, node in enumerate(world):  # 7 of 8 GPUs busy everywhere: no 8-GPU pod fits
        running_gang = gang(f"run{i:05d}", 1, 7)
        used = running_gang.roles[0].requirements.requests
        running.append(RunningGang(running_gang, ((node.name, used),), start_time=0.0))
    snap = Snapshot(world, running)
    pols = policies(node_count * 8)
    return [(n, cpu_per_cycle(snap, [gang(f"g{i:05d}", 1, 8) for i in range(n)], pols, runs))
            for n in counts]


def fit_curve(node_count: int, counts: list[int], runs: int) -> list[tuple[int, float]]:
    """Pending one-pod gangs that all fit: CPU per cycle by how many are pending."""
    snap, pols = Snapshot(nodes(node_count)), policies(node_count * 8)
    return [(n, cpu_per_cycle(snap, [gang(f"g{i:05d}", 1, 1) for i in range(n)], pols, runs))
            for n in counts]


def node_curve(counts: list[int], gangs: int, runs: int) -> list[tuple[int, float]]:
    """Pending gangs that all fit: CPU per cycle by how many nodes there are."""
    out = []
    for n in counts:
        pending = [gang(f"g{i:05d}", 8, 1) for i in range(gangs)]
        out.append((n, cpu_per_cycle(Snapshot(nodes(n)), pending, policies(n * 8), runs)))
    return out


def show(title: str, unit: str, curve: list[tuple[int, float]]) -> None:
    """The curve, and each point's growth against the first (linear: the two ratios match)."""
    print(title)
    base_n, base_t = curve[0]
    for n, t in curve:
        ratio = t / base_t if base_t else float("nan")
        print(f"  {n:>6} {unit}: {t * 1000:9.1f} ms CPU per cycle   "
              f"({ratio:6.2f}x the time for {n / base_n:5.1f}x the {unit})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000, help="nodes of the gangs curve")
    parser.add_argument("--gang-counts", default="125,250,500,1000,2000,4000")
    parser.add_argument("--fit-counts", default="250,500,1000,2000,4000")
    parser.add_argument("--node-counts", default="250,500,1000,2000,4000")
    parser.add_argument("--gangs", type=int, default=250, help="pending gangs of the nodes curve")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--plot", metavar="FILE", help="draw both curves into FILE (PNG)")
    args = parser.parse_args(argv)
    gangs_at = [int(x) for x in args.gang_counts.split(",")]
    nodes_at = [int(x) for x in args.node_counts.split(",")]
    by_gangs = gang_curve(args.nodes, gangs_at, args.runs)
    show(f"pending gangs of one shape that do not fit, {args.nodes} nodes:", "gangs", by_gangs)
    by_fit = fit_curve(args.nodes, [int(x) for x in args.fit_counts.split(",")], args.runs)
    show(f"pending one-GPU gangs that all fit, {args.nodes} nodes:", "gangs", by_fit)
    by_nodes = node_curve(nodes_at, args.gangs, args.runs)
    show(f"{args.gangs} pending gangs of 8 x 1 GPU that fit, by nodes:", "nodes", by_nodes)
    if args.plot:
        draw(Path(args.plot), by_gangs, by_fit, by_nodes, args)
        print(f"plot: {args.plot}")
    return 0


def draw(path: Path, by_gangs: list[tuple[int, float]], by_fit: list[tuple[int, float]],
         by_nodes: list[tuple[int, float]], args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for ax, curve, xlabel, title in (
            (axes[0], by_gangs, "pending gangs (one shape, none fits)", f"{args.nodes} nodes"),
            (axes[1], by_fit, "pending one-GPU gangs (all fit)", f"{args.nodes} nodes"),
            (axes[2], by_nodes, "nodes", f"{args.gangs} pending gangs that fit")):
        xs, ys = [n for n, _ in curve], [t * 1000 for _, t in curve]
        ax.plot(xs, ys, "o-", label="decide")
        ax.plot(xs, [ys[0] * x / xs[0] for x in xs], "--", color="grey", label="linear")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.minorticks_off()
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_xlabel(xlabel)
        ax.set_ylabel("CPU ms per cycle")
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
