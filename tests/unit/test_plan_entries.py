"""The plan is enough to act on: every decision an actuator carries out is a plan entry.

Give-ups (past scheduleTimeoutSeconds), backoffs (inputs, not decisions), rollbacks of partly
bound gangs, groups of pods that are not gangs yet, the pods of evictions, nominations and
pending gangs all come out of ``decide``, so neither actuator looks anything up again.
"""

from __future__ import annotations

from dataclasses import replace

from scheduler.cycle import decide
from scheduler.housekeeping import FormationProblem, Housekeeping, PartlyBound
from scheduler.model import PodRef
from scheduler.plan import ReasonCategory, explain
from scheduler.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

NOW = 10_000.0
POLICIES = policies(queue("q", quota={"a100": 64}, within="LowerPriority"))
NODES = nodes("a100", 2)
BOUND = (PodRef("ns", "half-0", "uid-half-0"),)


def test_a_gang_past_its_deadline_is_given_up_with_its_pods_and_not_considered() -> None:
    late = replace(gang("late", "q", pool="a100", with_pods=True), pod_group=True,
                   schedule_deadline=NOW - 1, creation_time=NOW - 61)
    plan = decide(Snapshot(NODES), [late], POLICIES, NOW, solver=SOLVE)
    assert plan.binds == () and "ns/late" not in plan.pending
    (give_up,) = plan.give_ups
    assert give_up.gang_id == "ns/late" and "(60s)" in give_up.message
    assert give_up.members.pods == late.pods and give_up.members.group_uid == late.uid
    assert explain(plan, "ns/late").startswith("ns/late: given up: not scheduled within")


def test_a_gang_backing_off_is_neither_considered_nor_given_up() -> None:
    waiting = replace(gang("w", "q", pool="a100"), schedule_deadline=NOW - 1)
    house = Housekeeping(backoff={"ns/w": NOW + 5})
    plan = decide(Snapshot(NODES), [waiting], POLICIES, NOW, solver=SOLVE, house=house)
    assert (plan.binds, plan.give_ups, dict(plan.pending)) == ((), (), {})
    later = decide(Snapshot(NODES), [waiting], POLICIES, NOW + 5, solver=SOLVE, house=house)
    assert [g.gang_id for g in later.give_ups] == ["ns/w"]  # its backoff is over


def test_a_partly_bound_gang_is_rolled_back_unless_this_cycle_completes_it() -> None:
    rest = gang("half", "q", pool="a100", gpus=8, pods=1)
    never_started = Housekeeping(partly_bound={"ns/half": PartlyBound(BOUND, started=False)})
    full = Snapshot(NODES, [running(gang(f"r{i}", "q", priority=9), {f"a100-000{i}": 1})
                            for i in range(2)])
    plan = decide(full, [rest], POLICIES, NOW, solver=SOLVE, house=never_started)
    (rollback,) = plan.rollbacks
    assert (rollback.gang_id, rollback.pods, rollback.takeover) == ("ns/half", BOUND, False)
    assert rollback.reason.startswith(str(plan.pending["ns/half"].category))
    completed = decide(Snapshot(NODES), [rest], POLICIES, NOW, solver=SOLVE,
                       house=never_started)
    assert [b.gang_id for b in completed.binds] == ["ns/half"] and completed.rollbacks == ()


def test_a_partly_bound_gang_that_started_is_rolled_back_only_on_a_takeover() -> None:
    started = {"ns/half": PartlyBound(BOUND, started=True)}
    full = Snapshot(NODES, [running(gang(f"r{i}", "q", priority=9), {f"a100-000{i}": 1})
                            for i in range(2)])
    rest = gang("half", "q", pool="a100")
    plan = decide(full, [rest], POLICIES, NOW, solver=SOLVE,
                  house=Housekeeping(partly_bound=started))
    assert plan.rollbacks == ()
    plan = decide(full, [rest], POLICIES, NOW, solver=SOLVE,
                  house=Housekeeping(partly_bound=started, takeover=True))
    assert [(r.gang_id, r.takeover) for r in plan.rollbacks] == [("ns/half", True)]
    assert "rolled back (1 bound pods deleted)" in explain(plan, "ns/half")


def test_groups_of_pods_that_are_not_gangs_get_their_reason_on_their_pods() -> None:
    pods = (PodRef("ns", "orphan-0", "u0"),)
    house = Housekeeping(unformed={"ns/orphan": FormationProblem("PodGroup missing", pods)})
    plan = decide(Snapshot(NODES), [], POLICIES, NOW, solver=SOLVE, house=house)
    (unformed,) = plan.unformed
    assert unformed.gang_id == "ns/orphan" and unformed.members.pods == pods
    assert unformed.reason.category is ReasonCategory.WAITING_FOR_MEMBERS
    assert unformed.reason.message == "PodGroup missing"


def test_evictions_nominations_and_pending_gangs_name_their_pods() -> None:
    victim = running(gang("low", "q", pool="a100", pods=2, with_pods=True),
                     {"a100-0000": 1, "a100-0001": 1}, start=0.0)
    urgent = gang("urgent", "q", pool="a100", pods=2, priority=5, with_pods=True)
    late = gang("late", "q", pool="a100", pods=2, created=1.0, with_pods=True)
    plan = decide(Snapshot(NODES, [victim]), [urgent, late], POLICIES, NOW, solver=SOLVE)
    (eviction,) = plan.evictions
    assert (eviction.victim, eviction.queue) == ("ns/low", "q")
    assert eviction.pods == victim.gang.pods
    (nomination,) = plan.nominations
    assert sorted(p.name for p, _ in nomination.pod_nodes) == ["urgent-0", "urgent-1"]
    assert {n for _, n in nomination.pod_nodes} == set(nomination.nodes)
    assert plan.members["ns/late"].pods == late.pods
    assert plan.members["ns/urgent"].pods == urgent.pods
