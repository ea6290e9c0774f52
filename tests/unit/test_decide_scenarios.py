"""Scenario tables for ``decide``: nodes, queues, running and pending gangs in; binds,
evictions and pending reasons out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from policies.queues import Queue
from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan, ReasonCategory
from scheduler.model import Gang, Node, RunningGang
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

R = ReasonCategory
A100 = nodes("a100", 4)  # 32 GPUs, racks of 2 nodes
TEAMS = (queue("research"), queue("a", "research", quota={"a100": 16}),
         queue("b", "research", quota={"a100": 16}))
#: Quota larger than the cluster: capacity is what limits.
AMPLE = (queue("research"), queue("a", "research", quota={"a100": 64}),
         queue("b", "research", quota={"a100": 64}))


@dataclass(frozen=True)
class Scenario:
    name: str
    pending: Sequence[Gang]
    queues: Sequence[Queue] = TEAMS
    running: Sequence[RunningGang] = ()
    nodes: Sequence[Node] = tuple(A100)
    now: float = 10_000.0
    policy: Mapping[str, Any] = field(default_factory=dict)
    binds: Sequence[str] = ()
    evictions: Sequence[str] = ()
    reasons: Mapping[str, ReasonCategory] = field(default_factory=dict)


def run(s: Scenario) -> CyclePlan:
    pol = policies(*s.queues, **s.policy)
    return decide(Snapshot(s.nodes, s.running), s.pending, pol, s.now, solver=SOLVE)


def b_filler(n: int = 4, **kw: Any) -> list[RunningGang]:
    """Queue b running one 8-GPU gang on each of the first *n* nodes (borrowing past 2)."""
    return [running(gang(f"b{i}", "b", **kw), {f"a100-{i:04d}": 1}, start=0.0)
            for i in range(n)]


SCENARIOS = [
    Scenario("fits", [gang("a0", "a", gpus=8, pods=2)], binds=["ns/a0"]),
    Scenario("waiting for members", [gang("a0", "a", pods=2, present=1)],
             reasons={"ns/a0": R.WAITING_FOR_MEMBERS}),
    Scenario("unknown queue", [gang("x", "nope")], reasons={"ns/x": R.NOT_ALLOWED}),
    Scenario("parent queue has no gangs", [gang("x", "research")],
             reasons={"ns/x": R.NOT_ALLOWED}),
    Scenario("namespace not permitted",
             [gang("x", "a")], queues=(queue("research"),
                                       queue("a", "research", quota={"a100": 16},
                                             namespaces=("team-a",))),
             reasons={"ns/x": R.NOT_ALLOWED}),
    Scenario("no node the pods may use", [gang("x", "a", pool="tpu")],
             reasons={"ns/x": R.PLACEMENT}),
    Scenario("never admissible: bigger than quota plus all it may borrow",
             [gang("x", "a", pods=5)], nodes=tuple(nodes("a100", 6)),
             reasons={"ns/x": R.QUOTA}),
    # Bigger than the pool too: that is the answer (more quota would not help).
    Scenario("bigger than its pool and its quota", [gang("x", "a", pods=5)],
             reasons={"ns/x": R.PLACEMENT}),
    Scenario("over quota without a parent", [gang("x", "solo", gpus=8, pods=2)],
             queues=(queue("solo", quota={"a100": 8}),), reasons={"ns/x": R.QUOTA}),
    Scenario("no quota in the pool", [gang("x", "solo")],
             queues=(queue("solo", quota={"h100": 8}),), reasons={"ns/x": R.QUOTA}),
    Scenario("borrows idle quota of a sibling", [gang("a0", "a", pods=3)], binds=["ns/a0"]),
    Scenario("borrowing limit", [gang("a0", "a", pods=3)],
             queues=(queue("research"), queue("a", "research", quota={"a100": 16},
                                                borrow={"a100": 4}),
                     queue("b", "research", quota={"a100": 16})),
             reasons={"ns/a0": R.QUOTA}),
    Scenario("lending limit", [gang("a0", "a", pods=3)],
             queues=(queue("research"), queue("a", "research", quota={"a100": 16}),
                     queue("b", "research", quota={"a100": 16}, lend={"a100": 4})),
             reasons={"ns/a0": R.QUOTA}),
    Scenario("never partial: a gang larger than what is free waits whole",
             [gang("a0", "a", pods=3)], running=b_filler(2), queues=AMPLE,
             policy={"preemption": False, "reservation": False},
             reasons={"ns/a0": R.PLACEMENT}),
    Scenario("topology: free GPUs but no free rack",
             [gang("a0", "a", gpus=8, pods=2, rack=True)],
             running=[running(gang("b0", "b"), {"a100-0000": 1}),
                      running(gang("b1", "b"), {"a100-0002": 1})],
             policy={"preemption": False, "reservation": False},
             reasons={"ns/a0": R.TOPOLOGY}),
    Scenario("reclaim: owner takes its quota back from a borrower",
             [gang("a0", "a", pods=2)], running=b_filler(4), binds=[],
             evictions=["ns/b0", "ns/b1"], reasons={"ns/a0": R.PREEMPTION_PENDING}),
    Scenario("reclaim LowerPriority needs a lower priority",
             [gang("a0", "a", pods=2)], running=b_filler(4),
             queues=(queue("research"), queue("a", "research", quota={"a100": 16},
                                                reclaim="LowerPriority"),
                     queue("b", "research", quota={"a100": 16})),
             policy={"reservation": False}, reasons={"ns/a0": R.QUOTA}),
    Scenario("a borrower cannot preempt a queue within its quota",
             [gang("b9", "b", priority=9)],
             running=[running(gang(f"a{i}", "a"), {f"a100-{i:04d}": 1}) for i in range(2)]
             + b_filler(4)[2:],
             queues=(queue("research"), queue("a", "research", quota={"a100": 16}),
                     queue("b", "research", quota={"a100": 16}, within="Never")),
             policy={"reservation": False}, reasons={"ns/b9": R.QUOTA}),
    Scenario("within queue: lower priority is preempted",
             [gang("a9", "a", priority=5)],
             running=[running(gang(f"a{i}", "a", priority=i), {f"a100-{i:04d}": 1})
                      for i in range(2)] + b_filler(4)[2:],
             queues=(queue("research"), queue("a", "research", quota={"a100": 16},
                                                reclaim="Never"),
                     queue("b", "research", quota={"a100": 16})),
             evictions=["ns/a0"], reasons={"ns/a9": R.PREEMPTION_PENDING}),
    Scenario("within queue Never", [gang("a9", "a", priority=5)],
             running=[running(gang(f"a{i}", "a"), {f"a100-{i:04d}": 1}) for i in range(2)]
             + b_filler(4)[2:],
             queues=(queue("research"), queue("a", "research", quota={"a100": 16},
                                                within="Never", reclaim="Never"),
                     queue("b", "research", quota={"a100": 16})),
             policy={"reservation": False}, reasons={"ns/a9": R.QUOTA}),
    Scenario("minRuntimeSeconds protects young gangs", [gang("a0", "a", pods=2)],
             running=b_filler(4), now=100.0,
             queues=(queue("research"), queue("a", "research", quota={"a100": 16}),
                     queue("b", "research", quota={"a100": 16}, min_runtime=600)),
             policy={"reservation": False}, reasons={"ns/a0": R.QUOTA}),
    Scenario("least work lost: checkpointed victims first", [gang("a0", "a", pods=1)],
             running=[running(gang(f"b{i}", "b"), {f"a100-{i:04d}": 1},
                              checkpoint=[0.0, 0.0, 9_000.0, 9_500.0][i]) for i in range(4)],
             evictions=["ns/b3"], reasons={"ns/a0": R.PREEMPTION_PENDING}),
    Scenario("fewest gangs when work lost ties", [gang("a0", "a", gpus=8, pods=1)],
             running=[running(gang("b-small0", "b", gpus=4), {"a100-0002": 1}),
                      running(gang("b-small1", "b", gpus=4), {"a100-0002": 1}),
                      running(gang("b-big", "b", gpus=8), {"a100-0003": 1}),
                      *b_filler(2)],
             evictions=["ns/b-big"], reasons={"ns/a0": R.PREEMPTION_PENDING}),
    Scenario("StrictFIFO: the head blocks its queue",
             [gang("a0", "a", pods=3, created=1), gang("a1", "a", pods=1, created=2)],
             running=b_filler(2, runtime=100.0),
             queues=(queue("research"), queue("a", "research", quota={"a100": 64},
                                                strategy="StrictFIFO"),
                     queue("b", "research", quota={"a100": 0})),
             policy={"preemption": False},
             reasons={"ns/a0": R.RESERVED, "ns/a1": R.QUEUED}),
    Scenario("BestEffort: a later gang may start",
             [gang("a0", "a", pods=3, created=1), gang("a1", "a", pods=1, created=2)],
             running=b_filler(2),
             queues=(queue("research"), queue("a", "research", quota={"a100": 64}),
                     queue("b", "research", quota={"a100": 0})),
             policy={"preemption": False, "reservation": False},
             binds=["ns/a1"], reasons={"ns/a0": R.PLACEMENT}),
    Scenario("reservation, then EASY backfill around it",
             [gang("a0", "a", pods=3, created=1),
              gang("a1", "a", created=2, runtime=500.0),  # ends before the reservation
              gang("a2", "a", created=3, runtime=5000.0),  # must keep off reserved nodes
              gang("a3", "a", created=4, runtime=5000.0)],  # and then nothing is left
             running=[running(gang(f"b{i}", "b"), {f"a100-{i:04d}": 1}, end=11_000.0)
                      for i in range(2)],
             queues=AMPLE, binds=["ns/a1", "ns/a2"],
             reasons={"ns/a0": R.RESERVED, "ns/a3": R.QUEUED}),
    Scenario("a queue without backfill waits behind a reservation",
             [gang("a0", "a", pods=3, created=1), gang("b9", "b", created=2, runtime=1.0)],
             running=[running(gang(f"b{i}", "b"), {f"a100-{i:04d}": 1}, end=11_000.0)
                      for i in range(2)],
             queues=(queue("research"), queue("a", "research", quota={"a100": 64}),
                     queue("b", "research", quota={"a100": 64}, backfill=False)),
             reasons={"ns/a0": R.RESERVED, "ns/b9": R.QUEUED}),
    Scenario("fifo-gang: head-of-line blocking across queues",
             [gang("a0", "a", pods=3, created=1), gang("b9", "b", pods=1, created=2)],
             running=b_filler(2, runtime=100.0), queues=AMPLE, policy={"preset": "fifo-gang"},
             reasons={"ns/a0": R.PLACEMENT, "ns/b9": R.QUEUED}),
]


@pytest.mark.parametrize("s", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(s: Scenario) -> None:
    if "preset" in s.policy:
        plan = decide(Snapshot(s.nodes, s.running), s.pending,
                      policies(*s.queues, preset=s.policy["preset"]), s.now, solver=SOLVE)
    else:
        plan = run(s)
    assert sorted(b.gang_id for b in plan.binds) == sorted(s.binds)
    assert sorted(e.victim for e in plan.evictions) == sorted(s.evictions)
    assert {g: r.category for g, r in plan.pending.items()} == dict(s.reasons), \
        {g: str(r) for g, r in plan.pending.items()}
