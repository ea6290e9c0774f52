"""Reservations and EASY backfill: the first gang that cannot start is not starved.

The reserved gang gets nodes, quota and an estimated start: running gangs are released (each
a whole-gang ``Release``; an elastic gang shrinking, its leaving members now and the rest at
its end) in the order of their expected ends until both its queue's quota admits it and it
fits on the nodes.
Later gangs may then start ahead of it only where they cannot delay it (EASY backfill): they
end before the estimated start, or they keep off the reserved nodes *and* fit in the quota
left with the reserved gang's share set aside. Without the quota part, a big gang waiting for
quota (the usual case when quota matches capacity) would be overtaken for ever by small ones.

Reservations are per node pool: a reservation covers the pools of its nodes, and only a gang
that may use one of those pools (``relevant``) can delay it, since quota is kept per pool too;
an h100 reservation neither delays nor restricts a gang that can only run on a100 nodes.
So a cycle makes at most one reservation per pool, and a starving gang in each pool at once.

A reservation is a starvation remedy, not a first resort: only a gang pending at least its
queue's ``reserve_after`` threshold (``starving``) gets one; younger gangs that do not fit
just wait while later gangs start wherever they fit. Pending time runs from the gang's
creation (PodGroup, else its first pod), which the live scheduler and the simulator both
know, so ``decide`` needs no memory of when it first saw a gang.

Estimates come from the gang (annotation or Job deadline) or its queue's
``defaultRuntimeSeconds``; a running gang with no estimate at all is assumed never to end.
A running gang the reserved gang may preempt once its ``minRuntimeSeconds`` are over (a
borrower whose quota it reclaims, a lower priority gang of its queue) counts as released
then, and a gang being evicted counts as released now, if that is sooner: the estimate
stands when the start comes from a reclaim. One it may preempt already is not counted early
(``preemption.protected_until``: the same cycle's victim search just found it not enough,
and counting it now promised a start now). An elastic gang's members above its minimum
follow that rule with their gang (the victim search may take the whole gang by then); a
shrink under way counts its leaving members now and the rest at the gang's end. What it
cannot know is what arrives later (a higher priority gang preempting what it waits for, a
backfilled gang it preempts); ``benchmarks/bench_eta.py`` measures how often that moves the
start.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from policies.admission import admissible_pools
from policies.fit import Applicant, Fit, World, fit
from policies.queues import Queue, QueueSet, SchedulerPolicy
from policies.quota import QuotaLedger
from scheduler.kit.memo import Slot, Slots
from scheduler.model import Gang, RunningGang, TopologyMode
from scheduler.model.demand import gpus_of
from scheduler.model.release import Release
from scheduler.model.resources import Resources, total
from scheduler.placement.types import PlacementParams, Question
from scheduler.world.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Reservation:
    gang_id: str
    nodes: tuple[str, ...]
    estimated_start: float
    queue: str = ""
    #: The quota set aside for the gang, per pool.
    charges: tuple[tuple[str, Resources], ...] = ()
    #: The pools of the reserved nodes: only gangs that may use one of them are constrained.
    pools: tuple[str, ...] = ()

    def hold(self, ledger: QuotaLedger) -> QuotaLedger:
        """*ledger* with the reserved gang's quota set aside (recorded as held, not used)."""
        if not self.queue:
            return ledger
        for pool, res in self.charges:
            ledger = ledger.hold(self.queue, pool, res, self.gang_id)
        return ledger


def starving(gang: Gang, queue: Queue, policy: SchedulerPolicy, now: float) -> bool:
    """May the gang be given a reservation: reservations on, and pending long enough?

    A threshold of 0 applies whatever the clocks say (a creation time a little ahead of the
    scheduler's clock must not cost a gang its reservation)."""
    if not policy.reservation:
        return False
    after = queue.reserve_after(policy)
    return after <= 0 or now - gang.creation_time >= after


def expected_end(running: RunningGang, queues: QueueSet, now: float) -> float | None:
    """When a running gang should release its nodes (never before *now*), None if unknown."""
    end = running.expected_end
    if end is None:
        queue = queues.get(running.gang.queue)
        runtime = queue.runtime_of(running.gang.runtime_estimate) if queue else None
        if runtime is None:
            return None
        end = running.start_time + runtime
    return max(end, now)


#: A release event: when, and the releases then (sorted by gang id).
Event = tuple[float, tuple[Release, ...]]


