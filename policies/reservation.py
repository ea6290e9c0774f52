"""Reservations and EASY backfill: the first gang that cannot start is not starved.

The reserved gang gets nodes and an estimated start: running gangs are released in the order
of their expected ends until the gang fits. Later gangs may then start ahead of it only where
they cannot delay it (EASY backfill): they end before the estimated start, or they keep off
the reserved nodes. Estimates come from the gang (annotation or Job deadline) or its queue's
``defaultRuntimeSeconds``; a running gang with no estimate at all is assumed never to end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from policies.queues import QueueSet
from scheduler.model import Gang, RunningGang
from scheduler.placement.types import Placement, PlacementParams, PlacementResult
from scheduler.snapshot import Snapshot

Solver = Callable[[Gang, Snapshot, PlacementParams], PlacementResult]


@dataclass(frozen=True, slots=True)
class Reservation:
    gang_id: str
    nodes: tuple[str, ...]
    estimated_start: float


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


def release_events(snapshot: Snapshot, queues: QueueSet,
                   now: float) -> list[tuple[float, tuple[str, ...]]]:
    """Running gangs grouped by expected end, earliest first (unknown ends left out)."""
    by_time: dict[float, list[str]] = {}
    for gid, rg in snapshot.running.items():
        end = expected_end(rg, queues, now)
        if end is not None:
            by_time.setdefault(end, []).append(gid)
    return [(t, tuple(sorted(ids))) for t, ids in sorted(by_time.items())]


def reserve(gang: Gang, snapshot: Snapshot, queues: QueueSet, now: float, solve: Solver,
            params: PlacementParams) -> Reservation | None:
    """The earliest release event after which the gang fits, with the nodes it would use.

    A GPU count across the usable nodes skips events cheaply; then a galloping search over
    the remaining events (fitting only gets easier as gangs leave) keeps solves logarithmic.
    """
    events = release_events(snapshot, queues, now)
    if not events:
        return None
    usable = _usable_nodes(gang, snapshot, params)
    need = gang.gpus
    free = sum(max(0, snapshot.free(n).gpus) for n in usable)
    start = len(events)
    for i, (_, ids) in enumerate(events):
        for gid in ids:
            free += sum(res.gpus for node, res in snapshot.running[gid].allocations
                        if node in usable)
        if free >= need:
            start = i
            break
    if start == len(events):
        return None
    cache: dict[int, Placement | None] = {}

    def fits_after(i: int) -> Placement | None:
        if i not in cache:
            ids = [gid for _, group in events[: i + 1] for gid in group]
            result = solve(gang, snapshot.without_gangs(ids), params)
            cache[i] = result if isinstance(result, Placement) else None
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
    placement = fits_after(hi)
    assert placement is not None
    return Reservation(gang.id, placement.nodes, events[hi][0])


def backfill_params(reservation: Reservation | None, runtime: float | None, now: float,
                    params: PlacementParams) -> PlacementParams:
    """Where a later gang may start without delaying *reservation* (EASY backfill)."""
    if reservation is None:
        return params
    if runtime is not None and now + runtime <= reservation.estimated_start:
        return params  # it is gone before the reserved gang needs the nodes
    return replace(params, excluded_nodes=params.excluded_nodes | frozenset(reservation.nodes))


def _usable_nodes(gang: Gang, snapshot: Snapshot, params: PlacementParams) -> frozenset[str]:
    nodes: set[str] = set()
    for role in gang.roles:
        nodes.update(snapshot.eligible_nodes(role.requirements))
    if params.allowed_nodes is not None:
        nodes &= params.allowed_nodes
    return frozenset(nodes - params.excluded_nodes)
