"""Gangs: groups of pods that are useful only when enough of them run at once.

A gang's members are grouped into roles of identical requirements (a launcher and 63
identical workers are two roles), so the solver reasons about integer counts per
(role, node) instead of one variable per pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from scheduler.model.demand import (
    Demand,
    charge_of,
    gang_demand,
    node_charges,
    node_equivalents,
    role_demand,
)
from scheduler.model.labels import NO_LABELS, Labels
from scheduler.model.native import NativeGroupInfo
from scheduler.model.pods import PodRequirements, PreemptionPolicy
from scheduler.model.resources import Resources, total
from scheduler.model.shortfall import Shortfall
from scheduler.model.workloads import OwnerRef


@dataclass(frozen=True, slots=True)
class PodRef:
    """One member pod, enough to bind it and to tell it apart from a recreated namesake."""

    namespace: str
    name: str
    uid: str = ""
    #: The ResourceClaims made for it from templates (``PodInfo.claim_statuses``). Not
    #: compared: a reference names a pod, wherever it was built.
    claims: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    def claim_of(self, entry: str) -> str | None:
        """The claim made for its ``spec.resourceClaims`` *entry*: None while none is made
        yet, "" when none is needed (the resourceclaim controller says so)."""
        return next((claim for name, claim in self.claims if name == entry), None)


@dataclass(frozen=True, slots=True)
class Role:
    """``count`` identical pods; at least ``min_count`` of them must be placed together."""

    name: str
    count: int
    requirements: PodRequirements
    min_count: int | None = None  # None: all ``count`` are required
    #: The concrete pending pods, sorted by name; may be empty in the simulator.
    pods: tuple[PodRef, ...] = ()
    #: The labels every member carries: what other pods' affinity and spread selectors
    #: see. Keys some members lack or carry with another value are in ``mixed_labels``; a
    #: gang's roles are split on every key its own selectors read, so those are never mixed.
    labels: Labels = NO_LABELS
    mixed_labels: frozenset[str] = frozenset()
    #: GPUs one member's device claims count for (``scheduler.model.demand.claims_gpus``,
    #: from the device inventory where the gang is built): part of its ``demand``.
    device_gpus: int = 0
    #: GPU-equivalents (thousandths) of the same claims when a share of a device makes them
    #: less than ``device_gpus`` whole (``claims_demand``); None: ``device_gpus`` whole.
    device_milli: int | None = None
    #: ``demand`` and ``charge``, worked out on first use (every fit, shape and running
    #: gang's charges read them).
    _demand: Demand | None = field(default=None, init=False, compare=False, repr=False)
    _charge: Resources | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def required(self) -> int:
        return self.count if self.min_count is None else self.min_count

    @property
    def requests(self) -> Resources:
        return self.requirements.effective_requests

    @property
    def demand(self) -> Demand:
        """What one member asks for in accounting units (``scheduler.model.demand``): read
        this, not ``requests``' GPU key, so a GPU that comes from a device claim counts too."""
        known = self._demand
        if known is None:
            known = role_demand(self)
            object.__setattr__(self, "_demand", known)
        return known

    @property
    def charge(self) -> Resources:
        """What quota charges for one member (``scheduler.model.demand.charge_of``): the very
        ``requests`` object while its demand is its GPU request."""
        known = self._charge
        if known is None:
            known = charge_of(self)
            object.__setattr__(self, "_charge", known)
        return known


class Tier(StrEnum):
    """What kind of work a gang is (the ``gangscheduler.io/tier`` label of its pods).

    ``interactive``: a notebook or debugging session someone is waiting at. It is considered
    before its queue's batch gangs and no batch gang may preempt it (``policies.interactive``).
    ``batch``: everything else (no label, or a value that cannot be read)."""

    BATCH = "batch"
    INTERACTIVE = "interactive"


class TopologyMode(StrEnum):
    REQUIRED = "Required"  # all members within one domain of the level, or not at all
    PREFERRED = "Preferred"  # as few domains of the level as possible


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    #: A topology label key (e.g. ``topology.gangscheduler.io/rack``) or ``kubernetes.io/hostname``.
    level: str
    mode: TopologyMode = TopologyMode.REQUIRED


