"""What one cycle decided: the plan the actuator carries out and people read.

A ``CyclePlan`` is a frozen value and everything an actuator needs to carry the cycle out,
so neither the live actuator nor the simulated cluster looks anything up again: binds (with
the exact pod -> node mapping), evictions (each naming its preemptor and the victim's pods),
nominations (with the pod -> node map for ``nominatedNodeName``) and reservations that keep
capacity for gangs that will start later, a reason for every gang left pending (and the pods
to write it on), partly bound gangs to roll back, and gangs that cannot even be formed (no
gang is ever given up for waiting: ``scheduler.decide.housekeeping``). The next cycle gets the plan
back as ``previous`` so nominated and reserved capacity survives between cycles. Per-queue tallies
are a separate pure function of the input and the plan (``scheduler.decide.tallies``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from policies.reservation import Reservation
from scheduler.model import Gang, PodRef, RunningGang, prebind
from scheduler.model.durations import format_duration
from scheduler.model.native import NativeGroupInfo
from scheduler.model.prebind import PreBind
from scheduler.model.release import Release
from scheduler.placement.types import Placement, spread_members


class ReasonCategory(StrEnum):
    """Why a gang is still pending, coarse enough for metrics and a status condition."""

    WAITING_FOR_MEMBERS = "WaitingForMembers"  # fewer pods exist than minMember
    NOT_ALLOWED = "NotAllowed"  # unknown queue, a parent queue, or namespace not permitted
    QUOTA = "Quota"  # the queue's quota (with what it may borrow) does not cover the gang
    PLACEMENT = "Placement"  # no nodes with room (or no eligible nodes at all)
    TOPOLOGY = "Topology"  # room overall, but not within one required topology domain
    PREEMPTION_PENDING = "PreemptionPending"  # victims are being evicted for this gang
    RESERVED = "Reserved"  # has a reservation: nodes and an estimated start
    QUEUED = "Queued"  # would start, but an earlier gang goes first (strict order, reservation)
    VOLUMES = "Volumes"  # its claims are missing, unbound, or being provisioned for it
    UNSUPPORTED = "Unsupported"  # uses a pod field the scheduler does not evaluate: refused
    DEVICES = "Devices"  # its device claims are missing, or not allocated by gang-scheduler
    BACKOFF = "Backoff"  # its last bind (or its claims' writes) refused: backing off
    #: Held by a guard of its queue: GPU-hour budget used up, running or pending cap reached
    QUEUE_LIMIT = "QueueLimit"


@dataclass(frozen=True, slots=True)
class PendingReason:
    category: ReasonCategory
    message: str  # what a person can do about it
    #: 1-based position in this cycle's order; 0: never ordered. Its own field (the
    #: PodGroup's ``status.queuePosition``), never in the text: it moves whenever a gang
    #: ahead starts or leaves, and the text must change only when the reason does.
    position: int = 0
    #: When it is expected to start (epoch seconds; a reservation's), None: no estimate. Its
    #: own field, never in the message, for the same reason.
    estimated_start: float | None = None

    def __str__(self) -> str:
        """What the pods' ``PodScheduled`` condition and the events say: category and
        message, without the fields that move while the reason stays."""
        return f"{self.category}: {self.message}"


@dataclass(frozen=True, slots=True)
class Bind:
    gang_id: str
    queue: str
    placement: Placement
    #: Each role's pods in order, mapped onto the placement's nodes (empty without pods).
    pod_nodes: tuple[tuple[PodRef, str], ...] = ()
    group_uid: str | None = None  # its PodGroup's, if it has one (events go there)
    native: NativeGroupInfo | None = None  # its scheduling.k8s.io PodGroup, if any
    #: An elastic gang's members beyond its minimum, placed or not ("growing: 2 of 4
    #: optional members placed"; ``scheduler.model.elastic.describe_growth``); "" otherwise.
    growth: str = ""
    #: Its members are marked, before they bind, as not to be evicted by the
    #: cluster-autoscaler's scale-down (``scheduler.decide.scale_up.guard_from_scale_down``).
    keep_from_scale_down: bool = False


@dataclass(frozen=True, slots=True)
class Provision:
    """Claims to bind or provision for a gang that binds once they are bound: a claim its
    members share across nodes is reachable from where only its new PV will tell."""

    gang_id: str
    prebinds: tuple[PreBind, ...]


@dataclass(frozen=True, slots=True)
class PodSet:
    """``count`` members alike: one role, the unit a ProvisioningRequest names a template for."""

    role: str
    count: int
    #: One pending member of the role: the pod whose spec the autoscaler's template copies.
    sample: PodRef | None = None


@dataclass(frozen=True, slots=True)
class ScaleUp:
    """Ask the autoscaler for ``nodes`` new nodes of ``group`` that take the whole gang
    ``gang_id``, all or none (``scheduler.decide.scale_up``; written as a ProvisioningRequest
    by ``scheduler.kube.write.provisioning``)."""

    gang_id: str
    group: str
    nodes: int
    pod_sets: tuple[PodSet, ...]

    @property
    def message(self) -> str:
        """What the gang's pending reason says while the nodes are being added."""
        noun = "node" if self.nodes == 1 else "nodes"
        return f"waiting for {self.nodes} new {noun} of node group {self.group} (autoscaler)"


