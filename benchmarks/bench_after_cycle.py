"""The live runner's after-cycle read of the cache: what one costs on a cache of thousands of pods.

After each cycle ``LiveScheduler._follow_the_pods`` reads the cache again (this cycle's binds
assumed, the watch's events during the cycle in, lapsed assumptions expired) for the
PodGroup status, the shortfall reporter and the gang notices. This times that read the two
ways it can be made on the same state, then the next cycle's ``cycle_input`` after the watch
confirmed the binds (the work the narrow read leaves to it):

- *full*: a second ``cache.cycle_input(now)`` (the snapshot derived, the gang set built);
- *narrow*: ``cache.gangs_now(now)``, only the running and pending gangs (skipped on a
  checkout without it).

Each round builds a fresh cache (not timed) with ``--nodes`` 8-GPU nodes, ``--gangs`` gangs
of ``--size`` one-GPU pods, half of them running, and reads its first cycle input; then the
cycle's ``--binds`` pending gangs are assumed bound and ``--events`` running pods are
deleted (the watch's events during the cycle), the after-cycle read is timed, the watch
confirms the binds and the next ``cycle_input`` is timed.

    .venv/bin/python benchmarks/bench_after_cycle.py [--rounds N] [--gangs N] [--size N]
    .venv/bin/python benchmarks/bench_after_cycle.py --checkout /work/wt/int  # another one

``--checkout`` imports the scheduler from another checkout (its ``cycle_input`` as it is
there; ``narrow`` only if it has ``gangs_now``).

Measured on the shared 2-core dev VM, 2026-12-05 (load about 1), p50 in ms: main (a87d510,
``--checkout /work/wt/int``: the runner's second ``cycle_input``) against ``gangs_now``:

    4,000 pods (defaults, 21 rounds):          read 2.41 -> 2.00, read + next input 4.02 -> 3.68
    40,000 pods (--gangs 10000 --nodes 5000):  read 5.08 -> 3.41, read + next input 7.11 -> 6.80

Rebuilding the gangs changed since the cycle's input is most of either read, and both need
it; what ``gangs_now`` saves (deriving the snapshot and the gang set) is partly done by the
next ``cycle_input`` instead, once, so the two together cost about the same.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: What the benchmark uses of the scheduler, imported by ``main`` from ``--checkout``.
S: Any = None


def _load(checkout: Path) -> Any:
    """The scheduler's classes used here, from *checkout*."""
    sys.path.insert(0, str(checkout.resolve()))
    cache = importlib.import_module("scheduler.feed.cache")
    model = importlib.import_module("scheduler.model")
    workloads = importlib.import_module("scheduler.model.workloads")
    return argparse.Namespace(
        ClusterCache=cache.ClusterCache, Node=model.Node, PodRef=model.PodRef,
        Resources=model.Resources, PodInfo=workloads.PodInfo, PodPhase=workloads.PodPhase,
        POD_GROUP_LABEL=workloads.POD_GROUP_LABEL, QUEUE_LABEL=workloads.QUEUE_LABEL,
        REQUIREMENTS=model.PodRequirements(model.Resources.of(gpu=1, cpu=1000)))


def _pod(gang: int, member: int, size: int, node: str) -> Any:
    return S.PodInfo(uid=f"u{gang}-{member}", namespace="ns", name=f"g{gang}-{member}",
                     requirements=S.REQUIREMENTS, scheduler_name="gang-scheduler",
                     node_name=node, phase=S.PodPhase.RUNNING if node else S.PodPhase.PENDING,
                     creation_time=float(gang), labels={S.POD_GROUP_LABEL: f"g{gang}",
                                                        S.QUEUE_LABEL: "team"},
                     annotations={"gangscheduler.io/min-member": str(size)})


