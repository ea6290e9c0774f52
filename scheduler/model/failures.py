"""How a pod of a gang failed, kept after the pod is gone: its rank, exit code and reason.

Why: a Job in a backoff loop has, between two attempts, no pods to look at (and a preempted
member's pod is deleted once it stops). The question its user asks, "why does my job keep
failing?", is answered by the last failed pod's exit reason, so the feed keeps a compact
record of each failure per gang (``scheduler.feed.cache_failures``) and ``explain`` shows it.

The record is pure data read from the pod's status at the apiserver edge
(``scheduler.kube.read.pod_failure``); which *kind* of failure it was is decided here, once
(``classify``): a pod this scheduler preempted or a drain evicted did not crash, and must not
be shown as if the user's code had.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from scheduler.model.numerals import is_digits


class FailureKind(StrEnum):
    """What ended the pod, as a person would say it (the word ``explain`` shows)."""

    OOM_KILLED = "OOMKilled"
    CRASHED = "exited"  # a container ended with a non-zero exit code
    DEADLINE = "deadline exceeded"  # activeDeadlineSeconds of the pod or its Job
    EVICTED = "evicted"  # node pressure (kubelet), a drain (the Eviction API)
    PREEMPTED = "preempted"  # taken away by a scheduler: not a failure of the user's code
    NODE_LOST = "node lost"  # its node went away (taint manager, pod garbage collector)
    UNKNOWN = "failed"  # the status says no more than "Failed"


#: ``DisruptionTarget`` reasons: who took the pod away (``PodInfo.disruption``).
PREEMPTION_REASONS = frozenset({"PreemptionByScheduler", "GangRolledBack"})
EVICTION_REASONS = frozenset({"EvictionByEvictionAPI", "TerminationByKubelet"})
NODE_LOST_REASONS = frozenset({"DeletionByTaintManager", "DeletionByPodGC"})
#: The Job condition a ``podFailurePolicy`` ``onPodConditions`` rule usually names.
DISRUPTION_TARGET = "DisruptionTarget"


def classify(pod_reason: str, disruption: str, container_reason: str,
             exit_code: int | None) -> FailureKind:
    """The kind of a failure, from the pod's ``status.reason``, its ``DisruptionTarget``
    reason, and its failed container's terminated reason and exit code.

    A disruption comes first: a preempted pod's container ends with 137 or 143 ("Error"),
    which says nothing about the user's code."""
    if disruption in PREEMPTION_REASONS:
        return FailureKind.PREEMPTED
    if disruption in NODE_LOST_REASONS:
        return FailureKind.NODE_LOST
    if disruption in EVICTION_REASONS or pod_reason == "Evicted":
        return FailureKind.EVICTED
    if pod_reason == "DeadlineExceeded":
        return FailureKind.DEADLINE
    if container_reason == "OOMKilled":
        return FailureKind.OOM_KILLED
    if exit_code:
        return FailureKind.CRASHED
    return FailureKind.UNKNOWN


#: Kinds that are not the user's code failing (``Failure.disrupted``).
DISRUPTIONS = frozenset({FailureKind.PREEMPTED, FailureKind.EVICTED, FailureKind.NODE_LOST})


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed pod of a gang, reduced to what explains it."""

    uid: str
    pod: str  # its name
    #: Its rank: the completion index (or a trainer's rank label), else the pod's name.
    rank: str
    kind: FailureKind
    #: The most specific word the status gives: the container's terminated reason
    #: (``OOMKilled``, ``Error``), the pod's (``Evicted``, ``DeadlineExceeded``) or the
    #: ``DisruptionTarget`` reason (``PreemptionByScheduler``); "" when none was given.
    reason: str = ""
    exit_code: int | None = None
    container: str = ""  # "" when no container status says it ended
    init_container: bool = False
    #: When it ended (the container's ``finishedAt``, else the pod's last condition change).
    finished_at: float | None = None
    message: str = ""  # the container's or the pod's message, shortened
    #: The Job that owns the pod ("" if none): its ``backoffLimit`` decides what comes next.
    job: str = ""
    #: The Job controller's per-index counts written on the pod (``backoffLimitPerIndex``):
    #: earlier failures of its index, counted against the limit and ignored by its policy.
    index_failures: int = 0
    index_ignored_failures: int = 0
    #: Every container that ended with a non-zero code: (name, code, is an init container),
    #: what a ``podFailurePolicy`` ``onExitCodes`` rule matches.
    exits: tuple[tuple[str, int, bool], ...] = ()
    #: Its ``DisruptionTarget=True`` reason ("" without one).
    disruption: str = ""

    @property
    def disrupted(self) -> bool:
        """Taken away (preempted, evicted, its node lost) rather than failed by its code."""
        return self.kind in DISRUPTIONS

    @property
    def index(self) -> int | None:
        """The rank as a completion index (None when the rank is a pod name)."""
        return int(self.rank) if is_digits(self.rank) else None


class RuleAction(StrEnum):
    """``podFailurePolicy`` rule actions (``batch/v1``)."""

    IGNORE = "Ignore"
    FAIL_JOB = "FailJob"
    FAIL_INDEX = "FailIndex"
    COUNT = "Count"


@dataclass(frozen=True, slots=True)
class FailureRule:
    """One ``podFailurePolicy`` rule: on these exit codes (``In`` or ``NotIn``, optionally of
    one container) or these pod conditions, this action. The Job controller applies the first
    rule that matches (``scheduler.model.job_backoff.policy_action``)."""

    action: RuleAction
    exit_codes: frozenset[int] = frozenset()
    not_in: bool = False  # operator NotIn
    container: str = ""  # "" for any container
    conditions: frozenset[str] = frozenset()  # pod condition types with status True

    def matches(self, failure: Failure) -> bool:
        if self.conditions:
            return bool(failure.disruption) and DISRUPTION_TARGET in self.conditions
        for name, code, _init in failure.exits:
            if self.container and name != self.container:
                continue
            if (code in self.exit_codes) != self.not_in:
                return True
        return False