@dataclass(frozen=True, slots=True)
class Gang:
    """A pending (or running) group of pods that is scheduled all-or-nothing."""

    id: str  # "namespace/name": stable across restarts, used in reasons and logs
    uid: str  # tie-breaker of last resort; unique per incarnation
    namespace: str
    name: str
    queue: str
    roles: tuple[Role, ...]
    priority: int = 0
    creation_time: float = 0.0  # seconds (epoch live, virtual in the simulator)
    topology: TopologyConstraint | None = None
    runtime_estimate: float | None = None  # seconds, for reservations and backfill
    #: Seconds it may run before it is evicted (``gangscheduler.io/max-runtime``; its
    #: queue's ``spec.guards.maxRuntimeSeconds`` caps it: ``policies.guards``).
    max_runtime: float | None = None
    #: Seconds its workload ran in earlier runs (``gangscheduler.io/runtime-seconds`` on its
    #: owner): a runtime limit counts them with the current run's.
    ran_before: float = 0.0
    #: The object its user submitted, where ``ran_before`` is kept (its JobSet, Job or
    #: scheduler-plugins PodGroup; None for a lone pod, which never runs twice, and a native
    #: PodGroup's gang without a Job). Where to write, not what to decide: not compared.
    owner: OwnerRef | None = field(default=None, compare=False, repr=False)
    #: ``interactive`` for a notebook or debugging session (``policies.interactive``).
    tier: Tier = Tier.BATCH
    #: Pods that exist so far (a gang with fewer than ``min_member`` waits for members).
    present_members: int | None = None  # None: all roles' pods are present
    #: minMember as declared (PodGroup), when more members are required than exist yet.
    declared_min_member: int | None = None
    #: ``Never`` if any member's pod says so: the gang is ordered by its priority as usual
    #: but never evicts other gangs (a member that may not preempt binds the whole gang).
    preemption_policy: PreemptionPolicy = PreemptionPolicy.PREEMPT_LOWER_PRIORITY
    #: PodGroup ``minResources``: what the whole gang will need, declared before its pods
    #: exist, so a gang that could never fit is told so while it still waits for members.
    min_resources: Resources | None = None
    #: The gang is a PodGroup's (whose uid is ``uid``): its status and events go there.
    pod_group: bool = False
    #: What its owner creates only after this gang runs (a JobSet's later steps), added to
    #: its pending reason: why part of the workload is not there yet. Not compared.
    later_steps: str = field(default="", compare=False)
    #: The ``scheduling.k8s.io`` PodGroup the gang's pods name, if any: its conditions and
    #: events go there. Where to write, not what to decide: not compared.
    native: NativeGroupInfo | None = field(default=None, compare=False, repr=False)
    #: What grouping chose where the gang's own objects disagree (its queue, its priority):
    #: said once to its user (``scheduler.kube.write.gang_notices``). Not what to decide: not
    #: compared.
    notices: tuple[str, ...] = field(default=(), compare=False)
    #: The order the live cache first saw it in among all gangs (1, 2, ...; 0: not known, as
    #: in the simulator): breaks ties of ``creation_time``, which the apiserver keeps to the
    #: second, so of two Jobs submitted the same second the first submitted goes first (the
    #: watch delivers objects in the order they were written), as kube-scheduler orders
    #: equal pods by when they entered its queue. Not compared: it orders, it is not the gang.
    arrival: int = field(default=0, compare=False)
    #: Some role's pods have constraints involving other pods or volumes (affinity, spread,
    #: ports, claims): where it may go can depend on more than its shape. A slot set at
    #: construction: ``placement.terms.context_key`` and the deferred gangs' never-starts
    #: answer ask it of every gang on every turn (millions of times in a long simulation).
    constrained: bool = field(default=False, init=False, compare=False, repr=False)
    #: ``tier`` is ``interactive``: a slot rather than a property, as the order of every
    #: turn asks it (millions of times in a simulation of a long backlog).
    interactive: bool = field(default=False, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "interactive", self.tier is Tier.INTERACTIVE)
        object.__setattr__(self, "constrained",
                           not all(r.requirements.constraints.empty for r in self.roles))

    @property
    def min_member(self) -> int:
        placed = sum(r.required for r in self.roles)
        return placed if self.declared_min_member is None else max(placed, self.declared_min_member)

    @property
    def size(self) -> int:
        return sum(r.count for r in self.roles)

    @property
    def members_present(self) -> int:
        return self.size if self.present_members is None else self.present_members

    @property
    def may_preempt(self) -> bool:
        return self.preemption_policy is not PreemptionPolicy.NEVER

    @property
    def is_complete(self) -> bool:
        return self.members_present >= self.min_member

    @property
    def min_requests(self) -> Resources:
        """What the required members take together: the quota a gang must be admitted for."""
        return total(r.requests * r.required for r in self.roles)

    @property
    def demand(self) -> Demand:
        """What the required members ask for together in accounting units: what quota,
        accounting and the views charge the gang (``scheduler.model.demand``)."""
        return gang_demand(self)

    @property
    def gpus(self) -> int:
        """GPUs of the required members (``demand.gpus``)."""
        return gang_demand(self).gpus

    @property
    def pods(self) -> tuple[PodRef, ...]:
        """Every role's pods, in role order."""
        return tuple(p for r in self.roles for p in r.pods)

    def role(self, name: str) -> Role:
        for r in self.roles:
            if r.name == name:
                return r
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class RunningGang:
    """A gang whose members are bound: what the snapshot charges, and preemption may remove.

    ``allocations`` maps node name to what the gang's pods request there (what the node has
    less of); ``charges`` to what quota charges it there. Pods of the default scheduler are
    not gangs: they only appear in the snapshot's per-node usage and are never victims.
    """

    gang: Gang
    allocations: tuple[tuple[str, Resources], ...]  # (node, resources), sorted by node
    start_time: float
    last_checkpoint: float | None = None  # None: no checkpoint since start
    expected_end: float | None = None  # start + runtime estimate, when one is known
    #: Some bound pod is being deleted (deletionTimestamp set): an eviction already under
    #: way, whoever decided it (this leader, a previous one, or a restarted scheduler).
    terminating: bool = False
    #: (role, node, pods) of the gang's members, sorted: which role's pods run where, for
    #: the labels, ports and volumes other pods' constraints see. Empty when unknown (a
    #: gang built from resource totals only); its pods are then invisible to selectors.
    members: tuple[tuple[str, str, int], ...] = ()
    #: Fewer members stay than the gang's minimum (a node lost, a worker failed): how many,
    #: which ranks. None while it has them all (``scheduler.model.shortfall``).
    shortfall: Shortfall | None = None
    #: Its scheduler-plugins PodGroup's uid, if it has one: where events about the gang go
    #: (``Preempted``, naming the preemptor). Where to write, not what to decide: not compared.
    group_uid: str | None = field(default=None, compare=False, repr=False)
    #: An elastic gang's minimum (fewer members than it has may run; ``scheduler.model.
    #: elastic``): None for every other gang, all of whose members are required.
    min_member: int | None = None
    #: Which member runs on which node, sorted by rank: known for an elastic gang (a shrink
    #: releases some of its members and must say what that frees), else empty.
    pod_nodes: tuple[tuple[PodRef, str], ...] = ()
    #: An elastic gang's members being deleted (members above its minimum given back):
    #: what it is draining of, while the rest runs on.
    leaving: frozenset[PodRef] = frozenset()
    #: ``charges``, worked out on first use (the ledger and accounting read it often).
    _charges: tuple[tuple[str, Resources], ...] | None = field(
        default=None, init=False, compare=False, repr=False)

    @property
    def id(self) -> str:
        return self.gang.id

    @property
    def charges(self) -> tuple[tuple[str, Resources], ...]:
        """(node, what quota charges the gang there), sorted by node: ``allocations`` with
        each member's GPUs taken from its role's demand (``scheduler.model.demand``); the
        very ``allocations`` while every role's charge is its requests."""
        known = self._charges
        if known is None:
            known = node_charges(self.allocations, self.gang.roles, self.members)
            object.__setattr__(self, "_charges", known)
        return known

    @property
    def held_milli(self) -> dict[str, int]:
        """Per node, the GPU-equivalents (thousandths) the gang holds there when a share of a
        device makes them less than its charged GPUs (``node_equivalents``); empty: every
        node holds its charged GPUs whole. What accounting and the queues view count."""
        return node_equivalents(self.gang.roles, self.members)

    @property
    def usage(self) -> Resources:
        """What quota charges the gang in all (its ``charges`` summed)."""
        return total(res for _, res in self.charges)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.allocations)
