"""Gangs backing off after a failed bind, and the members parked on their nodes meanwhile.

Why a backoff: a pod deleted under the scheduler, or a bind the apiserver refuses, must not
be retried every cycle; a gang whose bind failed waits out an exponential backoff.

Why parking: a bind that failed only for want of an answer (no reply, 429, 5xx: the apiserver
or etcd restarting) is no fault of the gang's. Its gang is *parked* instead of given up:
the members not bound stay assumed on their nodes (while the apiserver is away nobody can
bind there, so the nodes are still theirs), and a bind that got no reply at all backs off
only until the cluster answers again, not for a delay that grew while it restarted. When the
retry is due the parked members are released (``due``) and the next ``decide`` places them
again, before any other gang, since their gang is partly bound. ``decide`` learns why each
gang backing off failed (``FailedBind``): a parked gang is never rolled back for its failure
(``scheduler.decide.housekeeping``).

The end of a backoff that waited for an answer comes with no change of input and no time
``decide`` knows of, so ``answered`` says when it has come: the live loop runs a cycle then.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scheduler.decide.housekeeping import FailedBind
from scheduler.decide.plan import Bind, CyclePlan, RollbackCause
from scheduler.model import PodRef
from scheduler.run.inflight import ApplyResult


@dataclass(slots=True)
class _Backoff:
    until: float
    delay: float
    why: str  # what the last bind's failure was
    transient: bool  # for want of an answer (no reply, 429, 5xx): the gang is parked
    unanswered: bool  # no reply at all: over once the cluster answers
    parked: tuple[PodRef, ...]  # members assumed on their nodes until it is over

    def over(self, now: float, answering: bool) -> bool:
        return self.until <= now or (answering and self.unanswered)


class Backoffs:
    """The gangs backing off, by id, with their delays (doubling up to *maximum*).

    *answering*: does the cluster answer requests right now (the live scheduler's outage
    tracker)? Without it, a backoff after a failure without an answer runs its course like
    any other."""

    def __init__(self, initial: float = 5.0, maximum: float = 300.0,
                 answering: Callable[[], bool] | None = None) -> None:
        self.initial, self.maximum, self.answering = initial, maximum, answering
        self._gangs: dict[str, _Backoff] = {}
        self._answering_then = True  # the cluster answered when the last cycle began

    def __bool__(self) -> bool:
        return bool(self._gangs)

    def fail(self, gang_id: str, now: float, why: str = "", *, transient: bool = False,
             unanswered: bool = False, parked: tuple[PodRef, ...] = ()) -> None:
        """*gang_id*'s bind failed at *now* (or it was released to be retried whole): its
        delay doubles, up to the maximum."""
        prev = self._gangs.get(gang_id)
        delay = min(self.maximum, prev.delay * 2 if prev else self.initial)
        self._gangs[gang_id] = _Backoff(now + delay, delay, why, transient, unanswered, parked)

    def succeed(self, gang_id: str) -> None:
        """*gang_id* was bound: its next failure starts from the initial delay."""
        self._gangs.pop(gang_id, None)

    def take(self, bind: Bind, result: ApplyResult, parked: tuple[PodRef, ...],
             at: float) -> None:
        """The outcome of *bind* landed at *at*: a failure backs its gang off (*parked*: its
        members parked on their nodes meanwhile), unless it was fenced (nothing wrong with the
        gang); a success ends its backoff."""
        gid = bind.gang_id
        if gid in result.failed:
            if gid not in result.fenced:
                unanswered = gid in result.unanswered
                self.fail(gid, at, result.failed[gid], transient=bool(parked) or unanswered,
                          unanswered=unanswered, parked=parked)
        elif gid in result.bound:
            self.succeed(gid)

    def rolled_back(self, plan: CyclePlan, now: float) -> None:
        """Gangs *plan* rolled back for waiting past their timeout are retried whole after a
        backoff (not at once: their members would be cut again)."""
        for r in plan.rollbacks:
            if r.cause is RollbackCause.TIMED_OUT:
                self.fail(r.gang_id, now)

    def until(self, now: float) -> dict[str, float]:
        """Gang id -> when it may be tried again, for the gangs still backing off (a failure
        without an answer backs off only while the cluster still does not answer)."""
        answering = self._answering()
        return {gid: b.until for gid, b in self._gangs.items() if not b.over(now, answering)}

    def failed_binds(self, gangs: dict[str, float]) -> dict[str, FailedBind]:
        """Why the last bind of each of *gangs* (backing off) failed."""
        return {gid: FailedBind(b.why, b.transient, b.delay)
                for gid in gangs for b in (self._gangs[gid],)}

    def due(self, now: float) -> list[PodRef]:
        """The parked members whose retry is due (no longer parked: the caller releases them)."""
        answering = self._answering()
        return self._unpark([b for b in self._gangs.values() if b.over(now, answering)])

    def release_all(self) -> list[PodRef]:
        """Every parked member (no longer parked): the next leader decides about them afresh."""
        return self._unpark(list(self._gangs.values()))

    def cycle_began(self) -> None:
        """A cycle begins: it sees whether the cluster answers (``answered`` compares)."""
        self._answering_then = self._answering()

    def answered(self, now: float) -> bool:
        """Has the cluster begun to answer since the last cycle began, ending a backoff that
        waited for it?"""
        if self._answering_then or not self._answering():
            return False
        return any(b.unanswered and b.until > now for b in self._gangs.values())

    def _unpark(self, backoffs: list[_Backoff]) -> list[PodRef]:
        out: list[PodRef] = []
        for b in backoffs:
            out += b.parked
            b.parked = ()
        return out

    def _answering(self) -> bool:
        return self.answering is not None and self.answering()
