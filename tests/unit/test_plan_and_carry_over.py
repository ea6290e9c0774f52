"""The plan as a value: pod mapping, carried nominations and reservations, tallies, explain."""

from __future__ import annotations

from dataclasses import replace

from scheduler.decide.cycle import NOMINATION_TIMEOUT_SECONDS, decide
from scheduler.decide.plan import CyclePlan, ReasonCategory, explain
from scheduler.decide.tallies import queue_tallies
from scheduler.model.demand import gpus_of
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

A100 = nodes("a100", 4)
TEAMS = policies(queue("research"), queue("a", "research", quota={"a100": 16}),
                 queue("b", "research", quota={"a100": 16}))
B_FULL = [running(gang(f"b{i}", "b"), {f"a100-{i:04d}": 1}) for i in range(4)]


def test_pod_nodes_follow_role_pods_in_order() -> None:
    g = gang("a0", "a", gpus=4, pods=4, with_pods=True)
    plan = decide(Snapshot(A100), [g], TEAMS, 0.0, solver=SOLVE)
    (bind,) = plan.binds
    pods = [ref.name for ref, _ in bind.pod_nodes]
    assert pods == ["a0-0", "a0-1", "a0-2", "a0-3"]
    per_node: dict[str, int] = {}
    for _, node in bind.pod_nodes:
        per_node[node] = per_node.get(node, 0) + 1
    assert per_node == {a.node: a.count for a in bind.placement.assignments}


def test_no_pods_no_mapping() -> None:
    plan = decide(Snapshot(A100), [gang("a0", "a")], TEAMS, 0.0, solver=SOLVE)
    assert plan.binds[0].pod_nodes == ()


def _preempt() -> tuple[CyclePlan, Snapshot]:
    snap = Snapshot(A100, B_FULL)
    plan = decide(snap, [gang("a0", "a", pods=2)], TEAMS, 1000.0, solver=SOLVE)
    assert [e.victim for e in plan.evictions] == ["ns/b0", "ns/b1"]
    assert all(e.preemptor == "ns/a0" for e in plan.evictions)
    return plan, snap


def test_nominated_nodes_are_kept_while_victims_terminate() -> None:
    plan, snap = _preempt()
    (nom,) = plan.nominations
    # One victim has gone, the other is still terminating: nothing else takes the node.
    snap2 = snap.without_gangs(["ns/b0"])
    later = gang("b9", "b", created=2000.0)
    plan2 = decide(snap2, [gang("a0", "a", pods=2), later], TEAMS, 1001.0, previous=plan,
                   solver=SOLVE)
    assert plan2.binds == () and plan2.evictions == ()
    assert plan2.pending["ns/a0"].category is ReasonCategory.PREEMPTION_PENDING
    assert plan2.nominations == (nom,)
    assert plan2.pending["ns/b9"].category is not ReasonCategory.PREEMPTION_PENDING


def test_preemptor_binds_first_once_victims_are_gone() -> None:
    plan, snap = _preempt()
    snap2 = snap.without_gangs(["ns/b0", "ns/b1"])
    rival = gang("b9", "b", created=0.0, pods=2)
    plan2 = decide(snap2, [rival, gang("a0", "a", pods=2)], TEAMS, 1002.0, previous=plan,
                   solver=SOLVE)
    assert [b.gang_id for b in plan2.binds] == ["ns/a0"]
    assert plan2.order[0] == "ns/a0"
    assert plan2.nominations == ()


def test_stale_nomination_is_dropped() -> None:
    plan, snap = _preempt()
    later = 1000.0 + NOMINATION_TIMEOUT_SECONDS + 1
    plan2 = decide(snap, [gang("a0", "a", pods=2)], TEAMS, later, previous=plan, solver=SOLVE)
    assert all(n.since == later for n in plan2.nominations)


