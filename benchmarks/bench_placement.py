"""Placement solver benchmark: prints p50/p95 solve times and greedy vs CP-SAT shares.

    .venv/bin/python benchmarks/bench_placement.py [--quick] [--seed N]

Scenarios (targets on a 2-core machine in brackets):

(a) one 8-member x 8-GPU gang on 1,000 8-GPU nodes at ~70% random occupancy [p95 < 20 ms];
(b) a 64-member x 8-GPU gang required within one rack, on 5,000 nodes in 100 racks of 50.
    Fifty 8-GPU nodes have only 400 GPUs < 512, so the nodes here have 16 GPUs; occupancy is
    drawn per rack so that only a few racks have room [p95 < 300 ms]. (b-never) is the same
    gang on 8-GPU nodes: the time to answer NEVER_FITS;
(c) 1,000 single-GPU pods placed one after another on the cluster of (a), each placement
    applied with ``snapshot.with_running`` before the next [> 5,000 placements/s];
(d) tight multi-role packings (a launcher and four worker shapes filling 24 nodes' free
    GPUs and cpus exactly) where the greedy pass fails and CP-SAT finds the placement;
    (d-frag) the same instances under the ``fragmentation`` packing policy, the mix being
    (d)'s GPU pod shapes: CP-SAT's objective with its fragmentation term.

(a+) and (b+) are (a) and (b) with pod-level constraints on, to show what they cost:
(a+) adds required anti-affinity ``app=trainer`` per hostname and a required topology spread
of the workers over blocks (maxSkew 1); (b+) adds required pod affinity ``app=trainer`` per
rack (the members bootstrap one rack) and a required spread per hostname (maxSkew 2).
Compare them with (a) and (b) of the same run, and with main's (a) and (b) run beside it
(target: within 2x).

Timed: ``solve`` on a snapshot derived from the cycle's base snapshot (the topology graph and
eligibility are built once per base and shared; the free-GPU index catches up with the
derived snapshot inside the timed call). The cold first solve on a new base is printed too.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.model import (
    HOSTNAME_LABEL,
    Gang,
    Node,
    PodRequirements,
    Role,
    RunningGang,
    TopologyConstraint,
    TopologyMode,
)
from scheduler.model.constraints import (
    PodAffinityTerm,
    PodConstraints,
    SpreadConstraint,
    Unsatisfiable,
)
from scheduler.model.labels import Labels, LabelSelector
from scheduler.model.resources import Resources
from scheduler.placement import Placement, PlacementParams, Unplaceable, solve
from scheduler.placement.gpu_shares import Mix, ShareRequest
from scheduler.placement.types import PlacementResult
from scheduler.world.snapshot import Snapshot

BLOCK = "topology.gangscheduler.io/block"
RACK = "topology.gangscheduler.io/rack"


def make_nodes(count: int, per_rack: int, racks_per_block: int, gpus: int) -> list[Node]:
    nodes = []
    for i in range(count):
        rack = i // per_rack
        labels = {RACK: f"r{rack:03d}", BLOCK: f"b{rack // racks_per_block:02d}"}
        alloc = Resources({"nvidia.com/gpu": gpus, "cpu": gpus * 12_000,
                           "memory": gpus * (128 << 30), "pods": 110})
        nodes.append(Node.build(f"node-{i:05d}", alloc, labels))
    return nodes


def make_gang(name: str, roles: Sequence[tuple[str, int, Resources]],
              topology: TopologyConstraint | None = None,
              constraints: PodConstraints | None = None) -> Gang:
    c = constraints or PodConstraints()
    return Gang(id=f"bench/{name}", uid=name, namespace="bench", name=name, queue="q",
                roles=tuple(Role(r, n, PodRequirements(req, constraints=c),
                                 labels=Labels({"app": "trainer"})) for r, n, req in roles),
                topology=topology)


TRAINER = LabelSelector.equals({"app": "trainer"})
#: (a+): one worker per node, the workers spread evenly over blocks.
SPREAD_OVER_BLOCKS = PodConstraints(
    anti_affinity=(PodAffinityTerm(TRAINER, HOSTNAME_LABEL, frozenset({"bench"})),),
    spread=(SpreadConstraint(1, BLOCK, Unsatisfiable.DO_NOT_SCHEDULE, TRAINER),))
#: (b+): the workers in one rack by pod affinity, at most two more per node than the least.
ONE_RACK_BY_AFFINITY = PodConstraints(
    affinity=(PodAffinityTerm(TRAINER, RACK, frozenset({"bench"})),),
    spread=(SpreadConstraint(2, HOSTNAME_LABEL, Unsatisfiable.DO_NOT_SCHEDULE, TRAINER),))


def occupy(base: Snapshot, used: dict[str, int], gpus_per_pod: int = 1) -> Snapshot:
    """*base* with one running gang per node using ``used[node]`` GPUs."""
    snap = base
    allocs = []
    for name, g in sorted(used.items()):
        if g:
            allocs.append((name, Resources({"nvidia.com/gpu": g, "cpu": g * 8_000,
                                            "memory": g * (64 << 30), "pods": 1})))
    occupant = make_gang("occupant", [("w", 1, Resources.of(gpu=gpus_per_pod))])
    return snap.with_running(RunningGang(occupant, tuple(allocs), start_time=0.0))


def random_occupancy(rng: random.Random, nodes: Sequence[Node], gpus: int) -> dict[str, int]:
    """~70% of GPUs busy: most nodes full, some empty, the rest partly used."""
    used = {}
    for n in nodes:
        roll = rng.random()
        used[n.name] = gpus if roll < 0.6 else 0 if roll < 0.75 else rng.randint(1, gpus - 1)
    return used


def rack_occupancy(rng: random.Random, nodes: Sequence[Node], per_rack: int) -> dict[str, int]:
    """Per-rack load drawn around 62%, so only a few racks have room for a 512-GPU gang."""
    used = {}
    for start in range(0, len(nodes), per_rack):
        load = min(max(rng.gauss(0.62, 0.14), 0.0), 1.0)
        for n in nodes[start:start + per_rack]:
            slots = sum(rng.random() < load for _ in range(2))  # two 8-GPU jobs per node
            used[n.name] = 8 * slots - (rng.random() < 0.1 and slots > 0)
    return used


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(label: str, samples: list[tuple[float, float]], results: list[PlacementResult],
           target: str) -> None:
    """Wall-clock p50/p95/max, and the p95 of CPU time (what contention cannot inflate)."""
    kinds = Counter(r.solved_by if isinstance(r, Placement) else f"unplaceable:{r.reason}"
                    for r in results)
    share = ", ".join(f"{k} {100 * v / len(results):.0f}%" for k, v in sorted(kinds.items()))
    walls = [w for w, _ in samples]
    cpus = [c for _, c in samples]
    print(f"{label}: n={len(walls)} p50 {1000 * statistics.median(walls):.2f} ms, "
          f"p95 {1000 * pct(walls, 0.95):.2f} ms, max {1000 * max(walls):.2f} ms "
          f"(cpu p95 {1000 * pct(cpus, 0.95):.2f} ms) [{target}]; {share}")


def timed(fn: Callable[[], PlacementResult]) -> tuple[tuple[float, float], PlacementResult]:
    """(wall seconds, CPU seconds of this process) spent in *fn*, and its result."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return (time.perf_counter() - w0, time.process_time() - c0), out


