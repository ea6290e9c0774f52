"""Gangs whose bind failed wait out an exponential backoff before they are tried again.

Why: a pod deleted under the scheduler, or a bind the apiserver refuses, must not be retried
every cycle. A bind that failed only for want of an answer (the apiserver away) is different:
nothing is wrong with the gang, so its backoff ends as soon as the cluster answers again,
and a gang (above all one left partly bound) is completed at once rather than after a delay
that grew while the apiserver restarted. That end comes with no change of input and no time
``decide`` knows of, so ``answered`` says when it has come: the live loop runs a cycle then.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class _Backoff:
    until: float
    delay: float
    unanswered: bool = False  # the last failure had no answer: over once the cluster answers


class Backoffs:
    """The gangs in backoff after a failed bind, with their delays (doubling up to *most*).

    *answering*: does the cluster answer requests right now (the live scheduler's outage
    tracker)? Without it, a backoff after a failure without an answer runs its course."""

    def __init__(self, initial: float = 5.0, most: float = 300.0,
                 answering: Callable[[], bool] | None = None) -> None:
        self.initial, self.most, self.answering = initial, most, answering
        self._backoff: dict[str, _Backoff] = {}
        self._answering_then = True  # the cluster answered when the last cycle began

    def __bool__(self) -> bool:
        return bool(self._backoff)

    def fail(self, gang_id: str, now: float, unanswered: bool = False) -> None:
        """A bind of *gang_id* failed at *now*: it waits twice as long as after the last."""
        prev = self._backoff.get(gang_id)
        delay = min(self.most, prev.delay * 2 if prev else self.initial)
        self._backoff[gang_id] = _Backoff(until=now + delay, delay=delay, unanswered=unanswered)

    def succeed(self, gang_id: str) -> None:
        self._backoff.pop(gang_id, None)

    def until(self, now: float) -> dict[str, float]:
        """Gang id -> when it may be tried again, for gangs in backoff (a failure without an
        answer backs off only while the cluster still does not answer)."""
        answering = self._answering()
        return {gid: b.until for gid, b in self._backoff.items()
                if b.until > now and not (answering and b.unanswered)}

    def cycle_began(self) -> None:
        """A cycle begins: it sees whether the cluster answers (``answered`` compares)."""
        self._answering_then = self._answering()

    def answered(self, now: float) -> bool:
        """Has the cluster begun to answer since the last cycle began, ending a backoff that
        waited for it?"""
        if self._answering_then or not self._answering():
            return False
        return any(b.unanswered and b.until > now for b in self._backoff.values())

    def _answering(self) -> bool:
        return self.answering is not None and self.answering()
