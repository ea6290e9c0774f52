"""The plan is enough to act on: every decision an actuator carries out is a plan entry.

Backoffs (inputs, not decisions), rollbacks of partly bound gangs (after their PodGroup's
scheduleTimeoutSeconds, never a give-up for waiting), groups of pods that are not gangs yet,
the pods of evictions, nominations and pending gangs all come out of ``decide``, so neither
actuator looks anything up again.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.decide import housekeeping
from scheduler.decide.cycle import decide
from scheduler.decide.housekeeping import (
    FailedBind,
    FormationProblem,
    Housekeeping,
    PartlyBound,
)
from scheduler.decide.plan import (
    PendingReason,
    ReasonCategory,
    RollbackCause,
    explain,
)
from scheduler.model import Gang, PodRef
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

NOW = 10_000.0
POLICIES = policies(queue("q", quota={"a100": 64}, within="LowerPriority"))
NODES = nodes("a100", 2)
BOUND = (PodRef("ns", "half-0", "uid-half-0"),)


def test_a_gang_backing_off_is_not_considered_until_its_backoff_is_over() -> None:
    waiting = gang("w", "q", pool="a100")
    house = Housekeeping(backoff={"ns/w": NOW + 5})
    plan = decide(Snapshot(NODES), [waiting], POLICIES, NOW, solver=SOLVE, house=house)
    assert (plan.binds, dict(plan.pending)) == ((), {})
    later = decide(Snapshot(NODES), [waiting], POLICIES, NOW + 5, solver=SOLVE, house=house)
    assert [b.gang_id for b in later.binds] == ["ns/w"]


REFUSED = FailedBind("claims not bound: claim ns/w-gpu: 409 Conflict", False, 4)


@pytest.mark.parametrize("others", [[], [gang("other", "q", pool="a100")]],
                         ids=["alone", "beside a gang decided this cycle"])
def test_a_gang_whose_bind_was_refused_says_why_on_its_pods_while_it_backs_off(
        others: list[Gang]) -> None:
    """A refusal that repeats (a claim write rejected, a webhook) must be seen where users
    look, not only in the scheduler's log; its text stays the same while it backs off."""
    waiting = gang("w", "q", pool="a100")
    house = Housekeeping(backoff={"ns/w": NOW + 4}, failed_binds={"ns/w": REFUSED})
    texts = set()
    for now in (NOW, NOW + 2):
        plan = decide(Snapshot(NODES), [waiting, *others], POLICIES, now, solver=SOLVE,
                      house=house)
        assert "ns/w" not in {b.gang_id for b in plan.binds}
        reason = plan.pending["ns/w"]
        assert reason.category is ReasonCategory.BACKOFF
        assert plan.members["ns/w"].pods == waiting.pods
        texts.add(str(reason))
    assert texts == {"Backoff: its last bind was refused: claims not bound: claim "
                     "ns/w-gpu: 409 Conflict; retried after a 4s backoff"}
    later = decide(Snapshot(NODES), [waiting], POLICIES, NOW + 4, solver=SOLVE, house=house)
    assert [b.gang_id for b in later.binds] == ["ns/w"] and "ns/w" not in later.pending


@pytest.mark.parametrize("failed", [FailedBind("no reply", True, 4), FailedBind("", False, 4)],
                         ids=["unanswered: parked on its nodes", "rolled back for its timeout"])
def test_a_gang_parked_or_rolled_back_gets_no_bind_failed_reason(failed: FailedBind) -> None:
    house = Housekeeping(backoff={"ns/w": NOW + 4}, failed_binds={"ns/w": failed})
    plan = decide(Snapshot(NODES), [gang("w", "q", pool="a100")], POLICIES, NOW, solver=SOLVE,
                  house=house)
    assert dict(plan.pending) == {} and dict(plan.members) == {}


def test_a_partly_bound_gang_is_rolled_back_unless_this_cycle_completes_it() -> None:
    rest = gang("half", "q", pool="a100", gpus=8, pods=1)
    never_started = Housekeeping(partly_bound={"ns/half": PartlyBound(BOUND, False, NOW)})
    full = Snapshot(NODES, [running(gang(f"r{i}", "q", priority=9), {f"a100-000{i}": 1})
                            for i in range(2)])
    plan = decide(full, [rest], POLICIES, NOW, solver=SOLVE, house=never_started)
    (rollback,) = plan.rollbacks
    assert (rollback.gang_id, rollback.pods, rollback.takeover) == ("ns/half", BOUND, False)
    assert rollback.reason.startswith(str(plan.pending["ns/half"].category))
    completed = decide(Snapshot(NODES), [rest], POLICIES, NOW, solver=SOLVE,
                       house=never_started)
    assert [b.gang_id for b in completed.binds] == ["ns/half"] and completed.rollbacks == ()