@dataclass(frozen=True, slots=True)
class Eviction:
    """What a preemptor takes from a running gang (its victim): the whole gang, so far."""

    release: Release
    preemptor: str
    message: str

    @property
    def headline(self) -> str:
        """What the victim is told (events, ``DisruptionTarget``): the preemptor and why, or
        only why when no gang asked for it (a guard: its message names the policy)."""
        if not self.preemptor:
            return self.message
        return f"preempted by gang {self.preemptor}: {self.message}"

    @property
    def victim(self) -> str:
        """The victim gang's id."""
        return self.release.id

    @property
    def queue(self) -> str:
        """The victim's queue."""
        return self.release.running.gang.queue

    @property
    def pods(self) -> tuple[PodRef, ...]:
        """The victim's pods to evict (those bound when it was chosen)."""
        return self.release.pods

    @property
    def native(self) -> NativeGroupInfo | None:
        """The victim's scheduling.k8s.io PodGroup, if any."""
        return self.release.running.gang.native

    @property
    def group_uid(self) -> str | None:
        """The victim's scheduler-plugins PodGroup's uid, if any."""
        return self.release.running.group_uid


@dataclass(frozen=True, slots=True)
class Members:
    """The pods of a gang the plan speaks about, and its PodGroup when it has one (events
    and status then go to the PodGroup, else to its first pod): a scheduler-plugins
    PodGroup's uid, or Kubernetes' own PodGroup."""

    pods: tuple[PodRef, ...] = ()
    group_uid: str | None = None
    native: NativeGroupInfo | None = None


class RollbackCause(StrEnum):
    """Why completing a partly bound gang has become impossible: the ``cause`` of its
    rollback in logs and metrics (a bounded set). A transient fault is never one: a bind that
    failed for want of an answer parks its gang until the apiserver answers
    (``scheduler.decide.housekeeping``)."""

    NO_ROOM = "NoRoom"  # its remaining members fit nowhere: their nodes taken or gone
    MEMBER_GONE = "MemberGone"  # a member deleted or replaced: too few members left to bind
    BIND_REFUSED = "BindRefused"  # the apiserver refused its bind for good (gone, forbidden)
    NOT_ADMITTED = "NotAdmitted"  # its queue, quota, volumes or pod fields keep it out
    #: Its bound members waited for the rest longer than its PodGroup's
    #: scheduleTimeoutSeconds (the user's own bound): the gang is retried whole after a backoff.
    TIMED_OUT = "ScheduleTimeout"


@dataclass(frozen=True, slots=True)
class Rollback:
    """A gang left partly bound (fewer than minMember bound) that this cycle cannot
    complete: its bound pods are released (``DisruptionTarget``, then deleted) so that their
    controller recreates them."""

    gang_id: str
    pods: tuple[PodRef, ...]
    reason: str
    cause: RollbackCause
    #: Decided on the first cycle after taking over (a predecessor may have crashed mid-bind).
    takeover: bool = False


@dataclass(frozen=True, slots=True)
class Unformed:
    """A group of pods that is not a gang yet (its PodGroup is missing, an annotation is
    unreadable): why, on its pods."""

    gang_id: str
    reason: PendingReason
    members: Members = Members()


#: A nomination whose victims have not gone after this long is dropped (stuck pods).
NOMINATION_TIMEOUT_SECONDS = 900.0


@dataclass(frozen=True, slots=True)
class Nomination:
    """Capacity kept for a preemptor until its victims are gone and it binds."""

    gang_id: str
    nodes: tuple[str, ...]
    victims: tuple[str, ...]
    since: float  # when the evictions were decided
    placement: Placement | None = None  # the proven placement (its quota stays charged)
    #: The victims were already terminating (evicted by an earlier leader or run whose plan
    #: is lost), not evicted by this scheduler: said so in the reason on every cycle.
    inherited: bool = False
    #: The gang's pods onto the placement's nodes, for their ``nominatedNodeName``.
    pod_nodes: tuple[tuple[PodRef, str], ...] = ()
    #: Victims that give back only members above their minimum (elastic shrink), with
    #: those members: such a victim is gone once they are, though the gang runs on.
    partial: tuple[tuple[str, tuple[PodRef, ...]], ...] = ()

    def victim_gone(self, victim: str, running: Mapping[str, RunningGang]) -> bool:
        """Has *victim* given back what this nomination waits for?"""
        rg = running.get(victim)
        if rg is None:
            return True
        taken = dict(self.partial).get(victim)
        if taken is None:
            return False
        left = {p for p, _ in rg.pod_nodes}
        return left.isdisjoint(taken)


