"""A bind that fails for want of an answer parks its gang (``scheduler.run.backoff``): the member
it bound stays bound, the others stay assumed on their nodes while the apiserver is away, and
once it answers only the rest is bound, before any other gang; nothing is rolled back. A bind
refused for good keeps what it bound too, and the next cycle's ``decide`` rolls it back,
naming the cause.

A real cache and the real ``decide``; the fake actuator binds the first member of a gang and
then gets no reply (or a refusal), as ``Binder`` reports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from scheduler.decide.plan import CyclePlan, RollbackCause
from scheduler.model.workloads import PodPhase
from scheduler.run.inflight import ApplyResult
from scheduler.run.loop import Scheduler
from tests.unit.test_loop_inflight import TEAM
from tests.unit.test_loop_metrics import Clock, gang_pods, make, node, other_pod


@dataclass
class Outage:
    """Binds the first member of each gang, then the rest fail: without a reply (parked) or
    refused for good; once ``away`` is cleared every bind succeeds."""

    away: bool = True
    refused: bool = False
    plans: list[CyclePlan] = field(default_factory=list)

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult:
        self.plans.append(plan)
        if not self.away:
            return ApplyResult(bound=tuple(b.gang_id for b in plan.binds))
        failed, left, parked = {}, [], []
        for b in plan.binds:
            first, *rest = b.pod_nodes
            left.append(first)
            if not self.refused:
                parked += rest
            failed[b.gang_id] = ("binding: pod deleted before binding" if self.refused
                                 else "binding: no reply from the apiserver")
        return ApplyResult(failed=failed, left=tuple(left), parked=tuple(parked),
                           unanswered=() if self.refused else tuple(failed))


def setup(refused: bool = False) -> tuple[Scheduler, Outage, Clock, list[bool]]:
    """Gang ``half`` of four 4-GPU members on two 8-GPU nodes: all the room there is."""
    answering = [False]
    sched, _, clock = make(gang_pods("half", 4, 4), [node("n0"), node("n1")], TEAM)
    sched.actuator = outage = Outage(refused=refused)
    sched.backoffs.answering = lambda: answering[0]
    return sched, outage, clock, answering


def test_a_gang_whose_bind_got_no_reply_is_parked_then_completed_when_the_apiserver_answers(
        ) -> None:
    sched, outage, clock, answering = setup()
    (first,) = sched.run_once().binds
    for p in gang_pods("other", 2, 4, created=1):  # arrives while the apiserver is away
        sched.cache.upsert_pod(p)
    for _ in range(3):  # away: the parked members keep their nodes, nobody takes them
        clock.now += 1
        plan = sched.run_once()
        assert plan.binds == () and plan.rollbacks == ()
        assert plan.pending["ns/other"].category.value == "Placement"
    assert sched.cache.cycle_input(clock.now).gangs.partially_bound == {}
    answering[0], outage.away = True, False
    clock.now += 0.5  # well within the backoff: the answer ends it
    plan = sched.run_once()
    assert [b.gang_id for b in plan.binds] == ["ns/half"] and plan.rollbacks == ()
    assert plan.binds[0].pod_nodes == first.pod_nodes[1:]  # only the rest, on the same nodes
    assert "ns/other" in plan.pending and sched.backing_off(clock.now) == {}


def test_a_gang_parked_past_its_backoff_is_tried_again_and_still_never_rolled_back() -> None:
    sched, _, clock, _ = setup()
    sched.run_once()
    tried = 1
    for _ in range(40):  # the apiserver stays away for a long time: backoffs of 5, 10, 20 s
        clock.now += 1
        plan = sched.run_once()
        assert plan.rollbacks == ()
        tried += bool(plan.binds)
    assert tried == 4


def test_a_bind_refused_for_good_keeps_what_it_bound_until_decide_rolls_it_back() -> None:
    sched, _, clock, _ = setup(refused=True)
    sched.run_once()
    clock.now += 1
    plan = sched.run_once()  # partly bound, none of it started, its bind refused: released
    (rollback,) = plan.rollbacks
    assert [p.name for p in rollback.pods] == ["half-0"]
    assert rollback.cause is RollbackCause.BIND_REFUSED and "pod deleted" in rollback.reason


def test_stepping_down_releases_what_was_parked() -> None:
    sched, _, clock, _ = setup()
    sched.run_once()
    assert sched.drain(timeout=0.01) == 0
    partly = sched.cache.cycle_input(clock.now).gangs.partially_bound
    assert [ref.name for ref in partly["ns/half"]] == ["half-0"]


def test_a_parked_node_taken_by_another_scheduler_meanwhile_leaves_no_room() -> None:
    """Its member started (kwok, a kubelet), so its grace applies; once past it, with the
    parked room taken by another scheduler's pod, the gang is rolled back: no room."""
    sched, _, clock, answering = setup()
    sched.run_once()
    half0 = replace(gang_pods("half", 4, 4)[0], node_name="n0", phase=PodPhase.RUNNING,
                    started_at=clock.now)
    sched.cache.upsert_pod(half0)  # the watch: bound and running
    sched.cache.upsert_pod(other_pod("intruder", "n1", 8))
    answering[0] = True
    clock.now += 1
    plan = sched.run_once()
    assert plan.binds == () and plan.rollbacks == ()  # within its grace: kept
    clock.now += sched.housekeeping.repair_grace
    (rollback,) = sched.run_once().rollbacks
    assert rollback.cause is RollbackCause.NO_ROOM