FULL = Snapshot(NODES, [running(gang(f"r{i}", "q", priority=9), {f"a100-000{i}": 1})
                        for i in range(2)])
REST = gang("half", "q", pool="a100")


def started_since(since: float, **house: object) -> Housekeeping:
    return Housekeeping(partly_bound={"ns/half": PartlyBound(BOUND, True, since)},
                        **house)  # type: ignore[arg-type]


def test_a_partly_bound_gang_that_started_is_rolled_back_on_a_takeover_or_after_its_grace(
        ) -> None:
    # Within its grace, on a running scheduler: kept, its rest tried again every cycle.
    plan = decide(FULL, [REST], POLICIES, NOW, solver=SOLVE, house=started_since(NOW - 59))
    assert plan.rollbacks == () and "ns/half" in plan.pending
    plan = decide(FULL, [REST], POLICIES, NOW, solver=SOLVE,
                  house=started_since(NOW, takeover=True))
    assert [(r.gang_id, r.takeover) for r in plan.rollbacks] == [("ns/half", True)]
    assert "rolled back (1 bound pods deleted, NoRoom)" in explain(plan, "ns/half")
    # Past its grace, without a restart: its bound members stop keeping GPUs for nothing.
    plan = decide(FULL, [REST], POLICIES, NOW, solver=SOLVE, house=started_since(NOW - 60))
    assert [(r.gang_id, r.takeover) for r in plan.rollbacks] == [("ns/half", False)]
    assert plan.rollbacks[0].reason == str(plan.pending["ns/half"])
    shorter = started_since(NOW - 5, repair_grace=5.0)
    assert decide(FULL, [REST], POLICIES, NOW, solver=SOLVE, house=shorter).rollbacks


@pytest.mark.parametrize(("started", "cut", "takeover", "timeout", "waited", "rolled_back",
                          "timed_out"), [
    (False, True, False, 10.0, 0.0, True, False),  # nothing started: released at once
    (True, True, False, 10.0, 9.0, False, False),  # within its PodGroup's timeout
    (True, True, False, 10.0, 10.0, True, True),  # past it: released, retried after backoff
    (True, True, False, 300.0, 60.0, False, False),  # the timeout replaces the 60 s grace
    (True, True, False, None, 60.0, True, False),  # no timeout: the repair grace
    (True, False, False, 10.0, 1000.0, False, False),  # survivors wait for a replacement
    (True, True, True, 10.0, 0.0, True, False),  # a takeover releases it at once
])
def test_a_podgroups_timeout_bounds_how_long_bound_members_wait_for_the_rest(
        started: bool, cut: bool, takeover: bool, timeout: float | None, waited: float,
        rolled_back: bool, timed_out: bool) -> None:
    house = Housekeeping(partly_bound={"ns/half": PartlyBound(
        BOUND, started, NOW - waited, cut, timeout)}, takeover=takeover)
    plan = decide(FULL, [REST], POLICIES, NOW, solver=SOLVE, house=house)
    assert [(r.gang_id, r.cause is RollbackCause.TIMED_OUT) for r in plan.rollbacks] == (
        [("ns/half", timed_out)] if rolled_back else [])
    assert "ns/half" in plan.pending  # its remaining member is still decided: never given up


def test_a_rollback_that_did_not_happen_is_decided_again_until_the_gang_is_gone() -> None:
    first = decide(FULL, [REST], POLICIES, NOW, solver=SOLVE,
                   house=started_since(NOW, takeover=True))
    assert first.rollbacks
    # The deletes failed (the apiserver away): next cycle, no takeover, well within the grace.
    again = decide(FULL, [REST], POLICIES, NOW + 1, first, solver=SOLVE,
                   house=started_since(NOW))
    assert [r.gang_id for r in again.rollbacks] == ["ns/half"]
    # Without pending members (it cannot be placed at all), still decided again.
    idle = decide(FULL, [], POLICIES, NOW + 2, again, solver=SOLVE, house=started_since(NOW))
    assert [r.gang_id for r in idle.rollbacks] == ["ns/half"]
    assert idle.rollbacks[0].reason == "its remaining members are not pending"


def test_a_partly_bound_gang_is_completed_before_any_other_gang_takes_its_room() -> None:
    # One node free. In queue order the older gang would take it; the partly bound gang's
    # member goes first, since its bound member already has its share elsewhere.
    one_free = Snapshot(NODES, [running(gang("r0", "q", priority=9), {"a100-0000": 1})])
    older = gang("older", "q", pool="a100", created=NOW - 100)
    rest = replace(REST, creation_time=NOW - 10)
    plan = decide(one_free, [older, rest], POLICIES, NOW, solver=SOLVE,
                  house=started_since(NOW))
    assert [b.gang_id for b in plan.binds] == ["ns/half"]
    assert plan.order[0] == "ns/half" and "ns/older" in plan.pending
    without = decide(one_free, [older, rest], POLICIES, NOW, solver=SOLVE)
    assert [b.gang_id for b in without.binds] == ["ns/older"]