def _cache(nodes: int, gangs: int, size: int) -> tuple[Any, list[list[Any]]]:
    """A cache whose first half of gangs runs (packed onto the nodes), the rest pending;
    its first cycle input read. The pending gangs' pods, by gang."""
    cache = S.ClusterCache()
    for i in range(nodes):
        cache.upsert_node(S.Node.build(f"n{i}", S.Resources.of(gpu=8, cpu=64000, pods=110),
                                       {"gangscheduler.io/pool": "p"}))
    slot, pending = 0, []
    for g in range(gangs):
        running = g < gangs // 2
        pods = []
        for m in range(size):
            node = f"n{(slot // 8) % nodes}" if running else ""
            slot += running
            pods.append(_pod(g, m, size, node))
            cache.upsert_pod(pods[-1])
        if not running:
            pending.append(pods)
    cache.cycle_input(0.0)
    return cache, pending


def _round(args: argparse.Namespace, read: Callable[[Any, float], object]
           ) -> tuple[float, float]:
    """One round: (the after-cycle read, the next cycle's input), in seconds."""
    cache, pending = _cache(args.nodes, args.gangs, args.size)
    free = [f"n{i}" for i in range(args.nodes)]
    bound = pending[:args.binds]
    binds = [(S.PodRef(p.namespace, p.name, p.uid), free[-1 - (i // 8) % len(free)])
             for i, p in enumerate(p for pods in bound for p in pods)]
    cache.assume(binds, 1.0, binding=True)  # the cycle's binds, handed to the binder
    for g in range(args.events):  # the watch's events during the cycle: a member lost
        cache.delete_pod(f"u{g}-0")
    gc.collect()
    gc.disable()  # (the collector's passes over the whole heap would time the heap's size)
    started = time.perf_counter()
    read(cache, 1.0)
    after = time.perf_counter() - started
    gc.enable()
    nodes = dict(binds)
    for pods in bound:  # the watch confirms the binds
        for p in pods:
            cache.upsert_pod(dataclasses.replace(
                p, node_name=nodes[S.PodRef(p.namespace, p.name, p.uid)],
                phase=S.PodPhase.RUNNING))
    gc.collect()
    gc.disable()
    started = time.perf_counter()
    cache.cycle_input(2.0)
    after_next = time.perf_counter() - started
    gc.enable()
    return after, after_next


def _line(name: str, times: list[tuple[float, float]]) -> str:
    after = [a * 1000 for a, _ in times]
    both = [(a + n) * 1000 for a, n in times]
    return (f"{name:7s} after-cycle read p50 {statistics.median(after):7.3f} ms "
            f"(min {min(after):.3f})   read + next cycle_input p50 "
            f"{statistics.median(both):7.3f} ms (min {min(both):.3f})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--nodes", type=int, default=1000, help="8-GPU nodes")
    parser.add_argument("--gangs", type=int, default=1000, help="gangs, half of them running")
    parser.add_argument("--size", type=int, default=4, help="one-GPU pods per gang")
    parser.add_argument("--binds", type=int, default=20, help="gangs bound by the cycle")
    parser.add_argument("--events", type=int, default=5,
                        help="running gangs losing a member during the cycle")
    parser.add_argument("--checkout", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the gang-scheduler checkout to import (default: this one)")
    args = parser.parse_args(argv)
    global S
    S = _load(args.checkout)
    ways: dict[str, Callable[[Any, float], object]] = {
        "full": S.ClusterCache.cycle_input}
    narrow = getattr(S.ClusterCache, "gangs_now", None)
    if narrow is not None:
        ways["narrow"] = narrow
    print(f"{args.checkout.resolve()}: {args.gangs} gangs of {args.size} pods "
          f"({args.gangs * args.size} pods, half running) on {args.nodes} nodes; "
          f"{args.binds} gangs bound by the cycle, "
          f"{args.events} members lost during it; {args.rounds} rounds")
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, read in ways.items():  # interleaved: the machine's load hits both alike
            times[name].append(_round(args, read))
    for name in ways:
        print(_line(name, times[name]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
