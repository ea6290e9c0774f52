"""The virtual clock pops events in (time, kind class, push order) and never goes back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.clock import EventKind, VirtualClock

times = st.sampled_from([0.0, 1.0, 1.5, 2.0, 10.0])  # few values: many ties
Pushes = list[tuple[float, EventKind]]
pushes = st.lists(st.tuples(times, st.sampled_from(list(EventKind))), max_size=60)


@given(pushes)
def test_pops_are_sorted_and_ties_keep_push_order(items: Pushes) -> None:
    clock = VirtualClock()
    for i, (time, kind) in enumerate(items):
        clock.push(time, kind, payload=i)
    popped = [clock.pop() for _ in range(len(items))]
    # A stable sort by (time, kind) of the push order is exactly the required order.
    expected = sorted(range(len(items)), key=lambda i: items[i])
    assert [e.payload for e in popped] == expected
    assert len(clock) == 0 and clock.peek_time() is None


@given(pushes, st.data())
def test_cancelled_events_never_pop(items: Pushes, data: st.DataObject) -> None:
    clock = VirtualClock()
    events = [clock.push(t, k, i) for i, (t, k) in enumerate(items)]
    doomed = data.draw(st.sets(st.sampled_from(range(len(items))))) if items else set()
    for i in doomed:
        assert clock.cancel(events[i])
        assert not clock.cancel(events[i])  # second cancel is a no-op
    assert len(clock) == len(items) - len(doomed)
    popped = []
    while clock:
        popped.append(clock.pop().payload)
    keep = [i for i in range(len(items)) if i not in doomed]
    assert popped == sorted(keep, key=lambda i: items[i])


def test_same_instant_runs_completions_before_arrivals_before_the_cycle() -> None:
    clock = VirtualClock()
    clock.push(5.0, EventKind.SCHEDULE)
    clock.push(5.0, EventKind.ARRIVAL)
    clock.push(5.0, EventKind.NODE_REPAIR)
    clock.push(5.0, EventKind.NODE_FAILURE)
    clock.push(5.0, EventKind.CHECKPOINT)
    clock.push(5.0, EventKind.COMPLETION)
    clock.push(4.0, EventKind.SCHEDULE)
    kinds = [clock.pop().kind for _ in range(7)]
    assert kinds == [
        EventKind.SCHEDULE, EventKind.COMPLETION, EventKind.CHECKPOINT, EventKind.NODE_FAILURE,
        EventKind.NODE_REPAIR, EventKind.ARRIVAL, EventKind.SCHEDULE,
    ]


def test_now_follows_pops_and_the_past_is_refused() -> None:
    clock = VirtualClock(start=10.0)
    assert clock() == clock.now == 10.0
    with pytest.raises(ValueError, match=r"now is 10\.0"):
        clock.push(9.0, EventKind.ARRIVAL)
    first = clock.push(12.0, EventKind.ARRIVAL, "a")
    clock.push(11.0, EventKind.ARRIVAL, "b")
    assert clock.peek_time() == 11.0
    assert clock.now == 10.0  # peeking does not move time
    assert clock.pop().payload == "b" and clock() == 11.0
    assert clock.pop() == first and clock.now == 12.0
    assert not clock.cancel(first)  # already popped
    with pytest.raises(IndexError):
        clock.pop()
    with pytest.raises(ValueError):
        clock.push(float("nan"), EventKind.SCHEDULE)
    with pytest.raises(ValueError):
        clock.push(float("inf"), EventKind.SCHEDULE)


def test_cancelling_the_head_uncovers_the_next_event() -> None:
    clock = VirtualClock()
    head = clock.push(1.0, EventKind.COMPLETION, "void")
    clock.push(2.0, EventKind.ARRIVAL, "next")
    clock.cancel(head)
    assert clock.peek_time() == 2.0
    assert clock.pop().payload == "next"
