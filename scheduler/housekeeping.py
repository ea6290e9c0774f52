"""What ``decide`` decides about gangs it does not place: backoff, give-ups, rollbacks, and
groups of pods that are not gangs yet.

The scheduler loop and the cluster cache know more about gangs than the pending list says:
which ones wait out a backoff after a failed bind (and until when), which groups of pods
cannot be formed into a gang (and why), which gangs are left partly bound, and whether this
is the first cycle after taking over. ``Housekeeping`` hands that to ``decide``, and the
functions here turn it into plan entries, so the actuators (live and simulated) carry them
out like any other decision:

- a gang backing off is not considered until its time comes (it has no reason this cycle);
- a gang past its PodGroup's ``scheduleTimeoutSeconds`` is given up: it leaves the cycle,
  costs nothing and holds nothing, and is marked failed (recreating the PodGroup starts a
  new deadline);
- a gang partly bound (fewer than minMember members bound, the rest pending) that this cycle
  does not complete is rolled back when none of its bound members has started, or, on the
  first cycle after taking over (a crashed predecessor may have left it), in any case.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from scheduler.model import Gang, PodRef
from scheduler.model.native import NativeGroupInfo
from scheduler.plan import GiveUp, Members, PendingReason, ReasonCategory, Rollback, Unformed


@dataclass(frozen=True, slots=True)
class PartlyBound:
    pods: tuple[PodRef, ...]  # the members bound
    started: bool  # any of them past Pending


@dataclass(frozen=True, slots=True)
class FormationProblem:
    message: str  # why the pods are not a gang yet
    pods: tuple[PodRef, ...]
    native: NativeGroupInfo | None = None  # the scheduling.k8s.io PodGroup they name


@dataclass(frozen=True, slots=True)
class Housekeeping:
    #: Gang id -> when it may be tried again after a failed bind.
    backoff: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    #: Gang id -> why its pods cannot be formed into a gang.
    unformed: Mapping[str, FormationProblem] = field(
        default_factory=lambda: MappingProxyType({}))
    partly_bound: Mapping[str, PartlyBound] = field(
        default_factory=lambda: MappingProxyType({}))
    #: The first cycle after becoming leader (or starting).
    takeover: bool = False


def members(gang: Gang) -> Members:
    return Members(gang.pods, gang.uid if gang.pod_group else None, gang.native)


def ready(gangs: Iterable[Gang], house: Housekeeping,
          now: float) -> tuple[list[Gang], tuple[GiveUp, ...]]:
    """The gangs to consider, and the gangs given up; gangs backing off are neither."""
    backoff = house.backoff
    out: list[Gang] = []
    given_up: list[GiveUp] = []
    for g in gangs:
        if backoff and backoff.get(g.id, now) > now:
            continue
        deadline = g.schedule_deadline
        if deadline is not None and now > deadline:
            given_up.append(GiveUp(g.id, "not scheduled within the PodGroup's "
                                   f"scheduleTimeoutSeconds ({deadline - g.creation_time:.0f}s);"
                                   " recreate the PodGroup to try again", members(g)))
            continue
        out.append(g)
    return out, tuple(given_up)


def unformed(house: Housekeeping) -> tuple[Unformed, ...]:
    if not house.unformed:
        return ()
    return tuple(Unformed(gid, PendingReason(ReasonCategory.WAITING_FOR_MEMBERS, p.message),
                          Members(p.pods, native=p.native))
                 for gid, p in sorted(house.unformed.items()))


def rollbacks(house: Housekeeping, bound: Iterable[str],
              pending: Mapping[str, PendingReason]) -> tuple[Rollback, ...]:
    """The partly bound gangs this cycle does not complete and may roll back."""
    if not house.partly_bound:
        return ()
    done = set(bound)
    return tuple(
        Rollback(gid, p.pods, str(pending.get(gid, "not placeable this cycle")), house.takeover)
        for gid, p in sorted(house.partly_bound.items())
        if gid not in done and (house.takeover or not p.started))
