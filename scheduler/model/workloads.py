"""Pods and pod groups as observed in the cluster, before they are grouped into gangs.

The live scheduler converts apiserver JSON into these records (``scheduler.kube.read.convert``);
the simulator creates them directly. Both feed the same ``ClusterCache`` and the same gang
builder, so how a gang is recognised is decided in exactly one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from scheduler.model.failures import Failure, FailureRule
from scheduler.model.pods import PodRequirements, PreemptionPolicy
from scheduler.model.resources import Resources

QUEUE_LABEL = "gangscheduler.io/queue"
EXPECTED_RUNTIME_ANNOTATION = "gangscheduler.io/expected-runtime"
#: The longest a gang may run before it is evicted (its queue's maxRuntimeSeconds caps it).
MAX_RUNTIME_ANNOTATION = "gangscheduler.io/max-runtime"
#: Written by the scheduler on a workload's top owner (the Job, JobSet, TrainJob or PodGroup
#: users submit) at the end of each run: the seconds its earlier runs lasted, in all. Runtime
#: limits count it, so a workload restarted by its controller does not run the full limit
#: again each time (``policies.guards``; ``scheduler.kube.write.runtime_ledger``).
RUNTIME_SECONDS_ANNOTATION = "gangscheduler.io/runtime-seconds"
LAST_CHECKPOINT_ANNOTATION = "gangscheduler.io/last-checkpoint"
#: Written by the scheduler on a pending gang's pods: when it is expected to start (RFC 3339)
#: and when that was worked out. Every gang's pods carry it (lone pods, Jobs, JobSets,
#: TrainJobs, native PodGroups), not only PodGroups with ``status.estimatedStart``.
ESTIMATED_START_ANNOTATION = "gangscheduler.io/estimated-start"
ESTIMATE_TIME_ANNOTATION = "gangscheduler.io/estimate-time"
#: Written by the scheduler on the members of a gang of several in a pool that may scale up,
#: before they bind: the cluster-autoscaler's scale-down then keeps their nodes instead of
#: evicting a member to repack it (``scheduler.decide.scale_up.guard_from_scale_down``).
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"
MIN_MEMBER_ANNOTATION = "gangscheduler.io/min-member"
ROLE_LABEL = "gangscheduler.io/role"
#: ``interactive`` on a gang's pods: a notebook or debugging session (``policies.interactive``).
TIER_LABEL = "gangscheduler.io/tier"
#: Who an interactive gang belongs to, for its queue's per-user caps (a queue may name
#: another label: ``spec.interactive.userLabel``); JupyterHub's label is read after it.
USER_LABEL = "gangscheduler.io/user"
JUPYTERHUB_USER_LABEL = "hub.jupyter.org/username"
#: scheduler-plugins coscheduling (and Kubeflow Trainer's coscheduling podGroupPolicy).
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
#: Volcano's pod annotation naming its PodGroup.
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
#: Set by the JobSet controller on its Jobs and their pods: the JobSet's name and uid.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
#: Set on a TrainJob's pods by Kubeflow Trainer releases that label them with it.
TRAINJOB_NAME_LABEL = "trainer.kubeflow.org/trainjob-name"
#: Where a member's rank is written, by the operators that write one (views show it).
RANK_LABELS = ("batch.kubernetes.io/job-completion-index",  # an Indexed Job's pods
               "training.kubeflow.org/replica-index",  # Kubeflow Trainer / training-operator
               "jobset.sigs.k8s.io/job-index")


def rank_label(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str:
    """A pod's rank as its operator wrote it (label, else annotation), "" when none did."""
    for key in RANK_LABELS:
        value = labels.get(key) or annotations.get(key)
        if value:
            return value
    return ""


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"




@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True)
class PodInfo:
    """One pod, reduced to what scheduling needs."""

    uid: str
    namespace: str
    name: str
    requirements: PodRequirements
    scheduler_name: str = "default-scheduler"
    node_name: str = ""  # empty while pending
    phase: PodPhase = PodPhase.PENDING
    priority: int = 0
    creation_time: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner: OwnerRef | None = None
    terminating: bool = False
    #: Not compared: an update that changed nothing the scheduler reads is no change.
    resource_version: str = field(default="", compare=False)
    #: When the pod was bound/started (status.startTime or the PodScheduled transition);
    #: None if unknown.
    started_at: float | None = None
    #: ``spec.preemptionPolicy`` (from the PriorityClass, like ``spec.priority``).
    preemption_policy: PreemptionPolicy = PreemptionPolicy.PREEMPT_LOWER_PRIORITY
    #: ``spec.schedulingGates`` names: while any is left, no scheduler may place the pod.
    scheduling_gates: tuple[str, ...] = ()
    #: ``spec.schedulingGroup.podGroupName``: its ``scheduling.k8s.io`` PodGroup ("" if none).
    pod_group_name: str = ""
    #: ``spec.terminationGracePeriodSeconds`` (None: not given; the apiserver defaults 30):
    #: the time this pod asks for between SIGTERM and SIGKILL, which an eviction keeps.
    grace_period_seconds: int | None = None
    #: The reason of its ``DisruptionTarget=True`` condition ("" without one): who is taking
    #: it away (``PreemptionByScheduler``, ``EvictionByEvictionAPI``, ``DeletionByTaintManager``
    #: for a lost node, ...), which tells a gang being evicted from one losing members.
    disruption: str = ""
    #: ``status.resourceClaimStatuses``: (``spec.resourceClaims`` entry, the ResourceClaim
    #: the resourceclaim controller made for it from a template; "" when none was needed).
    claim_statuses: tuple[tuple[str, str], ...] = ()
    #: How it failed (phase Failed only): exit code, reason, when (``model.failures``).
    failure: Failure | None = None

    def __hash__(self) -> int:
        return hash(self.uid)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_bound(self) -> bool:
        return bool(self.node_name)

    @property
    def is_finished(self) -> bool:
        return self.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)

    @property
    def occupies_node(self) -> bool:
        """Bound and not finished: counts against its node's capacity (terminating pods too)."""
        return self.is_bound and not self.is_finished

    @property
    def requests(self) -> Resources:
        return self.requirements.effective_requests