def release_events(snapshot: Snapshot, queues: QueueSet, now: float,
                   reclaimable: Mapping[str, float] | None = None,
                   leaving: Mapping[str, Release] | None = None) -> list[Event]:
    """Running gangs grouped by when they release their nodes and quota, earliest first:
    their expected end or, for a gang the applicant may reclaim once its minimum runtime is
    over (*reclaimable*: gang id -> that time), that time if sooner. Unknown ends are left
    out. Each is released whole, except an elastic gang giving back some members now
    (*leaving*: gang id -> those members, a shrink under way or decided this cycle): those
    count now and the rest, which runs on, at the gang's end (counted whole now, a shrink
    once promised a start now on the nodes of the members that stay)."""
    by_time: dict[float, list[Release]] = {}
    reclaimable = reclaimable or {}
    leaving = leaving or {}
    for gid, rg in snapshot.running.items():
        end = expected_end(rg, queues, now)
        if gid in reclaimable:
            at = max(reclaimable[gid], now)
            end = at if end is None else min(end, at)
        part = leaving.get(gid)
        if part is not None and part.part is not None:
            by_time.setdefault(now, []).append(part)
            stay = [p for p in rg.gang.pods if p not in part.part]
            if end is not None and stay:
                by_time.setdefault(end, []).append(Release.of_pods(rg, stay))
        elif end is not None:
            by_time.setdefault(end, []).append(Release.whole(rg))
    return [(t, tuple(sorted(rs, key=lambda r: r.id))) for t, rs in sorted(by_time.items())]


def reserve(applicant: Applicant, world: World, queues: QueueSet, now: float,
            reclaimable: Mapping[str, float] | None = None,
            leaving: Mapping[str, Release] | None = None) -> Reservation | None:
    """The earliest release event after which the applicant fits in *world*, with its nodes
    (*reclaimable*, *leaving*: see ``release_events``).

    A quota check and a GPU count skip events cheaply; then a galloping search over the
    remaining events (both only get easier as gangs leave) keeps solves logarithmic.
    """
    gang, snapshot = applicant.gang, world.snapshot
    events = release_events(snapshot, queues, now, reclaimable, leaving)
    if not events:
        return None
    # A search: whether it fits after each event, never why not (see ``Question``).
    world = replace(world, params=world.params.asking(Question.WHETHER))
    slots = _Slots(gang, snapshot, _usable_nodes(gang, snapshot, world.params))
    ledgers = _Ledgers(world.ledger, events, snapshot)
    start = len(events)
    for i, (_, releases) in enumerate(events):
        for r in releases:
            slots.release(r.charges)
        if slots.enough() and admissible_pools(gang, applicant.queue, ledgers.at(i),
                                               applicant.bounds, Question.WHETHER).admitted:
            start = i
            break
    if start == len(events):
        return None
    cache: dict[int, Reservation | None] = {}

    def fits_after(i: int) -> Reservation | None:
        if i not in cache:
            cache[i] = _try(applicant, world, events, i, ledgers.at(i))
        return cache[i]

    lo, step, hi = start, 1, None  # lo: first index not known to fail
    while hi is None:
        probe = min(lo + step - 1, len(events) - 1)
        if fits_after(probe) is not None:
            hi = probe
        elif probe == len(events) - 1:
            return None
        else:
            lo, step = probe + 1, step * 2
    while lo < hi:
        mid = (lo + hi) // 2
        if fits_after(mid) is not None:
            hi = mid
        else:
            lo = mid + 1
    return fits_after(hi)


class _Ledgers:
    """The quota state after each release event, worked out only for the events asked about.

    A ledger depends only on the usage per (queue, pool) (see ``cycle._ledger``), so the
    ledger after event *i* is the nearest one worked out before it with the usage released
    in between taken off, summed per (queue, pool): quota only frees up as gangs leave.
    """

    __slots__ = ("_done", "_events", "_ledgers", "_snapshot")

    def __init__(self, ledger: QuotaLedger, events: list[Event], snapshot: Snapshot) -> None:
        self._events = events
        self._snapshot = snapshot
        self._ledgers: dict[int, QuotaLedger] = {-1: ledger}
        self._done = [-1]  # indexes worked out, sorted

    def at(self, i: int) -> QuotaLedger:
        hit = self._ledgers.get(i)
        if hit is not None:
            return hit
        k = bisect.bisect_left(self._done, i)
        before = self._done[k - 1]
        released: dict[tuple[str, str], list[Resources]] = {}
        for _, releases in self._events[before + 1: i + 1]:
            for r in releases:
                queue = r.running.gang.queue
                for pool, res in self._snapshot.pool_release(r).items():
                    released.setdefault((queue, pool), []).append(res)
        ledger = self._ledgers[before]
        for (queue, pool), parts in sorted(released.items()):
            ledger = ledger.charge(queue, pool, total(parts), sign=-1)
        self._ledgers[i] = ledger
        self._done.insert(k, i)
        return ledger


def _try(applicant: Applicant, world: World, events: list[Event], i: int,
         ledger: QuotaLedger) -> Reservation | None:
    """The applicant's reservation once the releases of events[0..i] are made (on *ledger*)."""
    gone = tuple(r for _, group in events[: i + 1] for r in group)
    trial = fit(applicant, replace(world, ledger=ledger, gone=gone))
    if not isinstance(trial, Fit):
        return None
    nodes = world.snapshot.nodes
    placement = trial.placement
    return Reservation(applicant.gang.id, placement.nodes, events[i][0], applicant.queue.name,
                       tuple(sorted(trial.charges.items())),
                       tuple(sorted({nodes[n].pool for n in placement.nodes})))


