"""The simulator's virtual clock: a time that only moves when the next event is popped.

Why: the live scheduler reads the wall clock; the simulator must replay months of trace in
seconds and give the same result every run. Both hand the scheduler a zero-argument callable
returning seconds, so `VirtualClock` is callable (``clock()`` is ``clock.now``) and the
scheduler never knows which one it has.

Events sit in a `heapq` of plain tuples ``(time, kind, seq, payload)``. Ties at one instant
break first by the kind's priority class, then by the order of pushing (a counter), so the
payload is never compared and two runs pop events in the same order. The class order at one
instant is chosen so that what happened "at t" is visible to everything else at t:

1. COMPLETION   - GPUs freed at t are free for arrivals and the cycle at t;
2. CHECKPOINT   - a checkpoint written at t counts even if its node fails at t;
3. NODE_FAILURE - so a repair at the same instant cannot be undone by an earlier failure;
4. NODE_REPAIR
5. ARRIVAL      - every job submitted at t is pending before the cycle at t runs;
6. SCHEDULE     - the periodic cycle runs last and sees the whole instant.
"""

from __future__ import annotations

import heapq
import math
from enum import IntEnum
from typing import Any, NamedTuple


class EventKind(IntEnum):
    """Event kinds; the value is the tie-break class at equal times (lower pops first)."""

    COMPLETION = 0
    CHECKPOINT = 1
    NODE_FAILURE = 2
    NODE_REPAIR = 3
    ARRIVAL = 4
    SCHEDULE = 5


class Event(NamedTuple):
    time: float
    kind: EventKind
    seq: int  # push order; unique per clock, so it is also the event's handle for `cancel`
    payload: Any


class VirtualClock:
    """A virtual clock plus its event heap. No wall clock anywhere."""

    __slots__ = ("_heap", "_live", "_now", "_seq")

    def __init__(self, start: float = 0.0) -> None:
        self._heap: list[Event] = []
        self._seq = 0
        self._now = float(start)
        self._live: set[int] = set()  # seqs pushed and neither popped nor cancelled

    @property
    def now(self) -> float:
        return self._now

    def __call__(self) -> float:
        return self._now

    def __len__(self) -> int:
        """Pending events, not counting cancelled ones."""
        return len(self._live)

    def push(self, time: float, kind: EventKind, payload: Any = None) -> Event:
        """Schedule an event; events in the past are a bug in the caller and are refused."""
        if not time >= self._now or math.isinf(time):
            raise ValueError(f"cannot schedule {kind.name} at {time}: now is {self._now}")
        event = Event(time, kind, self._seq, payload)
        self._seq += 1
        self._live.add(event.seq)
        heapq.heappush(self._heap, event)
        return event

    def cancel(self, event: Event) -> bool:
        """Drop a pending event (a completion made void by preemption); False if it was already
        popped or cancelled. Lazy: the entry stays in the heap and is skipped when it reaches
        the top, which keeps cancel O(1)."""
        if event.seq in self._live:
            self._live.remove(event.seq)
            return True
        return False

    def peek_time(self) -> float | None:
        """Time of the next live event, or None when nothing is pending."""
        self._drop_cancelled()
        return self._heap[0].time if self._heap else None

    def pop(self) -> Event:
        """Remove the next live event and advance `now` to its time."""
        self._drop_cancelled()
        if not self._heap:
            raise IndexError("pop from an empty event heap")
        event = heapq.heappop(self._heap)
        self._live.remove(event.seq)
        self._now = event.time
        return event

    def _drop_cancelled(self) -> None:
        heap, live = self._heap, self._live
        while heap and heap[0].seq not in live:
            heapq.heappop(heap)