def scenario_a(rng: random.Random, runs: int, constraints: PodConstraints | None = None,
               label: str = "(a) 8x8 GPU, 1,000 nodes, 70% busy") -> None:
    nodes = make_nodes(1000, 50, 5, 8)
    base = Snapshot(nodes)
    gang = make_gang("a", [("worker", 8, Resources.of(gpu=8, cpu=32_000))],
                     constraints=constraints)
    (cold, _), _ = timed(lambda: solve(gang, occupy(base, random_occupancy(rng, nodes, 8))))
    times: list[tuple[float, float]] = []
    results: list[PlacementResult] = []
    for _ in range(runs):
        snap = occupy(base, random_occupancy(rng, nodes, 8))
        t, r = timed(partial(solve, gang, snap))
        times.append(t)
        results.append(r)
    report(label, times, results, "p95 < 20 ms")
    print(f"    cold first solve on a new snapshot (builds topology graph): {1000 * cold:.1f} ms")


def scenario_b(rng: random.Random, runs: int, gpus: int, label: str,
               constraints: PodConstraints | None = None) -> None:
    nodes = make_nodes(5000, 50, 10, gpus)
    base = Snapshot(nodes)
    gang = make_gang("b", [("worker", 64, Resources.of(gpu=8, cpu=32_000))],
                     TopologyConstraint(RACK, TopologyMode.REQUIRED), constraints)
    (cold, _), _ = timed(lambda: solve(gang, occupy(base, rack_occupancy(rng, nodes, 50), 8)))
    times: list[tuple[float, float]] = []
    results: list[PlacementResult] = []
    roomy: list[int] = []
    for _ in range(runs):
        used = rack_occupancy(rng, nodes, 50)
        snap = occupy(base, used, 8)
        roomy.append(sum(
            sum((gpus - used[n.name]) // 8 for n in nodes[s:s + 50]) >= 64
            for s in range(0, 5000, 50)))
        t, r = timed(partial(solve, gang, snap))
        times.append(t)
        results.append(r)
    report(label, times, results, "p95 < 300 ms")
    print(f"    racks with room per run: median {statistics.median(roomy)}; "
          f"cold first solve: {1000 * cold:.1f} ms")
    if isinstance(results[-1], Unplaceable):
        print(f"    reason: {results[-1].message}")


def scenario_c(rng: random.Random, pods: int) -> None:
    nodes = make_nodes(1000, 50, 5, 8)
    snap = occupy(Snapshot(nodes), random_occupancy(rng, nodes, 8))
    gangs = [make_gang(f"c{i}", [("w", 1, Resources.of(gpu=1, cpu=4_000))]) for i in range(pods)]
    solve(gangs[0], snap)  # warm the eligibility cache and index, as an earlier cycle would
    kinds: Counter[str] = Counter()
    w0, c0 = time.perf_counter(), time.process_time()
    for g in gangs:
        result = solve(g, snap)
        if isinstance(result, Placement):
            snap = snap.with_running(result.as_running(g, 0.0))
            kinds[result.solved_by] += 1
        else:
            kinds[str(result.reason)] += 1
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(f"(c) {pods} single-GPU pods one after another: {pods / wall:,.0f} placements/s "
          f"({1e6 * wall / pods:.0f} us each incl. with_running; cpu {pods / cpu:,.0f}/s) "
          f"[> 5,000/s]; {dict(sorted(kinds.items()))}")


#: Pod shapes of (d): (GPUs, cores). A launcher, and workers that are GPU- or cpu-heavy.
SHAPES = ((0, 16), (1, 20), (2, 4), (3, 30), (4, 8))


def tight_instance(rng: random.Random) -> tuple[Snapshot, Gang]:
    """24 nodes whose free GPU *and* cpu are exactly what some pods of SHAPES add up to,
    and a gang of exactly those pods: a placement exists, with no slack on either axis."""
    nodes = make_nodes(24, 8, 3, 8)
    pieces: Counter[tuple[int, int]] = Counter()
    allocs = []
    for n in nodes:
        gpus, cores = 0, 0
        for _ in range(rng.randint(2, 4)):
            g, c = rng.choice(SHAPES)
            if gpus + g <= 8 and cores + c <= 96:
                gpus, cores = gpus + g, cores + c
                pieces[(g, c)] += 1
        allocs.append((n.name, Resources({"nvidia.com/gpu": 8 - gpus,
                                          "cpu": (96 - cores) * 1000, "pods": 1})))
    occupant = make_gang("occupant", [("w", 1, Resources.of(gpu=1))])
    snap = Snapshot(nodes).with_running(RunningGang(occupant, tuple(allocs), start_time=0.0))
    roles = [("launcher" if g == 0 else f"worker-{g}gpu-{c}cpu", count,
              Resources({"nvidia.com/gpu": g, "cpu": c * 1000}))
             for (g, c), count in sorted(pieces.items())]
    return snap, make_gang("d", roles)


#: The request mix of (d-frag): the pod shapes of (d) that ask for GPUs, equally often.
SHAPES_MIX = Mix.observed(ShareRequest(c * 1000, 0, g) for g, c in SHAPES if g)


def scenario_d(rng: random.Random, runs: int) -> None:
    """(d), then (d-frag): the same instances with the ``fragmentation`` packing policy, so
    CP-SAT's objective carries the fragmentation term (what the term costs when it is on)."""
    times: list[tuple[float, float]] = []
    results: list[PlacementResult] = []
    instances: list[tuple[Snapshot, Gang]] = []
    tries = 0
    while len(times) < runs and tries < 50 * runs:
        tries += 1
        snap, gang = tight_instance(rng)
        if isinstance(solve(gang, snap, PlacementParams(use_cpsat=False)), Placement):
            continue  # greedy alone manages this one; we want the ones it does not
        t, r = timed(partial(solve, gang, snap))
        times.append(t)
        results.append(r)
        instances.append((snap, gang))
    if not times:
        return
    report(f"(d) tight multi-role packing, greedy fails ({len(times)} of {tries} drawn)",
           times, results, "CP-SAT must place them")
    policy = PlacementParams(fragmentation_mix=SHAPES_MIX)
    timed_frag = [timed(partial(solve, gang, snap, policy)) for snap, gang in instances]
    report("(d-frag) the same instances, fragmentation packing policy (CP-SAT's term on)",
           [t for t, _ in timed_frag], [r for _, r in timed_frag], "CP-SAT must place them")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs, for a smoke test")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    runs = 20 if args.quick else 200
    rng = random.Random(args.seed)
    scenario_a(rng, runs)
    scenario_a(rng, runs, SPREAD_OVER_BLOCKS,
               "(a+) the same with anti-affinity per host and spread over blocks")
    scenario_b(rng, max(runs // 4, 5), 16, "(b) 64x8 GPU in one rack, 5,000 16-GPU nodes")
    scenario_b(rng, max(runs // 4, 5), 16,
               "(b+) the same with affinity per rack and spread per host", ONE_RACK_BY_AFFINITY)
    scenario_b(rng, max(runs // 10, 3), 8, "(b-never) same gang, 8-GPU nodes")
    scenario_c(rng, 1000)
    scenario_d(rng, max(runs // 10, 5))


if __name__ == "__main__":
    main()