def test_previously_reserved_gang_goes_first() -> None:
    pol = policies(queue("research"), queue("a", "research", quota={"a100": 64}),
                   queue("b", "research", quota={"a100": 64}, weight=100))
    busy = [running(gang(f"b{i}", "b"), {f"a100-{i:04d}": 1}, end=500.0) for i in range(2)]
    big = gang("a0", "a", pods=3)
    plan = decide(Snapshot(A100, busy), [big], pol, 0.0, solver=SOLVE)
    assert plan.pending["ns/a0"].category is ReasonCategory.RESERVED
    (res,) = plan.reservations
    assert res.estimated_start == 500.0 and len(res.nodes) == 3
    # b's gangs are done; b is far behind in fair share and older, but a0 keeps its turn.
    rival = gang("b9", "b", pods=2, created=-1.0, priority=10)
    plan2 = decide(Snapshot(A100), [rival, big], pol, 500.0, previous=plan, solver=SOLVE)
    assert plan2.binds[0].gang_id == "ns/a0"


def test_queue_tallies() -> None:
    snap = Snapshot(A100, B_FULL[:2])
    pending = [gang("a0", "a"), gang("x", "a", present=0)]
    plan = decide(snap, pending, TEAMS, 0.0, solver=SOLVE)
    tally = {q.name: q for q in queue_tallies(snap, pending, TEAMS, plan)}
    assert tally["a"].admitted == 1 and tally["a"].running == 1
    assert tally["a"].pending == 1  # the gang still waiting for its members
    assert tally["b"].running == 2 and tally["b"].usage[0][0] == "a100"
    assert gpus_of(tally["b"].usage[0][1]) == 16
    assert tally["b"].borrowed_share == 0.0  # within its nominal quota


def test_explain() -> None:
    plan, _ = _preempt()
    text = explain(plan, "ns/a0")
    assert "preempts ns/b0" in text and "PreemptionPending (#1 of 1" in text
    assert "evicted for ns/a0" in explain(plan, "ns/b0")
    assert "not in this cycle" in explain(plan, "ns/zzz")


def test_same_input_same_plan() -> None:
    gangs = [gang(f"{q}{i}", q, pods=1 + i % 3, created=float(i), priority=i % 2)
             for q in "ab" for i in range(6)]
    snap = Snapshot(A100, B_FULL[:1])
    first = decide(snap, gangs, TEAMS, 50.0, solver=SOLVE)
    again = decide(snap, list(reversed(gangs)), TEAMS, 50.0, solver=SOLVE)
    assert first == again


def test_no_preemption_loop_after_a_reclaim() -> None:
    plan, snap = _preempt()
    gone = snap.without_gangs(["ns/b0", "ns/b1"])
    a0 = gang("a0", "a", pods=2)
    plan2 = decide(gone, [a0], TEAMS, 1010.0, previous=plan, solver=SOLVE)
    (bind,) = plan2.binds
    after = gone.with_running(bind.placement.as_running(a0, 1010.0))
    # The victims come back, even with a higher priority: a is within its own quota now.
    back = [gang("b0", "b", priority=9), gang("b1", "b", priority=9)]
    plan3 = decide(after, back, TEAMS, 1020.0, previous=plan2, solver=SOLVE)
    assert "ns/a0" not in {e.victim for e in plan3.evictions}
    # (they may still preempt lower-priority gangs of their own queue)
    assert {e.victim for e in plan3.evictions} <= {"ns/b2", "ns/b3"}


def test_elastic_gang_gets_optional_members_only_within_quota() -> None:
    g = gang("el", "solo", pods=4, with_pods=True)
    g = replace(g, roles=(replace(g.roles[0], min_count=2),))
    pol = policies(queue("solo", quota={"a100": 16}))
    (bind,) = decide(Snapshot(A100), [g], pol, 0.0, solver=SOLVE).binds
    assert bind.placement.pods_placed() == 2 and len(bind.pod_nodes) == 2
    roomy = policies(queue("solo", quota={"a100": 32}))
    (bind,) = decide(Snapshot(A100), [g], roomy, 0.0, solver=SOLVE).binds
    assert bind.placement.pods_placed() == 4