@dataclass(frozen=True, slots=True)
class PodGroupInfo:
    """A scheduler-plugins ``PodGroup`` (``scheduling.x-k8s.io/v1alpha1``) or an equivalent."""

    namespace: str
    name: str
    uid: str = ""
    min_member: int = 1
    min_resources: Resources | None = None
    schedule_timeout_seconds: int | None = None
    creation_time: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: Not compared: an update that changed nothing the scheduler reads is no change.
    resource_version: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A ``batch/v1`` Job: its parallelism is the gang size of its pods without a group."""

    namespace: str
    name: str
    uid: str
    parallelism: int = 1
    completions: int | None = None
    #: ``status.succeeded``: completions already done, which the controller will not redo.
    succeeded: int = 0
    active_deadline_seconds: int | None = None
    #: The Job's own creation: its gang's age, which must survive pods being recreated.
    creation_time: float = 0.0
    #: ``completionMode: Indexed``: each pod carries one rank (completion index).
    indexed: bool = False
    #: ``status.completedIndexes`` of an Indexed Job: ranks done, which are never rerun.
    completed_indexes: frozenset[int] = frozenset()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: ``spec.backoffLimitPerIndex``: the Job controller then backs off per index, not per
    #: Job (``scheduler.model.job_backoff``).
    backoff_limit_per_index: int | None = None
    #: ``spec.backoffLimit`` as given (None: the API's default, ``job_backoff.backoff_limit``).
    backoff_limit: int | None = None
    #: ``status.failed``: its failed pods the controller counted (policy ``Ignore`` excluded).
    failed: int = 0
    #: ``status.failedIndexes``: ranks that used up ``backoffLimitPerIndex`` (never rerun).
    failed_indexes: frozenset[int] = frozenset()
    #: The reason of its ``Failed`` (or ``FailureTarget``) condition: the Job gave up.
    failed_reason: str = ""
    #: ``spec.podFailurePolicy.rules`` as far as ``job_backoff`` evaluates them.
    failure_rules: tuple[FailureRule, ...] = ()
    #: ``spec.suspend``: its controller keeps no pods (Kueue suspends a Job until it admits
    #: it, and again when it preempts it); said by ``explain``, never a decision input.
    suspended: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    #: Why the gang's size is not known yet (a JobSet's, ``grouping_jobset``); "" if it is.
    unknown: str = ""
    #: What its JobSet creates only after this gang's Jobs (later steps), said in the
    #: gang's pending reason; "" if nothing (``grouping_jobset``).
    later_steps: str = ""
    #: The fewest pods that may run, below its size (an operator's own minimum: a
    #: PyTorchJob's ``minAvailable`` or elastic ``minReplicas``, an autoscaled RayCluster's
    #: ``minReplicas``): an elastic gang. None: the whole size (``gang_size``).
    min_available: int | None = None

    @property
    def remaining(self) -> int:
        """How many pods the Job controller runs at once: ``parallelism``, but never more
        than the completions still to go (a Job with parallelism 4 and completions 2 makes
        2 pods; an Indexed Job with 3 of 4 ranks Succeeded retries only the 4th); 0 once
        every completion is done."""
        if self.completions is None:
            return max(0, self.parallelism)
        return max(0, min(self.parallelism, self.completions - self.succeeded))

    @property
    def gang_size(self) -> int:
        """``remaining``, at least 1: the gang of the Job's pods that still run."""
        return max(1, self.remaining)

    @property
    def min_member(self) -> int:
        """The gang's minimum: ``min_available`` (never above ``gang_size``), else the size."""
        size = self.gang_size
        return size if self.min_available is None else max(1, min(self.min_available, size))


@dataclass(frozen=True, slots=True)
class ReplicatedJobInfo:
    """One ``spec.replicatedJobs[]`` entry of a JobSet: *replicas* Jobs of one template."""

    name: str
    replicas: int = 1
    parallelism: int = 1
    completions: int | None = None
    #: ``dependsOn`` names: its Jobs are created only once those have progressed.
    depends_on: tuple[str, ...] = ()

    @property
    def pods_per_job(self) -> int:
        """What each of its Jobs runs at once, before any completes (``JobInfo.remaining``)."""
        return JobInfo("", "", "", self.parallelism, self.completions).remaining


@dataclass(frozen=True, slots=True)
class JobSetInfo:
    """A ``jobset.x-k8s.io`` JobSet's spec, as far as it says how many pods start together."""

    namespace: str
    name: str
    uid: str = ""
    replicated_jobs: tuple[ReplicatedJobInfo, ...] = ()
    #: ``spec.startupPolicy.startupPolicyOrder: InOrder``: each replicated Job's Jobs are
    #: created only once every Job of the one before it is ready.
    in_order: bool = False
    creation_time: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def operator_key(kind: str, namespace: str, name: str) -> str:
    """The key of an operator's object (PyTorchJob, MPIJob, RayCluster) among the objects
    that size gangs: its kind too, as two kinds may share a name in one namespace."""
    return f"{kind}:{namespace}/{name}"