@dataclass(frozen=True, slots=True)
class CyclePlan:
    now: float
    binds: tuple[Bind, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    nominations: tuple[Nomination, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    provisions: tuple[Provision, ...] = ()
    #: Gangs for which the autoscaler is asked for new nodes (the request kept while it tries).
    scale_ups: tuple[ScaleUp, ...] = ()
    #: Pending gangs in pools that may scale up but without a request: their pods are kept out
    #: of the autoscaler's own scale-up (``scheduler.decide.scale_up.ScaleUps.held``).
    scale_up_held: tuple[str, ...] = ()
    pending: Mapping[str, PendingReason] = field(default_factory=dict)
    #: Gang ids in the order they were considered (ordered gangs only).
    order: tuple[str, ...] = ()
    #: The pods of each pending gang, for its reason.
    members: Mapping[str, Members] = field(default_factory=dict)
    rollbacks: tuple[Rollback, ...] = ()
    unformed: tuple[Unformed, ...] = ()
    #: The earliest time at which the same input may give another plan (a backoff ends, a
    #: timeout runs out, a gang starves...: ``scheduler.decide.due``); None: time alone changes
    #: nothing. Until then, or until the input changes, a cycle would only repeat this plan.
    due: float | None = None
    #: When a runaway guard acts next with nothing else changing (a gang reaches its runtime
    #: limit, a held queue's budget period ends: ``scheduler.decide.guards.wake``); None
    #: without guards. Also in ``due``; apart so the simulator's clock wakes only for it.
    wake: float | None = None

    def bind_of(self, gang_id: str) -> Bind | None:
        return next((b for b in self.binds if b.gang_id == gang_id), None)

    def reservation_of(self, gang_id: str) -> Reservation | None:
        return next((r for r in self.reservations if r.gang_id == gang_id), None)

    def nomination_of(self, gang_id: str) -> Nomination | None:
        return next((n for n in self.nominations if n.gang_id == gang_id), None)


def map_pods(gang: Gang, placement: Placement) -> tuple[tuple[PodRef, str], ...]:
    """Each role's pods, in order, onto the placement's (role, node) counts."""
    out: list[tuple[PodRef, str]] = []
    for role in gang.roles:
        if role.pods:
            out += spread_members(role.pods, role.name, placement.assignments)
    return tuple(out)


def explain(plan: CyclePlan, gang_id: str) -> str:
    """What this plan does about one gang, as text for ``gang-scheduler explain``."""
    lines: list[str] = []
    bind = plan.bind_of(gang_id)
    if bind is not None:
        spread = ", ".join(f"{a.node} ({a.count} x {a.role})" for a in bind.placement.assignments)
        lines.append(f"{gang_id}: bound ({bind.placement.pods_placed()} pods, queue "
                     f"{bind.queue}): {spread}")
        if bind.growth:
            lines.append(f"{gang_id}: {bind.growth}")
        if bind.placement.prebinds:
            lines.append(f"{gang_id}: claims first: {prebind.describe(bind.placement.prebinds)}")
    for prov in plan.provisions:
        if prov.gang_id == gang_id:
            lines.append(f"{gang_id}: claims to bind before it binds: "
                         f"{prebind.describe(prov.prebinds)}")
    for ev in plan.evictions:
        if ev.victim == gang_id:
            lines.append(f"{gang_id}: evicted for {ev.preemptor}: {ev.message}" if ev.preemptor
                         else f"{gang_id}: evicted: {ev.message}")
        if ev.preemptor == gang_id:
            lines.append(f"{gang_id}: preempts {ev.victim}")
    reason = plan.pending.get(gang_id)
    if reason is not None:
        total = len(plan.order)
        where = f" (#{reason.position} of {total} in queue order)" if reason.position else ""
        lines.append(f"{gang_id}: pending, {reason.category}{where}: {reason.message}")
    nomination = plan.nomination_of(gang_id)
    if nomination is not None:
        lines.append(f"{gang_id}: nodes kept until the victims are gone: "
                     f"{', '.join(nomination.nodes)}")
    reservation = plan.reservation_of(gang_id)
    if reservation is not None:
        lines.append(f"{gang_id}: reserved {', '.join(reservation.nodes)}; estimated start "
                     f"in {format_duration(max(0.0, reservation.estimated_start - plan.now))}")
    for r in plan.rollbacks:
        if r.gang_id == gang_id:
            lines.append(f"{gang_id}: rolled back ({len(r.pods)} bound pods deleted, "
                         f"{r.cause}): {r.reason}")
    for u in plan.unformed:
        if u.gang_id == gang_id:
            lines.append(f"{gang_id}: not a gang yet: {u.reason.message}")
    if not lines:
        lines.append(f"{gang_id}: not in this cycle (unknown, running, or backing off)")
    return "\n".join(lines)
