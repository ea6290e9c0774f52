"""When the live scheduler runs a decision cycle: when something changed, or when a time the
last plan depends on comes due; never merely because time passed.

Why: a cycle that re-decides on an unchanged input only repeats the last plan, at a cost (a
core's slice, an event series counting up on every waiting pod, a cycle-duration histogram
of no-ops). ``decide`` is deterministic, so the same input and no instant reached (the
plan's ``due``: ``scheduler.decide.due``) give the same plan. What counts as a change:

- the cache changed (an informer event that changed what the scheduler reads; the loop's
  own assumptions; an assumption lapsing: its ``generation``);
- the policies in force changed (a Queue accepted, deleted...: a new ``PolicySet``);
- this replica took over (a new leadership term);
- binds handed to the binding stage landed (their outcome is taken in by a cycle);
- the apiserver answers again, ending a backoff that waited for it (``Backoffs.answered``);
- the node groups or the autoscaler's answers read for scale-ups changed (a new reading).

``Wake`` compares those marks with the ones the last cycle began with; its ``event`` is set
by whatever may have changed one of them (the cache, the policies, a flight landing), so
the loop sleeps until then or until the next due time, whichever comes first.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Marks:
    """What a cycle's input is made of, as cheaply compared marks."""

    generation: int  # the cache's
    policies: object  # the PolicySet in force (compared by identity: a change is a new one)
    term: int | None  # the current leadership term (None: not leading)
    landed: bool = False  # a bind outcome waits to be taken in
    answered: bool = False  # the apiserver answers again, ending a backoff
    scale_up: object = None  # the scale-up reading (by identity: a change is a new one)


class Wake:
    """Decides, for the live loop, whether a cycle is due and how long to sleep."""

    def __init__(self) -> None:
        #: Set when something may have changed: wakes the loop's ``sleep``.
        self.event = threading.Event()
        self._last: Marks | None = None  # the marks the last cycle began with
        self._due: float | None = None  # when the last plan may change with time alone

    def poke(self) -> None:
        """Something may have changed (called from informer and binding threads)."""
        self.event.set()

    def why(self, marks: Marks, now: float) -> str | None:
        """Why a cycle is due now (a short word for the logs), None if none is."""
        last = self._last
        if last is None:
            return "start"
        if marks.term != last.term:
            return "takeover"
        if marks.landed:
            return "binds_landed"
        if marks.generation != last.generation:
            return "cluster_changed"
        if marks.policies is not last.policies:
            return "policies_changed"
        if marks.answered:
            return "apiserver_answers"
        if marks.scale_up is not last.scale_up:
            return "autoscaler_changed"
        if self._due is not None and now >= self._due:
            return "due"
        return None

    def began(self, marks: Marks) -> None:
        """A cycle begins with *marks* (read before it: what changes during it is seen as a
        change afterwards)."""
        self._last = marks

    def ended(self, due: float | None) -> None:
        """The cycle ended; the next is due at *due* if nothing changes first."""
        self._due = due

    def sleep(self, now: float, longest: float, also: float | None = None) -> float:
        """How long to sleep at most: until the due time (or *also*, another deadline on
        the same clock), never longer than *longest*."""
        times = [t for t in (self._due, also) if t is not None]
        return max(0.0, min([longest, *(t - now for t in times)]))
