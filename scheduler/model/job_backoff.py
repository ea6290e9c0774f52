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
"""

from __future__ import annotations

from collections.abc import Iterable

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
