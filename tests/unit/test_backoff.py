"""Bind backoffs (``scheduler.run.backoff``): exponential, and over once the cluster answers again
for a failure without an answer, which the live loop learns from ``answered`` (no change of
input and no due time says so)."""

from __future__ import annotations

from scheduler.run.backoff import Backoffs


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
