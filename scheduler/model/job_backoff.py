"""When the Job controller recreates a preempted Job's pods: its pod-failure backoff.

Why it is worth a model: a preempted Job is recreated by its controller, not by us, and the
gap between the eviction and the new pods is the controller's backoff, which ``explain``
should name instead of saying "not found". The rule, read in the pinned controller
(``k8s.io/kubernetes`` v1.36.3, ``pkg/controller/job/backoff_utils.go`` and
``getNewFinishedPods`` in ``job_controller.go``):

- every pod that failed since the Job's last success counts, **including those a
  ``podFailurePolicy`` ``Ignore`` rule keeps out of ``backoffLimit``** (a preemption's
  ``DisruptionTarget``): deliberate upstream since 1.28 (kubernetes#119378, #119434;
  #130881 asks for the opposite and is open). The delay before new pods is 10 s, doubled for
  each failure after the first, at most 10 min, counted from the last failure: a 4-pod Job
  waits 80 s after its first preemption and 10 min after its second;
- with ``backoffLimitPerIndex`` (Indexed Jobs) the Job-wide count is not used: each index
  waits 10 s doubled for each earlier failure *of that index* (ignored ones included, the
  ``batch.kubernetes.io/job-index-ignored-failure-count`` annotation), so after the k-th
  preemption every rank waits 10 s x 2^(k-1): 10 s, then 20 s.

The same rules say what a failure leaves of a Job's ``backoffLimit`` (``retries``) and when
its failed rank comes back (``next_pods_at``), which ``explain`` shows beside each failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.model.failures import Failure, RuleAction
from scheduler.model.workloads import JobInfo, PodInfo, PodPhase

#: ``DefaultJobPodFailureBackOff`` and ``MaxJobPodFailureBackOff`` of the Job controller.
BASE_SECONDS = 10.0
MAX_SECONDS = 600.0
#: What the Job controller writes on each pod of a Job with ``backoffLimitPerIndex``.
INDEX_FAILURES_ANNOTATION = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED_FAILURES_ANNOTATION = "batch.kubernetes.io/job-index-ignored-failure-count"


def recreation_delay(failures: int) -> float:
    """The controller's delay after *failures* counted failures (0: none)."""
    if failures <= 0:
        return 0.0
    return min(MAX_SECONDS, BASE_SECONDS * 2 ** min(failures - 1, 16))


def _count(pod: PodInfo, key: str) -> int:
    value = pod.annotations.get(key, "")
    return int(value) if value.isdigit() else 0


def least_delay(job: JobInfo, failed: Iterable[PodInfo] = (),
                evicted: int = 0) -> tuple[float, str]:
    """The least the controller waits before recreating the pods of *job* that just failed
    (all evicted together), and how that is counted (for a person). *failed*: its failed
    pods still there (with ``backoffLimitPerIndex`` the controller keeps each until its
    replacement exists, so their annotations give each index's count); *evicted*: how many
    of its pods preemptions are known to have evicted in all (Job-wide, each counts)."""
    if job.backoff_limit_per_index is not None:
        counts = [_count(p, INDEX_FAILURES_ANNOTATION)
                  + _count(p, INDEX_IGNORED_FAILURES_ANNOTATION) + 1
                  for p in failed if p.phase is PodPhase.FAILED]
        failures = max(counts, default=1)
        return recreation_delay(failures), (
            f"backoffLimitPerIndex: each rank waits {BASE_SECONDS:.0f} s doubled for each of "
            f"its earlier failures, preemptions included ({failures} counted)")
    failures = max(1, job.remaining, evicted)
    return recreation_delay(failures), (
        f"its pod-failure backoff counts every pod failed since the Job's last success, "
        f"preemptions included ({BASE_SECONDS:.0f} s doubled per failure, at most "
        f"{MAX_SECONDS / 60:.0f} min; {failures} known)")


#: ``spec.backoffLimit`` when not given (with ``backoffLimitPerIndex`` it is MaxInt32, and
#: only the per-index limit counts).
DEFAULT_BACKOFF_LIMIT = 6


def policy_action(job: JobInfo, failure: Failure) -> RuleAction | None:
    """The action of the first ``podFailurePolicy`` rule that matches *failure* (None: no
    rule does, so it counts against the backoff limit as usual)."""
    return next((rule.action for rule in job.failure_rules if rule.matches(failure)), None)


@dataclass(frozen=True, slots=True)
class Retries:
    """What *job*'s backoff limit leaves after a failure: each counted failure uses one
    retry; one failure more than the limit fails the Job (or, per index, the index)."""

    limit: int
    used: int
    per_index: bool
    #: Why no pod comes back for it ("" while one does): the Job or its index failed.
    final: str = ""

    @property
    def left(self) -> int:
        return max(0, self.limit - self.used)

    @property
    def limit_name(self) -> str:
        return "backoffLimitPerIndex" if self.per_index else "backoffLimit"


def retries(job: JobInfo, failure: Failure) -> Retries:
    """The retries *job* has left after *failure* (one of its pods), and whether its pods
    come back at all. Job-wide the controller's own count is used (``status.failed``, which
    leaves out failures a policy ``Ignore``s); per index, the count the controller wrote on
    the failed pod plus this failure unless the policy ignores it."""
    action = policy_action(job, failure)
    final = ""
    if job.failed_reason:
        final = f"the Job failed ({job.failed_reason})"
    elif action is RuleAction.FAIL_JOB:
        final = "its podFailurePolicy fails the Job on this failure (FailJob)"
    if job.backoff_limit_per_index is not None:
        index = failure.index
        used = failure.index_failures + (0 if action is RuleAction.IGNORE else 1)
        if not final and index is not None and index in job.failed_indexes:
            final = f"rank {index} failed for good (status.failedIndexes)"
        elif not final and action is RuleAction.FAIL_INDEX:
            final = f"its podFailurePolicy fails rank {index} on this failure (FailIndex)"
        return Retries(job.backoff_limit_per_index, used, True, final)
    limit = DEFAULT_BACKOFF_LIMIT if job.backoff_limit is None else job.backoff_limit
    if not final and job.failed > limit:
        final = "the Job exceeded its backoffLimit"
    return Retries(limit, job.failed, False, final)


def next_pods_at(job: JobInfo, failure: Failure, last_failure: float) -> float | None:
    """When the controller recreates the pod of *failure* at the earliest (None: it does
    not, or the failure's time is unknown). Per index, its rank waits 10 s doubled per
    earlier failure of the index (ignored ones too) from its own failure; Job-wide, every
    rank waits on the Job's count (``status.failed``, at least this one) from the Job's
    *last_failure*."""
    if retries(job, failure).final or failure.finished_at is None:
        return None
    if job.backoff_limit_per_index is not None:
        count = failure.index_failures + failure.index_ignored_failures + 1
        return failure.finished_at + recreation_delay(count)
    return max(last_failure, failure.finished_at) + recreation_delay(max(1, job.failed))
