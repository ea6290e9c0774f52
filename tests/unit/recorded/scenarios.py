"""Seeded scenarios for the recorded-decisions test: clusters, queues and gangs that exercise
every rule of ``decide``, and a few cycles of each (the previous plan carried over).

Deterministic: scenario *n* is built from ``random.Random(n)`` alone, so the digests recorded
in ``plans.json`` stay comparable across versions of the decision code. Changing this module
changes the scenarios: record again (``tests/unit/recorded/README.md``).
"""

from __future__ import annotations

import random
from dataclasses import replace

from policies.queues import OrderingMode, PolicySet, Queue
from policies.quota import QuotaLedger, QuotaTree
from scheduler.model import Gang, RunningGang, TopologyConstraint, TopologyMode
from scheduler.model.pods import PreemptionPolicy
from scheduler.model.resources import GPU, Resources
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import RACK, admit, gang, nodes, policies, queue
from tests.unit.test_decide_properties import PARAMS, World


def _queues(rng: random.Random, pools: tuple[str, ...]) -> list[Queue]:
    names = ["a", "b", "c"][: rng.randint(2, 3)]
    out = [queue("p")]
    for name in names:
        quota = {p: rng.choice([0, 8, 16, 24, 32]) for p in pools}
        borrow = {p: rng.choice([0, 8, 64]) for p in pools} if rng.random() < 0.5 else None
        lend = ({p: min(quota[p], rng.choice([0, 8, 64])) for p in pools}
                if rng.random() < 0.5 else None)
        out.append(queue(
            name, "p", weight=rng.choice([1.0, 2.0, 3.0]), quota=quota, borrow=borrow,
            lend=lend, within=rng.choice(["LowerPriority", "LowerPriority", "Never"]),
            reclaim=rng.choice(["Never", "LowerPriority", "Any"]),
            min_runtime=rng.choice([0.0, 0.0, 5_000.0]),
            strategy="StrictFIFO" if rng.random() < 0.15 else "BestEffort",
            backfill=rng.random() > 0.15, runtime=rng.choice([None, 600.0, 3600.0]),
            namespaces=("ns",) if rng.random() > 0.04 else ("other",)))
    if rng.random() < 0.3:  # a second tree, with a queue of its own
        out.append(queue("solo", quota={p: 16 for p in pools}))
    return out


def _policies(rng: random.Random, queues: list[Queue]) -> PolicySet:
    preset = rng.choice(["gang-scheduler", "gang-scheduler", "gang-scheduler", "fifo-gang",
                         "greedy-gang"])
    overrides: dict[str, object] = {}
    if preset == "gang-scheduler":
        overrides["reserve_after_seconds"] = rng.choice([0.0, 0.0, 9_950.0, 1e9])
        overrides["max_reservations"] = rng.choice([1, 1, 2])
        if rng.random() < 0.06:
            overrides["backfill"] = False
        if rng.random() < 0.1:
            overrides["ordering"] = OrderingMode.FIFO
    return policies(*queues, preset=preset, **overrides)


def _running(rng: random.Random, pol: PolicySet, snap: Snapshot,
             pools: tuple[str, ...]) -> Snapshot:
    """Running gangs admitted the way the scheduler would: within quota, where they fit."""
    names = [q.name for q in pol.queues if q.parent]
    ledger = QuotaLedger.empty(QuotaTree.build(pol.queues))
    for i in range(rng.randint(0, 14)):
        g = gang(f"r{i}", rng.choice(names), gpus=rng.choice([2, 4, 8]),
                 pods=rng.randint(1, 3), priority=rng.randint(0, 2), pool=rng.choice(pools),
                 with_pods=True)
        admitted = admit(g, snap, ledger, PARAMS)
        if admitted is None:
            continue
        result, ledger = admitted
        start = rng.choice([0.0, 8_000.0, 9_900.0])
        snap = snap.with_running(RunningGang(
            g, result.allocations(g), start_time=start,
            last_checkpoint=rng.choice([None, 9_000.0]),
            expected_end=rng.choice([None, start + 1_000.0, start + 5_000.0, start + 20_000.0]),
            terminating=rng.random() < 0.1))
    return snap


def _pending_one(rng: random.Random, i: int, names: list[str],
                 pools: tuple[str, ...]) -> Gang:
    g = gang(f"g{i}", rng.choice(names), gpus=rng.choice([1, 2, 4, 8]), pods=rng.randint(1, 4),
             priority=rng.randint(0, 5), created=float(rng.randint(0, 100)),
             pool=rng.choice((*pools, None)), rack=rng.random() < 0.15,
             runtime=rng.choice([None, 300.0, 30_000.0]), with_pods=True)
    roll = rng.random()
    if roll < 0.08:
        g = replace(g, preemption_policy=PreemptionPolicy.NEVER)
    elif roll < 0.14:
        g = replace(g, topology=TopologyConstraint(RACK, TopologyMode.PREFERRED))
    elif roll < 0.22 and g.roles[0].count > 1:  # elastic: some members optional
        role = g.roles[0]
        g = replace(g, roles=(replace(role, min_count=rng.randint(1, role.count - 1)),))
    elif roll < 0.27:  # still waiting for members, maybe with minResources
        g = replace(g, present_members=0, declared_min_member=g.size + 1,
                    min_resources=rng.choice([None, Resources({GPU: rng.choice([4, 1000])})]))
    return g


def _pending(rng: random.Random, pol: PolicySet, pools: tuple[str, ...]) -> tuple[Gang, ...]:
    names = [q.name for q in pol.queues if q.parent]
    out = [_pending_one(rng, i, names, pools) for i in range(rng.randint(1, 12))]
    odd = rng.random()
    if odd < 0.1:
        out.append(replace(out[0], id="ns/lost", uid="uid-lost", name="lost", queue="nowhere"))
    elif odd < 0.2:
        out.append(replace(out[0], id="ns/top", uid="uid-top", name="top", queue="p"))
    for g in list(out[:3]):  # lookalikes: the same shape under other names and ages
        for k in range(rng.randint(0, 2)):
            name = f"{g.name}-copy{k}"
            out.append(replace(g, id=f"ns/{name}", uid=f"uid-{name}", name=name,
                               creation_time=g.creation_time + rng.randint(-5, 5),
                               runtime_estimate=rng.choice([None, 300.0, 30_000.0])))
    return tuple(out)


def scenario(seed: int) -> World:
    rng = random.Random(seed)
    pools = ("a100", "h100") if rng.random() < 0.7 else ("a100",)
    ns = [n for p in pools for n in nodes(p, rng.randint(2, 6))]
    pol = _policies(rng, _queues(rng, pools))
    snap = _running(rng, pol, Snapshot(ns), pools)
    return World(snap, pol, _pending(rng, pol, pools))
