"""When the live loop runs a cycle (``scheduler.run.wake``): never while nothing changed, exactly
once for each kind of change, and at the last plan's due time. A fake clock: ``now`` is an
argument."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policies.queues import PolicySet
from scheduler.run.wake import Marks, Wake

POLICIES = PolicySet()
MARKS = Marks(generation=7, policies=POLICIES, term=1)


def settled(due: float | None = None) -> Wake:
    """A Wake whose last cycle began with MARKS at t=100 and ended with *due*."""
    wake = Wake()
    assert wake.why(MARKS, 100.0) == "start"
    wake.began(MARKS)
    wake.ended(due)
    return wake


def test_no_cycle_while_nothing_changes() -> None:
    wake = settled()
    for t in (100.0, 160.0, 1e9):
        assert wake.why(MARKS, t) is None
    assert wake.sleep(100.0, 1.0) == 1.0  # nothing due: the longest sleep


@pytest.mark.parametrize(("change", "why"), [
    (replace(MARKS, generation=8), "cluster_changed"),
    (replace(MARKS, policies=PolicySet()), "policies_changed"),  # a new value, equal or not
    (replace(MARKS, term=2), "takeover"),
    (replace(MARKS, landed=True), "binds_landed"),
    (replace(MARKS, answered=True), "apiserver_answers"),
    (replace(MARKS, scale_up=object()), "autoscaler_changed"),
])
def test_one_cycle_for_each_change(change: Marks, why: str) -> None:
    wake = settled()
    assert wake.why(change, 101.0) == why
    wake.began(replace(change, landed=False, answered=False))  # taken in by that cycle
    wake.ended(None)
    assert wake.why(replace(change, landed=False, answered=False), 102.0) is None


def test_a_change_during_a_cycle_starts_the_next() -> None:
    wake = settled()
    wake.began(MARKS)  # the marks are read before the cycle...
    during = replace(MARKS, generation=8)  # ...an informer event lands meanwhile
    wake.ended(None)
    assert wake.why(during, 101.0) == "cluster_changed"


def test_a_cycle_at_the_due_time_and_a_sleep_that_ends_there() -> None:
    wake = settled(due=130.0)
    assert wake.why(MARKS, 129.9) is None
    assert wake.sleep(125.0, 10.0) == 5.0  # wakes at the due time, not later
    assert wake.sleep(100.0, 10.0) == 10.0  # never longer than the longest sleep
    assert wake.why(MARKS, 130.0) == "due"
    wake.began(MARKS)
    wake.ended(None)  # that cycle's plan is not due again
    assert wake.why(MARKS, 1e9) is None


def test_poke_wakes_a_sleeper() -> None:
    wake = settled()
    wake.event.clear()
    wake.poke()
    assert wake.event.wait(0.0)
