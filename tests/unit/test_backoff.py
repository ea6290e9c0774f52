"""Bind backoffs (``scheduler.run.backoff``): exponential, and over once the cluster answers again
for a failure without an answer, which the live loop learns from ``answered`` (no change of
input and no due time says so); what a bind's outcome and a cycle's rollbacks tell them
(``take``, ``rolled_back``)."""

from __future__ import annotations

from scheduler.decide.housekeeping import FailedBind
from scheduler.decide.plan import Bind, CyclePlan, Rollback, RollbackCause
from scheduler.model import PodRef
from scheduler.placement.types import Placement
from scheduler.run.backoff import Backoffs
from scheduler.run.inflight import ApplyResult


def test_delays_double_up_to_the_most_and_end_on_success() -> None:
    b = Backoffs(initial=5, maximum=12)
    b.fail("g", 100.0)
    assert b.until(100.0) == {"g": 105.0} and b.until(105.0) == {}
    b.fail("g", 200.0)
    b.fail("g", 300.0)
    assert b.until(300.0) == {"g": 312.0}  # 5, 10, then 12 (not 20)
    b.succeed("g")
    assert not b and b.until(300.0) == {}


def test_a_failure_without_an_answer_ends_once_the_cluster_answers_and_says_so_once() -> None:
    answering = [False]
    b = Backoffs(initial=60, answering=lambda: answering[0])
    b.fail("g", 100.0, unanswered=True)
    b.cycle_began()  # the cycle that took the failure in: the cluster is away
    assert b.until(101.0) == {"g": 160.0} and not b.answered(101.0)
    answering[0] = True
    assert b.until(102.0) == {} and b.answered(102.0)  # a cycle is due now...
    b.cycle_began()
    assert not b.answered(103.0)  # ...once


def test_an_answer_ends_no_other_backoff() -> None:
    answering = [False]
    b = Backoffs(initial=60, answering=lambda: answering[0])
    b.fail("g", 100.0)  # refused: something is wrong with the gang
    b.cycle_began()
    answering[0] = True
    assert not b.answered(101.0) and b.until(101.0) == {"g": 160.0}


def _bind(gid: str) -> Bind:
    return Bind(gid, "team", Placement(gid, ()),
                pod_nodes=((PodRef("ns", f"{gid}-0", "u0"), "n1"),))


def test_an_outcome_backs_a_failed_gang_off_and_ends_a_bound_ones_backoff() -> None:
    b = Backoffs(initial=5)
    parked = (PodRef("ns", "g-0", "u0"),)
    b.take(_bind("g"), ApplyResult(failed={"g": "503"}), parked, 100.0)
    assert b.until(100.0) == {"g": 105.0}
    assert b.failed_binds({"g": 105.0}) == {"g": FailedBind("503", True, 5)}  # parked: transient
    assert b.due(105.0) == list(parked)
    b.take(_bind("g"), ApplyResult(bound=("g",)), (), 106.0)
    assert not b


def test_a_fenced_bind_and_an_outcome_of_another_gang_back_nothing_off() -> None:
    b = Backoffs(initial=5)
    b.take(_bind("g"), ApplyResult(failed={"g": "fenced"}, fenced=("g",)), (), 100.0)
    b.take(_bind("h"), ApplyResult(bound=("x",)), (), 100.0)
    assert not b


def test_a_gang_rolled_back_for_its_timeout_backs_off_and_no_other() -> None:
    b = Backoffs(initial=5)
    pods = (PodRef("ns", "g-0", "u0"),)
    plan = CyclePlan(now=100.0, rollbacks=(
        Rollback("ns/late", pods, "timed out", RollbackCause.TIMED_OUT),
        Rollback("ns/gone", pods, "a member is gone", RollbackCause.MEMBER_GONE)))
    b.rolled_back(plan, 100.0)
    assert b.until(100.0) == {"ns/late": 105.0}
