"""What a pod asks of the pods around it and of its volumes, beyond one node's fit.

Inter-pod affinity and anti-affinity, topology spread constraints, host ports, claimed
volumes and preferred node affinity: the fields kube-scheduler's InterPodAffinity,
PodTopologySpread, NodePorts, VolumeBinding/VolumeZone/NodeVolumeLimits and NodeAffinity
plugins read. Values are resolved the way kube-scheduler resolves them before filtering
(a term's namespaces defaulted to the pod's own, ``matchLabelKeys`` merged into the
selector), so the placement core only evaluates them.

``unsupported`` lists fields of the pod this scheduler does not evaluate (for example
pod-level ``spec.resources``): such a pod is refused with a reason naming the field rather
than bound as if the field were absent. Its ``spec.resourceClaims`` (Dynamic Resource
Allocation) are ``device_claims``: where each entry's ResourceClaim comes from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from scheduler.model.labels import EVERYTHING, NOTHING, LabelSelector


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """Pods matching ``selector`` in ``namespaces`` (or namespaces whose labels match
    ``namespace_selector``), co-located per ``topology_key``."""

    selector: LabelSelector
    topology_key: str
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector = NOTHING  # nil: only the listed namespaces

    def matches(self, namespace: str, labels: Mapping[str, str],
                namespace_labels: Mapping[str, str]) -> bool:
        """Does a pod in *namespace* with *labels* fall under this term?"""
        if namespace not in self.namespaces and not self.namespace_selector.matches(
                namespace_labels):
            return False
        return self.selector.matches(labels)

    def describe(self) -> str:
        """``app=trainer per kubernetes.io/hostname``."""
        return f"{self.selector.describe()} per {self.topology_key}"


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


class Unsatisfiable(StrEnum):
    DO_NOT_SCHEDULE = "DoNotSchedule"
    SCHEDULE_ANYWAY = "ScheduleAnyway"


class InclusionPolicy(StrEnum):
    HONOR = "Honor"
    IGNORE = "Ignore"


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A ``topologySpreadConstraints`` entry, ``matchLabelKeys`` already merged."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: Unsatisfiable
    selector: LabelSelector = NOTHING
    min_domains: int = 1
    node_affinity_policy: InclusionPolicy = InclusionPolicy.HONOR
    node_taints_policy: InclusionPolicy = InclusionPolicy.IGNORE

    @property
    def required(self) -> bool:
        return self.when_unsatisfiable is Unsatisfiable.DO_NOT_SCHEDULE

    def counts(self, labels: Mapping[str, str]) -> bool:
        """Does an existing pod (of the same namespace) count towards the skew? An empty
        selector counts none, as in kube-scheduler."""
        return not self.selector.empty and self.selector.matches(labels)

    def describe(self) -> str:
        extra = f", minDomains {self.min_domains}" if self.min_domains > 1 else ""
        return (f"spread {self.selector.describe()} per {self.topology_key} "
                f"(maxSkew {self.max_skew}{extra})")


ALL_HOST_IPS = "0.0.0.0"


@dataclass(frozen=True, slots=True, order=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    host_ip: str = ALL_HOST_IPS

    def conflicts(self, other: HostPort) -> bool:
        """kube-scheduler's ``HostPortInfo.CheckConflict``: 0.0.0.0 overlaps every address."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return ALL_HOST_IPS in (self.host_ip, other.host_ip) or self.host_ip == other.host_ip

    def __str__(self) -> str:
        where = "" if self.host_ip == ALL_HOST_IPS else f"{self.host_ip}:"
        return f"{where}{self.port}/{self.protocol}"


@dataclass(frozen=True, slots=True, order=True)
class ClaimUse:
    """A ``persistentVolumeClaim`` volume of the pod (claims live in the pod's namespace)."""

    claim: str
    read_only: bool = False


@dataclass(frozen=True, slots=True, order=True)
class DeviceClaimUse:
    """A ``spec.resourceClaims`` entry: the pod's name for it (``entry``) and where its
    ResourceClaim comes from: one named claim (``claim``, which pods may share), or a
    ``template`` from which the resourceclaim controller makes each pod a claim of its own,
    named in the pod's ``status.resourceClaimStatuses`` (``PodRef.claims``)."""

    entry: str
    claim: str = ""
    template: str = ""

    def describe(self) -> str:
        """``spec.resourceClaims entry gpu (template one-h100)``."""
        source = f"template {self.template}" if self.template else f"claim {self.claim}"
        return f"spec.resourceClaims entry {self.entry} ({source})"


@dataclass(frozen=True, slots=True)
class PodConstraints:
    """Everything about a pod's placement that involves other pods or volumes."""

    affinity: tuple[PodAffinityTerm, ...] = ()  # required: all must be met
    anti_affinity: tuple[PodAffinityTerm, ...] = ()  # required: none may be violated
    preferred_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()  # sorted, unique
    claims: tuple[ClaimUse, ...] = ()  # sorted by claim name
    device_claims: tuple[DeviceClaimUse, ...] = ()  # in the pod's order
    #: Fields the scheduler does not evaluate, each as "path: why" (the pod is refused).
    unsupported: tuple[str, ...] = ()

    @property
    def inter_pod(self) -> bool:
        """Does placing this pod depend on other pods' labels (or theirs on its own)?"""
        return bool(self.affinity or self.anti_affinity or self.preferred_affinity
                    or self.preferred_anti_affinity or self.spread)

    @property
    def required_spread(self) -> tuple[SpreadConstraint, ...]:
        return tuple(c for c in self.spread if c.required)

    @property
    def selector_keys(self) -> frozenset[str]:
        """Label keys this pod's own selectors read (a gang's roles split on them)."""
        terms = (*self.affinity, *self.anti_affinity,
                 *(w.term for w in self.preferred_affinity),
                 *(w.term for w in self.preferred_anti_affinity))
        keys: set[str] = set()
        for t in terms:
            keys |= t.selector.keys
        for c in self.spread:
            keys |= c.selector.keys
        return frozenset(keys)

    @property
    def empty(self) -> bool:
        return self is NO_CONSTRAINTS or self == NO_CONSTRAINTS


NO_CONSTRAINTS = PodConstraints()

__all__ = [
    "ALL_HOST_IPS", "EVERYTHING", "NOTHING", "NO_CONSTRAINTS", "ClaimUse", "DeviceClaimUse",
    "HostPort",
    "InclusionPolicy", "PodAffinityTerm", "PodConstraints", "SpreadConstraint", "Unsatisfiable",
    "WeightedPodAffinityTerm",
]
