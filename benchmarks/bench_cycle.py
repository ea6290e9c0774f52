"""Decision-cycle benchmark: one ``decide`` with 1,000 pending gangs; prints p50/p95.

    .venv/bin/python benchmarks/bench_cycle.py [--runs N] [--seed N] [--profile]

The cluster: 2,000 8-GPU nodes in two pools (a100, h100), racks of 8 nodes, blocks of 4
racks. 20 queues: 4 organisations with 5 teams each, quota per pool spread over the teams
(the organisations' totals match the pools), random weights and preemption settings.
About 60% of the GPUs are allocated to running gangs (some borrowing, some checkpointed).
1,000 pending gangs of 1 to 64 GPUs (multi-node gangs use 8-GPU pods), random priorities,
ages and runtime estimates; a fifth must fit in one rack, a third name a pool.

Timed: ``decide`` on a fresh snapshot each run (cold caches, as in the live scheduler after
the cluster changed), the full ``gang-scheduler`` policy. Target: p50 < 2 s on 2 cores.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from policies.queues import (
    Limits,
    PolicySet,
    PoolQuota,
    PreemptionPolicy,
    Queue,
    QueueingPolicy,
    QueueSet,
    ReclaimPolicy,
    SchedulerPolicy,
)
from scheduler.decide.cycle import decide
from scheduler.model import (
    Gang,
    Node,
    PodRequirements,
    Role,
    RunningGang,
    TopologyConstraint,
    TopologyMode,
)
from scheduler.model.demand import gpus_of
from scheduler.model.resources import GPU, Resources
from scheduler.placement import Placement, PlacementParams, solve
from scheduler.world.snapshot import Snapshot

POOL = "gangscheduler.io/pool"
BLOCK = "topology.gangscheduler.io/block"
RACK = "topology.gangscheduler.io/rack"
POOLS = ("a100", "h100")
NODES_PER_POOL = 1000
ORGS, TEAMS = 4, 5
NOW = 100_000.0


def make_nodes() -> list[Node]:
    out = []
    for pool in POOLS:
        for i in range(NODES_PER_POOL):
            rack = i // 8
            labels = {POOL: pool, RACK: f"{pool}-r{rack:03d}", BLOCK: f"{pool}-b{rack // 4:02d}"}
            alloc = Resources({GPU: 8, "cpu": 96_000, "memory": 1 << 40, "pods": 110})
            out.append(Node.build(f"{pool}-{i:04d}", alloc, labels))
    return out


def make_queues(rng: random.Random) -> list[Queue]:
    queues = []
    per_org = NODES_PER_POOL * 8 // ORGS
    for o in range(ORGS):
        org = f"org{o}"
        queues.append(Queue(org, weight=1.0, namespaces=()))
        for t in range(TEAMS):
            quotas = tuple(
                PoolQuota(pool, Resources({GPU: per_org // TEAMS}), frozenset({GPU}),
                          Limits.of({GPU: per_org} if t % 2 else {}), Limits())
                for pool in POOLS)
            queues.append(Queue(
                f"{org}-team{t}", org, rng.choice([1.0, 2.0, 3.0]), ("*",), quotas,
                PreemptionPolicy(reclaim_from_others=rng.choice(list(ReclaimPolicy)),
                                 min_runtime_seconds=rng.choice([0.0, 600.0])),
                QueueingPolicy(default_runtime_seconds=3600.0)))
    return queues


def make_gang(rng: random.Random, name: str, queue: str, gpus: int, created: float,
              topology: bool, pool: str | None) -> Gang:
    per_pod = gpus if gpus <= 8 else 8
    pods = gpus // per_pod
    req = PodRequirements(Resources({GPU: per_pod, "cpu": per_pod * 8_000,
                                     "memory": per_pod * (64 << 30)}),
                          {POOL: pool} if pool else {})
    return Gang(id=f"ns/{name}", uid=f"uid-{name}", namespace="ns", name=name, queue=queue,
                roles=(Role("worker", pods, req),), priority=rng.randint(0, 3),
                creation_time=created,
                topology=TopologyConstraint(RACK, TopologyMode.REQUIRED) if topology else None,
                runtime_estimate=rng.choice([None, 600.0, 3600.0, 14_400.0]))


SIZES = (1, 2, 4, 8, 16, 32, 64)


def make_running(rng: random.Random, nodes: list[Node], teams: list[str]) -> list[RunningGang]:
    """Fill about 60% of the GPUs with running gangs, placed by the real solver."""
    snap = Snapshot(nodes)
    running: list[RunningGang] = []
    params = PlacementParams(use_cpsat=False)
    target = int(len(nodes) * 8 * 0.6)
    used = 0
    i = 0
    while used < target:
        i += 1
        g = make_gang(rng, f"run{i:04d}", rng.choice(teams), rng.choice(SIZES), 0.0,
                      rng.random() < 0.2, rng.choice(POOLS))
        result = solve(g, snap, params)
        if not isinstance(result, Placement):
            continue
        start = NOW - rng.uniform(0, 20_000)
        rg = RunningGang(g, result.allocations(g), start_time=start,
                         last_checkpoint=start + rng.uniform(0, NOW - start)
                         if rng.random() < 0.5 else None,
                         expected_end=start + rng.uniform(1_000, 40_000))
        snap = snap.with_running(rg)
        running.append(rg)
        used += g.gpus
    return running


def build(seed: int) -> tuple[list[Node], list[RunningGang], list[Gang], PolicySet]:
    rng = random.Random(seed)
    nodes = make_nodes()
    queues = make_queues(rng)
    teams = [q.name for q in queues if q.parent]
    running = make_running(rng, nodes, teams)
    pending = [make_gang(rng, f"g{i:04d}", rng.choice(teams), rng.choice(SIZES),
                         NOW - rng.uniform(0, 50_000), rng.random() < 0.2,
                         rng.choice(POOLS) if rng.random() < 0.33 else None)
               for i in range(1000)]
    return nodes, running, pending, PolicySet(QueueSet.of(queues), SchedulerPolicy())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="cProfile one run")
    parser.add_argument("--sort", default="cumulative", help="profile sort key")
    args = parser.parse_args()
    nodes, running, pending, policies = build(args.seed)
    gpus = sum(g.gpus for g in pending)
    print(f"{len(nodes)} nodes, {len(running)} running gangs "
          f"({sum(gpus_of(r.usage) for r in running)} GPUs), {len(pending)} pending gangs "
          f"({gpus} GPUs), {len(policies.queues)} queues")
    if args.profile:
        snap = Snapshot(nodes, running)
        prof = cProfile.Profile()
        prof.runcall(decide, snap, pending, policies, NOW)
        pstats.Stats(prof).sort_stats(args.sort).print_stats(40)
        return 0
    wall: list[float] = []
    cpu: list[float] = []
    plan = None
    for _ in range(args.runs):
        snap = Snapshot(nodes, running)
        t0, c0 = time.perf_counter(), time.process_time()
        plan = decide(snap, pending, policies, NOW)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    assert plan is not None
    reasons = Counter(r.category.value for r in plan.pending.values())
    for label, times in (("wall", wall), ("cpu ", cpu)):
        times.sort()
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        print(f"decide {label}: p50 {statistics.median(times):.3f} s, p95 {p95:.3f} s over "
              f"{args.runs} runs (min {times[0]:.3f} s, max {times[-1]:.3f} s)")
    print("(cpu: process time, which other load on the machine does not inflate)")
    print(f"plan: {len(plan.binds)} binds, {len(plan.evictions)} evictions, "
          f"{len(plan.nominations)} nominations, {len(plan.reservations)} reservation(s); "
          f"pending: {dict(sorted(reasons.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
