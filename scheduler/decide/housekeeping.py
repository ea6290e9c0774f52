"""What ``decide`` decides about gangs it does not place: backoff, rollbacks, and groups of
pods that are not gangs yet.

The scheduler loop and the cluster cache know more about gangs than the pending list says:
which ones wait out a backoff after a failed bind (and until when), which groups of pods
cannot be formed into a gang (and why), which gangs are left partly bound, and whether this
is the first cycle after taking over. ``Housekeeping`` hands that to ``decide``, and the
functions here turn it into plan entries, so the actuators (live and simulated) carry them
out like any other decision:

- a gang backing off is not considered until its time comes; meanwhile its reason
  (``Backoff``) says why its last bind was refused and when it is retried, so that a
  refusal that repeats (a claim write the apiserver rejects, an admission webhook) is
  seen on the pods and the PodGroup, not only in the scheduler's log;
- a gang is never given up for waiting: however long it queues (behind quota, a busy pool,
  missing members, after a preemption), it stays pending with its reason and runs once it
  can. A PodGroup's ``scheduleTimeoutSeconds`` bounds what the coscheduling plugin bounds
  with it, how long members already *placed* keep their nodes waiting for the rest (there,
  at Permit; the group is then rejected and retried, never failed). Binds here are whole,
  so members wait placed only in a partly bound gang: its timeout replaces ``repair_grace``
  below, and a gang rolled back for it is retried after a backoff (the loop's, as after a
  failed bind; the plugin's ``podGroupBackoffSeconds``);
- a gang partly bound (fewer than minMember members bound, the rest pending: a bind cut
  short by a crash, a refusal or an outage, a member recreated beside running ones) is
  repaired on every cycle, not only after a restart: its remaining members are considered
  before any other gang (its bound members already have their share);
- a gang whose bind failed for want of an answer (no reply, 429, 5xx: the apiserver or etcd
  restarting) is *parked*, never rolled back for it: the loop keeps its members bound and the
  rest assumed on their nodes (while the apiserver is away nobody can bind there), and once
  it answers the remaining members are placed again, before any other gang. Giving the gang
  up would gain nothing and cost pods (a bare pod is never recreated), and a Job's
  recreation backoff;
- a partly bound gang this cycle does not complete is rolled back only when completing it
  has become impossible, with the cause (``RollbackCause``): its remaining members fit
  nowhere (their nodes taken or gone), it is short of members (one deleted or replaced),
  its last bind was refused for good, or its queue, quota or volumes keep it out. It is
  then rolled back if none of its bound members has started (nothing is lost), when an
  earlier cycle already decided to roll it back (a rollback that failed is retried until it
  is done), or, for a gang cut while binding, on the first cycle after taking over (a
  crashed predecessor left it) or once it has been partly bound for its PodGroup's
  ``scheduleTimeoutSeconds``, else ``repair_grace`` seconds (its bound members otherwise
  keep their GPUs for nothing, indefinitely: a gang at 1 of 16 kept 8 GPUs until a
  restart). A running gang that lost a member since (a node
  failed) is not cut: its survivors wait for their replacement, however long, across
  restarts and takeovers (``cut`` is read from the pods, not from the scheduler's memory),
  and the user is told it is short (``BelowMinimum``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from scheduler.decide.plan import (
    Members,
    PendingReason,
    ReasonCategory,
    Rollback,
    RollbackCause,
    Unformed,
)
from scheduler.model import Gang, PodRef
from scheduler.model.durations import format_duration
from scheduler.model.native import NativeGroupInfo
from scheduler.model.workloads import PodInfo

#: How long a partly bound gang whose members started is given to be completed before its
#: bound members are deleted (the grace covers a member recreated while its predecessor's
#: resources are still being released).
REPAIR_GRACE_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class PartlyBound:
    pods: tuple[PodRef, ...]  # the members bound
    started: bool  # any of them past Pending
    since: float  # when the scheduler first saw it partly bound
    #: Cut while binding (a member waiting was there before the bound ones started: a crash
    #: or a failed rollback mid-bind), not a whole gang that lost a member since (a node
    #: failure: its replacement is newer, and the survivors wait for it, as
    #: ``scheduler.model.shortfall`` tells the user).
    cut: bool = True
    #: Its PodGroup's ``scheduleTimeoutSeconds``: how long its bound members may wait for the
    #: rest (None: ``Housekeeping.repair_grace``).
    timeout: float | None = None

    def grace(self, default: float) -> float:
        """How long its started members may wait, partly bound, for the rest."""
        return default if self.timeout is None else self.timeout


@dataclass(frozen=True, slots=True)
class FailedBind:
    """The last bind of a gang backing off: why it failed, and whether only for want of an
    answer (*transient*: its gang is parked, see the module docstring)."""

    why: str
    transient: bool
    delay: float = 0.0  # how long it backs off (the reason names it: a stable text)


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
    #: How long a partly bound gang whose members started may wait to be completed.
    repair_grace: float = REPAIR_GRACE_SECONDS
    #: Gang id -> its last bind, for the gangs in ``backoff``.
    failed_binds: Mapping[str, FailedBind] = field(
        default_factory=lambda: MappingProxyType({}))


def members(gang: Gang) -> Members:
    return Members(gang.pods, gang.uid if gang.pod_group else None, gang.native)


def ready(gangs: Iterable[Gang], house: Housekeeping, now: float) -> list[Gang]:
    """The gangs to consider: all but those backing off (never one given up for waiting)."""
    backoff = house.backoff
    if not backoff:
        return list(gangs)
    return [g for g in gangs if backoff.get(g.id, now) <= now]


def backing_off(gangs: Iterable[Gang], house: Housekeeping,
                now: float) -> dict[str, tuple[PendingReason, Members]]:
    """The reason of each of *gangs* backing off after a bind that was refused (not one that
    went unanswered: its members are parked on their nodes, some perhaps bound; nor one
    rolled back for its timeout, which its ``GangRolledBack`` event explains), with its
    members."""
    if not house.backoff:
        return {}
    out: dict[str, tuple[PendingReason, Members]] = {}
    for g in gangs:
        until = house.backoff.get(g.id, now)
        failed = house.failed_binds.get(g.id)
        if until <= now or failed is None or failed.transient or not failed.why:
            continue
        out[g.id] = (PendingReason(ReasonCategory.BACKOFF, (
            f"its last bind was refused: {failed.why}; retried after a "
            f"{format_duration(failed.delay)} backoff")), members(g))
    return out


def unformed(house: Housekeeping) -> tuple[Unformed, ...]:
    if not house.unformed:
        return ()
    return tuple(Unformed(gid, PendingReason(ReasonCategory.WAITING_FOR_MEMBERS, p.message),
                          Members(p.pods, native=p.native))
                 for gid, p in sorted(house.unformed.items()))


def repairs(house: Housekeeping) -> tuple[str, ...]:
    """The partly bound gangs, whose remaining members go before every other gang."""
    return tuple(sorted(house.partly_bound))


def rollbacks(house: Housekeeping, bound: Iterable[str], pending: Mapping[str, PendingReason],
              now: float, decided: Iterable[str] = ()) -> tuple[Rollback, ...]:
    """The partly bound gangs this cycle does not complete and rolls back; *decided*: the
    gangs an earlier cycle rolled back (still partly bound: the rollback failed)."""
    if not house.partly_bound:
        return ()
    done, again = set(bound), set(decided)
    out: list[Rollback] = []
    for gid, p in sorted(house.partly_bound.items()):
        if gid in done or parked(house, gid, now):
            continue
        waited = p.cut and now - p.since >= p.grace(house.repair_grace)
        if not p.started or gid in again or (p.cut and house.takeover) or waited:
            cause, reason = _why_not_completed(gid, house, pending, now)
            if waited and p.timeout is not None and not house.takeover:
                cause, reason = RollbackCause.TIMED_OUT, (
                    f"its bound members waited {format_duration(now - p.since)} for the rest "
                    f"(scheduleTimeoutSeconds {p.timeout:.0f}); released, the gang is retried "
                    f"whole ({reason})")
            out.append(Rollback(gid, p.pods, reason, cause, house.takeover))
    return tuple(out)


def parked(house: Housekeeping, gid: str, now: float) -> bool:
    """Is the gang parked: waiting for the apiserver to answer its bind (never rolled back for
    it)?"""
    failed = house.failed_binds.get(gid)
    return failed is not None and failed.transient and house.backoff.get(gid, now) > now


#: What keeps a partly bound gang's remaining members from binding, by their pending reason.
_CAUSES = {ReasonCategory.WAITING_FOR_MEMBERS: RollbackCause.MEMBER_GONE,
           ReasonCategory.PLACEMENT: RollbackCause.NO_ROOM,
           ReasonCategory.TOPOLOGY: RollbackCause.NO_ROOM,
           ReasonCategory.PREEMPTION_PENDING: RollbackCause.NO_ROOM,
           ReasonCategory.RESERVED: RollbackCause.NO_ROOM,
           ReasonCategory.QUEUED: RollbackCause.NO_ROOM,
           ReasonCategory.BACKOFF: RollbackCause.BIND_REFUSED}


def _why_not_completed(gid: str, house: Housekeeping, pending: Mapping[str, PendingReason],
                       now: float) -> tuple[RollbackCause, str]:
    """Why its remaining members were not bound this cycle: the cause, and the reason in the
    words people read."""
    reason = pending.get(gid)
    if reason is not None:
        return _CAUSES.get(reason.category, RollbackCause.NOT_ADMITTED), str(reason)
    problem = house.unformed.get(gid)
    if problem is not None:
        return (RollbackCause.MEMBER_GONE,
                f"{ReasonCategory.WAITING_FOR_MEMBERS}: {problem.message}")
    until = house.backoff.get(gid)
    if until is not None and until > now:
        failed = house.failed_binds.get(gid)
        why = f" ({failed.why})" if failed is not None else ""
        return (RollbackCause.BIND_REFUSED, f"its last bind was refused{why}; not retried for "
                f"another {format_duration(until - now)} (backoff)")
    return RollbackCause.MEMBER_GONE, "its remaining members are not pending"

def cut_while_binding(bound: list[PodInfo], members: Iterable[PodInfo]) -> bool:
    """Was a gang cut while binding: a member waiting now was created no later than the
    first bound member started (a replacement for a lost member comes after)?"""
    starts = [p.started_at for p in bound if p.started_at is not None]
    if not starts:
        return True
    first = min(starts)
    return any(not p.node_name and not p.is_finished and p.creation_time <= first
               for p in members)
