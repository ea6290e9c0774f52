"""Kubernetes' own gang API (``scheduling.k8s.io`` Workload and PodGroup), as observed.

Why one model for two API versions: 1.36 serves ``v1alpha2`` and 1.37 ``v1beta1``; they
name the same ideas differently (``podGroupTemplateRef.workload`` vs ``workloadRef``,
``disruptionMode: PodGroup`` vs ``disruptionMode: {all: {}}``, condition
``PodGroupScheduled`` vs ``PodGroupInitiallyScheduled``). The converters map both onto these
records, so grouping and preemption never ask which version an object came from; only the
status writer does (``api_version``), to write back in the object's own terms.

A Workload is a template (``podGroupTemplates``); a PodGroup is the runtime group its pods
name in ``spec.schedulingGroup.podGroupName``. The PodGroup's own policy is authoritative
(controllers copy it from the template); the Workload lends its labels and annotations
(queue, expected runtime) to PodGroups made from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from scheduler.model.constraints import DeviceClaimUse
from scheduler.model.pods import PreemptionPolicy

#: The API group; versions are ``V1ALPHA2`` (Kubernetes 1.36) and ``V1BETA1`` (1.37).
GROUP = "scheduling.k8s.io"
V1ALPHA2 = f"{GROUP}/v1alpha2"
V1BETA1 = f"{GROUP}/v1beta1"
VERSIONS = (V1ALPHA2, V1BETA1)


class DisruptionMode(StrEnum):
    """How a running group may be disrupted (preempted).

    ``PodGroup`` (``all`` in v1beta1): only the whole group together. ``Pod`` (``single``,
    the default): single pods may be disrupted. gang-scheduler preempts whole gangs only, so
    both mean the whole group here; ``Pod`` merely permits what kube-scheduler may do.
    """

    POD = "Pod"
    POD_GROUP = "PodGroup"


@dataclass(frozen=True, slots=True)
class GroupPolicy:
    """What a PodGroup (or a Workload's PodGroupTemplate) says about scheduling its pods."""

    #: ``schedulingPolicy.gang.minCount``; None for the ``basic`` policy (pod by pod).
    min_count: int | None
    #: ``priority`` as admission resolved it; None when the API left it unset.
    priority: int | None = None
    priority_class_name: str = ""
    disruption: DisruptionMode = DisruptionMode.POD
    #: ``schedulingConstraints.topology[0].key``: every pod within one domain of this label.
    topology_key: str | None = None
    #: ``resourceClaims``: claims the group's pods share (Dynamic Resource Allocation,
    #: ``DRAWorkloadResourceClaims``); a pod uses one by an identical entry of its own.
    resource_claims: tuple[DeviceClaimUse, ...] = ()
    #: ``preemptionPolicy`` (1.37 ``PodGroupPreemptionPolicy``); None when unset.
    preemption_policy: PreemptionPolicy | None = None

    @property
    def is_gang(self) -> bool:
        return self.min_count is not None


@dataclass(frozen=True, slots=True)
class WorkloadInfo:
    """A ``Workload``: named PodGroupTemplates, plus labels its PodGroups inherit."""

    namespace: str
    name: str
    uid: str = ""
    api_version: str = V1ALPHA2
    templates: Mapping[str, GroupPolicy] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class NativeGroupInfo:
    """A ``PodGroup`` of the ``scheduling.k8s.io`` API (not scheduler-plugins' CRD)."""

    namespace: str
    name: str
    policy: GroupPolicy
    uid: str = ""
    api_version: str = V1ALPHA2
    generation: int = 0
    #: ``podGroupTemplateRef.workload`` (v1alpha2) / ``workloadRef`` (v1beta1).
    workload: str | None = None
    template: str | None = None
    #: The controlling owner (``Job`` when the Job controller made it), else None.
    owner_kind: str | None = None
    owner_name: str | None = None
    creation_time: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: Not compared: an update that changed nothing the scheduler reads is no change.
    resource_version: str = field(default="", compare=False)
    #: The scheduling condition is already True (it never goes back to False, as upstream).
    scheduled: bool = False
    #: ``status.resourceClaimStatuses``: (entry, the claim made for it from its template).
    claim_statuses: tuple[tuple[str, str], ...] = ()

    def claim_of(self, use: DeviceClaimUse) -> str | None:
        """The claim a pod's entry *use* names when it is one of the group's (identical to
        a ``resourceClaims`` entry): the named claim, or the one made for the group from
        the template ("" when none is needed, None while it is not made yet). Raises
        ``KeyError`` when *use* is not the group's."""
        if use not in self.policy.resource_claims:
            raise KeyError(use.entry)
        if use.claim:
            return use.claim
        return next((claim for entry, claim in self.claim_statuses if entry == use.entry),
                    None)

    @property
    def consumer(self) -> tuple[str, str, str, str]:
        """(API group, resource, name, uid): how its shared claims' ``reservedFor`` names
        it."""
        return ("scheduling.k8s.io", "podgroups", self.name, self.uid)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def workload_key(self) -> str | None:
        return f"{self.namespace}/{self.workload}" if self.workload else None

    @property
    def job_key(self) -> str | None:
        """The Job that made this group (its labels name the queue, its deadline the runtime)."""
        return (f"{self.namespace}/{self.owner_name}"
                if self.owner_kind == "Job" and self.owner_name else None)


@dataclass(frozen=True, slots=True)
class ResolvedGroup:
    """A PodGroup with the Workload it was made from (None: none named, or not seen yet)."""

    group: NativeGroupInfo
    workload: WorkloadInfo | None = None
