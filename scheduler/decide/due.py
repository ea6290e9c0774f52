"""When a plan may change with time alone: the ``due`` time of a ``CyclePlan``.

Why: a live scheduler that re-decides "in case something changed" spins on an idle cluster
(the same plan every cycle, an event series counting up on every waiting pod). ``decide``
compares ``now`` with a handful of instants; while none of them is reached, the same input
gives the same plan, so no cycle is needed until one is, or until the input changes. This
module names those instants, from the same input and rules ``decide`` used:

- a backoff after a failed bind ends (``housekeeping.ready``);
- a partly bound gang's repair grace (or its PodGroup's ``scheduleTimeoutSeconds``) runs
  out: it is rolled back (``housekeeping.rollbacks``);
- a nomination times out (``NOMINATION_TIMEOUT_SECONDS``, strictly after);
- a pending gang has waited long enough for a reservation (``reservation.starving``);
- while gangs wait: a running gang's ``minRuntimeSeconds`` protection ends (it may be
  preempted), a running gang overruns its expected end (from then on it is expected to end
  "now", with the others that overran: which nodes a reservation keeps may change), or a
  waiting gang would no longer end before a reservation starts (it keeps off the reserved
  nodes from then on: ``reservation.ends_before``).

``test_due`` checks the list against ``decide`` itself: before ``due``, the same input gives
the same decisions (an estimate made at ``now`` aside).

``next_due`` is pure and cheap (one pass over the pending and running gangs); an instant
that cannot change anything (a gang bound this cycle) at worst costs one cycle that changes
nothing. The live loop sleeps until the plan's ``due`` unless something changes first; the
simulator, which cycles at events only, is unaffected.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from policies.queues import PolicySet
from scheduler.decide.housekeeping import Housekeeping
from scheduler.decide.plan import NOMINATION_TIMEOUT_SECONDS, Nomination
from scheduler.model import Gang
from scheduler.world.snapshot import Snapshot

#: How long after an instant its cycle is due: the rules compare differences of floats
#: (``now - since >= grace``), which may round just short of the instant itself.
SLACK_SECONDS = 0.001


class _Earliest:
    """The earliest instant still to come among those offered to it."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.at: float | None = None

    def _offer(self, t: float) -> None:
        t += SLACK_SECONDS
        if self.at is None or t < self.at:
            self.at = t

    def at_or_after(self, t: float | None) -> None:
        """A rule that is true from *t* on (``now >= t``): due unless it is true already."""
        if t is not None and t > self.now:
            self._offer(t)

    def after(self, t: float | None) -> None:
        """A rule that is true once *t* is past (``now > t``)."""
        if t is not None and t >= self.now:
            self._offer(t)


def next_due(snapshot: Snapshot, gangs: Sequence[Gang], pending: Mapping[str, object],
             nominations: Iterable[Nomination], reservations: Iterable[float],
             policies: PolicySet, house: Housekeeping, now: float) -> float | None:
    """The earliest time after *now* at which ``decide`` may decide differently on the same
    input; None when time alone changes nothing.

    *gangs*: every pending gang given to ``decide``; *pending*: those left pending (by id);
    *reservations*: the plan's estimated starts.
    """
    due = _Earliest(now)
    for until in house.backoff.values():
        due.at_or_after(until)
    for p in house.partly_bound.values():
        if p.cut and p.started and not house.takeover:
            due.at_or_after(p.since + p.grace(house.repair_grace))
    for nom in nominations:
        due.after(nom.since + NOMINATION_TIMEOUT_SECONDS)
    queues, policy = policies.queues, policies.scheduler
    starts = tuple(reservations)
    # The queue's figures: its starvation threshold (0: never) and default runtime.
    of_queue = {name: (queue.reserve_after(policy) if policy.reservation else 0.0,
                       queue.queueing.default_runtime_seconds)
                for name, queue in queues.queues.items()}
    backoff = house.backoff
    starving, ends = None, None
    if not starts and not any(after > 0 for after, _ in of_queue.values()):
        # No gang can starve into a reservation, none need end before one (every cycle of
        # a FIFO backlog): all that is asked is whether some gang waits.
        waiting = any(g.id not in backoff and g.id in pending and g.queue in of_queue
                      for g in gangs)
    else:
        waiting, starving, ends = _waiting_instants(gangs, pending, backoff, of_queue,
                                                    starts, now)
    due.at_or_after(starving)
    due.after(ends)
    if not waiting:
        return due.at
    for rg in snapshot.running.values():
        queue = queues.get(rg.gang.queue)
        if queue is None:
            continue
        if policy.preemption and queue.preemption.min_runtime_seconds > 0:
            due.at_or_after(rg.start_time + queue.preemption.min_runtime_seconds)
        if policy.reservation:  # overrun, it is expected to end "now" (``expected_end``)
            end = rg.expected_end
            runtime = queue.runtime_of(rg.gang.runtime_estimate)
            due.after(end if end is not None or runtime is None else rg.start_time + runtime)
    return due.at


def _waiting_instants(gangs: Sequence[Gang], pending: Mapping[str, object],
                      backoff: Mapping[str, float],
                      of_queue: Mapping[str, tuple[float, float | None]],
                      starts: tuple[float, ...], now: float
                      ) -> tuple[bool, float | None, float | None]:
    """Whether some gang waits; the earliest instant after *now* a waiting gang starves
    (``reservation.starving``); the earliest instant from *now* on a waiting gang would no
    longer end before a reservation starts (``reservation.ends_before``). One pass over
    every pending gang (thousands in a long backlog, each cycle of a simulation): the
    earliest instants are kept in locals (the slack is added once, by the caller: adding it
    keeps the order of floats)."""
    waiting = False
    starving: float | None = None
    ends: float | None = None
    for g in gangs:
        if g.id in backoff or g.id not in pending:
            continue  # a backoff's end is due already; a gang bound or nominated waits not
        figures = of_queue.get(g.queue)
        if figures is None:
            continue
        waiting = True
        after, default_runtime = figures
        if after > 0:
            t = g.creation_time + after
            if t > now and (starving is None or t < starving):
                starving = t
        if starts:
            runtime = g.runtime_estimate if g.runtime_estimate is not None else default_runtime
            if runtime is not None:  # it would start only if it ends before (``ends_before``)
                for t in starts:
                    t -= runtime
                    if t >= now and (ends is None or t < ends):  # ``_Earliest.after``
                        ends = t
    return waiting, starving, ends
