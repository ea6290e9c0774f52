"""``Scheduler.next_due``: when the live loop must run a cycle although nothing changes: the
plan's own due time, an assumption in the cache lapsing, or a retry the actuator asked for
(``ApplyResult.retry_in``: a refused eviction, a failed rollback)."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.decide.due import SLACK_SECONDS
from scheduler.decide.plan import CyclePlan
from scheduler.run.inflight import ApplyResult
from tests.unit.test_loop_metrics import TEAM, gang_pods, make, node


@dataclass
class Retrying:
    """Carries nothing out, and asks for another cycle after *retry_in* seconds."""

    retry_in: float | None = None

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult:
        return ApplyResult(retry_in=self.retry_in)


def test_nothing_to_wait_for_no_due_time() -> None:
    sched, _, _ = make(gang_pods("big", 2, 8), [node("n1")], TEAM)  # waits: 16 GPUs on 8
    sched.actuator = Retrying()
    sched.run_once()
    assert sched.next_due() is None


def test_a_retry_the_actuator_asks_for_is_due() -> None:
    sched, _, clock = make(gang_pods("big", 2, 8), [node("n1")], TEAM)
    sched.actuator = Retrying(retry_in=5.0)
    clock.now = 100.0
    sched.run_once()
    assert sched.next_due() == 105.0
    sched.actuator = Retrying()
    sched.run_once()  # carried out this time: nothing more to retry
    assert sched.next_due() is None


def test_an_assumption_that_lapses_is_due() -> None:
    sched, _, clock = make(gang_pods("g", 1, 8), [node("n1")], TEAM)  # binds, never confirmed
    clock.now = 100.0
    plan = sched.run_once()
    assert [b.gang_id for b in plan.binds] == ["ns/g"]
    assert sched.next_due() == 100.0 + sched.cache.assume_ttl + SLACK_SECONDS