def relevant(reservations: Iterable[Reservation],
             pools: frozenset[str]) -> tuple[Reservation, ...]:
    """The reservations a gang that may use *pools* could delay (those in one of them).

    Another pool's reservation is out of its reach: it can take neither those nodes nor that
    pool's quota, which is charged per pool.
    """
    return tuple(r for r in reservations if not pools.isdisjoint(r.pools))


def ends_before(reservation: Reservation, runtime: float | None, now: float) -> bool:
    """Would a gang started now be gone before the reserved gang needs its nodes?"""
    return runtime is not None and now + runtime <= reservation.estimated_start


def restricting(reservations: Iterable[Reservation], runtime: float | None,
                now: float) -> tuple[Reservation, ...]:
    """Of the *reservations* relevant to a gang, those it would still be running at."""
    return tuple(r for r in reservations if not ends_before(r, runtime, now))


def backfill_params(reservations: Sequence[Reservation],
                    params: PlacementParams) -> PlacementParams:
    """Where a later gang may start without delaying the *reservations* it would still be
    running at (see ``restricting``): off their nodes (EASY backfill)."""
    if not reservations:
        return params
    reserved = frozenset(n for r in reservations for n in r.nodes)
    return replace(params, excluded_nodes=params.excluded_nodes | reserved)


#: The last base params -> per set of reservations, ``backfill_params`` of them.
BACKFILL: Slot[PlacementParams, dict[tuple[Reservation, ...], PlacementParams]] = Slot(
    "reservation.backfill_params")


def backfill_params_in(slots: Slots, reservations: tuple[Reservation, ...],
                       base: PlacementParams) -> PlacementParams:
    """``backfill_params``, once per set of reservations (and base) in *slots*."""
    if not reservations:
        return base
    known = slots.last(BACKFILL, base, lambda _: {})
    hit = known.get(reservations)
    if hit is None:
        hit = known[reservations] = backfill_params(reservations, base)
    return hit


#: (ledger, *reservations) -> the ledger with their quota held. Each key keeps a whole
#: ledger (a new one with every admission), hence the small bound.
HELD: Slot[tuple[object, ...], QuotaLedger] = Slot("reservation.held_ledger", bound=64)


def held_ledger(slots: Slots, ledger: QuotaLedger,
                reservations: tuple[Reservation, ...]) -> QuotaLedger:
    """*ledger* with the reservations' quota held (one object while unchanged)."""
    if not reservations:
        return ledger
    key = (ledger, *reservations)
    hit = slots.table(HELD).get(key)
    if hit is None:
        hit = ledger
        for r in reservations:
            hit = r.hold(hit)
        slots.put(HELD, key, hit)
    return hit


class _Slots:
    """How many pods of each GPU role fit on the usable nodes' free GPUs, per topology domain.

    A necessary condition for a placement, kept up to date as gangs are released, so that
    ``solve`` only runs where it could succeed.
    """

    __slots__ = ("domain", "free", "roles", "slots")

    def __init__(self, gang: Gang, snapshot: Snapshot, usable: frozenset[str]) -> None:
        topo = gang.topology
        level = topo.level if topo is not None and topo.mode is TopologyMode.REQUIRED else None
        nodes = snapshot.nodes
        self.roles = [(r.required, r.demand.gpus) for r in gang.roles
                      if r.required > 0 and r.demand.gpus > 0]
        self.domain = {n: (nodes[n].labels.get(level) or f"<none:{n}>") if level else ""
                       for n in usable}
        # Integer GPUs and devices alike (a role's demand counts both; a running gang's
        # charges give back both, ``Release.charges``).
        self.free = {n: snapshot.free_gpus(n) for n in usable}
        self.slots: dict[str, list[int]] = {}
        for n, free in self.free.items():
            per = self.slots.setdefault(self.domain[n], [0] * len(self.roles))
            for i, (_, g) in enumerate(self.roles):
                per[i] += free // g

    def release(self, charges: tuple[tuple[str, Resources], ...]) -> None:
        """Count the GPUs *charges* give back ((node, charge), ``Release.charges``) as free."""
        for node, res in charges:
            old = self.free.get(node)
            gpus = gpus_of(res)
            if old is None or gpus <= 0:
                continue
            new = self.free[node] = old + gpus
            per = self.slots[self.domain[node]]
            for i, (_, g) in enumerate(self.roles):
                per[i] += new // g - old // g

    def enough(self) -> bool:
        if not self.roles:
            return True
        return any(all(have >= need for have, (need, _) in zip(per, self.roles, strict=True))
                   for per in self.slots.values())


def _usable_nodes(gang: Gang, snapshot: Snapshot, params: PlacementParams) -> frozenset[str]:
    nodes: set[str] = set()
    for role in gang.roles:
        nodes.update(snapshot.eligible_nodes(role.requirements))
    if params.allowed_nodes is not None:
        nodes &= params.allowed_nodes
    return frozenset(nodes - params.excluded_nodes)