def test_a_partly_bound_gang_whose_bind_was_refused_says_so_when_rolled_back() -> None:
    house = Housekeeping(backoff={"ns/half": NOW + 8},
                         partly_bound={"ns/half": PartlyBound(BOUND, False, NOW)},
                         failed_binds={"ns/half": FailedBind("forbidden (RBAC)", False, 8)})
    plan = decide(Snapshot(NODES), [REST], POLICIES, NOW, solver=SOLVE, house=house)
    (rollback,) = plan.rollbacks
    assert rollback.cause is RollbackCause.BIND_REFUSED
    assert rollback.reason == ("Backoff: its last bind was refused: forbidden (RBAC); "
                               "retried after a 8s backoff")


def parked(started: bool = False, **house: object) -> Housekeeping:
    """``ns/half`` partly bound, its last bind failed for want of an answer (the apiserver
    restarting), backing off until NOW + 8."""
    return Housekeeping(backoff={"ns/half": NOW + 8},
                        partly_bound={"ns/half": PartlyBound(BOUND, started, NOW - 600)},
                        failed_binds={"ns/half": FailedBind("no reply", True)},
                        **house)  # type: ignore[arg-type]


@pytest.mark.parametrize("house", [parked(), parked(started=True), parked(takeover=True),
                                   parked(started=True, takeover=True)],
                         ids=["unstarted", "started, past its grace", "takeover",
                              "started, takeover"])
def test_a_gang_parked_for_the_apiserver_is_never_rolled_back_while_it_waits(
        house: Housekeeping) -> None:
    """The issue's case: while the apiserver restarts, nobody can bind to the parked nodes, so
    nothing is gained by deleting the bound members (a bare pod is never recreated)."""
    for snapshot in (Snapshot(NODES), FULL):  # however the nodes look meanwhile
        plan = decide(snapshot, [REST], POLICIES, NOW, solver=SOLVE, house=house)
        assert plan.rollbacks == () and plan.binds == ()


def test_once_it_answers_a_parked_gang_is_completed_or_rolled_back_for_a_real_cause() -> None:
    later = NOW + 8  # its backoff is over: the loop released the parked members
    completed = decide(Snapshot(NODES), [REST], POLICIES, later, solver=SOLVE, house=parked())
    assert [b.gang_id for b in completed.binds] == ["ns/half"] and completed.rollbacks == ()
    (rollback,) = decide(FULL, [REST], POLICIES, later, solver=SOLVE, house=parked()).rollbacks
    assert rollback.cause is RollbackCause.NO_ROOM and rollback.reason.startswith("Placement")


@pytest.mark.parametrize(("category", "cause"), [
    (ReasonCategory.PLACEMENT, RollbackCause.NO_ROOM),
    (ReasonCategory.TOPOLOGY, RollbackCause.NO_ROOM),
    (ReasonCategory.PREEMPTION_PENDING, RollbackCause.NO_ROOM),
    (ReasonCategory.RESERVED, RollbackCause.NO_ROOM),
    (ReasonCategory.QUEUED, RollbackCause.NO_ROOM),
    (ReasonCategory.WAITING_FOR_MEMBERS, RollbackCause.MEMBER_GONE),
    (ReasonCategory.QUOTA, RollbackCause.NOT_ADMITTED),
    (ReasonCategory.NOT_ALLOWED, RollbackCause.NOT_ADMITTED),
    (ReasonCategory.VOLUMES, RollbackCause.NOT_ADMITTED),
    (ReasonCategory.UNSUPPORTED, RollbackCause.NOT_ADMITTED),
    (ReasonCategory.BACKOFF, RollbackCause.BIND_REFUSED),
])
def test_every_pending_reason_names_the_cause_of_the_rollback(
        category: ReasonCategory, cause: RollbackCause) -> None:
    house = Housekeeping(partly_bound={"ns/half": PartlyBound(BOUND, False, NOW)})
    pending = {"ns/half": PendingReason(category, "why")}
    (rollback,) = housekeeping.rollbacks(house, (), pending, NOW)
    assert (rollback.cause, rollback.reason) == (cause, f"{category}: why")


def test_a_partly_bound_gang_without_a_reason_is_short_of_members() -> None:
    gone = Housekeeping(partly_bound={"ns/half": PartlyBound(BOUND, False, NOW)},
                        unformed={"ns/half": FormationProblem("PodGroup missing", ())})
    (rollback,) = housekeeping.rollbacks(gone, (), {}, NOW)
    assert rollback.cause is RollbackCause.MEMBER_GONE
    (rollback,) = housekeeping.rollbacks(replace(gone, unformed={}), (), {}, NOW)
    assert (rollback.cause, rollback.reason) == (RollbackCause.MEMBER_GONE,
                                                 "its remaining members are not pending")


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
