"""The Job controller's pod-recreation backoff as ``explain`` reckons it (issue 33: a 4-pod Job
preempted with ``podFailurePolicy`` Ignore was recreated 80 s after its first preemption and
10 min after its second; ``backoffLimitPerIndex`` makes that 10 s, then 20 s)."""

from __future__ import annotations

import pytest

from scheduler.model import PodRequirements, Resources
from scheduler.model.job_backoff import (
    INDEX_FAILURES_ANNOTATION,
    INDEX_IGNORED_FAILURES_ANNOTATION,
    least_delay,
    recreation_delay,
)
from scheduler.model.workloads import JobInfo, PodInfo, PodPhase


@pytest.mark.parametrize(("failures", "seconds"), [
    (0, 0.0), (1, 10.0), (2, 20.0), (4, 80.0), (6, 320.0), (7, 600.0), (8, 600.0),
    (10_000, 600.0)])
def test_ten_seconds_doubled_per_failure_at_most_ten_minutes(failures: int,
                                                             seconds: float) -> None:
    assert recreation_delay(failures) == seconds


def job(per_index: int | None = None) -> JobInfo:
    return JobInfo("ns", "train", "uid", parallelism=4, completions=4, indexed=True,
                   backoff_limit_per_index=per_index)


def failed(index: int, counted: int = 0, ignored: int = 0) -> PodInfo:
    annotations = {INDEX_FAILURES_ANNOTATION: str(counted)}
    if ignored:
        annotations[INDEX_IGNORED_FAILURES_ANNOTATION] = str(ignored)
    return PodInfo(f"u{index}", "ns", f"train-{index}", PodRequirements(Resources()),
                   phase=PodPhase.FAILED, annotations=annotations)


@pytest.mark.parametrize(("name", "job", "failed", "seconds"), [
    ("a 4-pod Job's first preemption: 4 failures Job-wide", job(), [], 80.0),
    ("per index, the first preemption of each rank", job(2), [failed(i) for i in range(4)],
     10.0),
    ("per index, the second preemption (one ignored failure on each rank before)", job(2),
     [failed(i, ignored=1) for i in range(4)], 20.0),
    ("per index, the rank with most failures decides when the gang can run", job(2),
     [failed(0, counted=1, ignored=2), failed(1)], 80.0),
    ("per index, failed pods already gone: at least the first delay", job(2), [], 10.0),
])
def test_the_least_delay_before_the_pods_come_back(name: str, job: JobInfo,
                                                   failed: list[PodInfo],
                                                   seconds: float) -> None:
    delay, how = least_delay(job, failed)
    assert delay == seconds, name
    assert ("backoffLimitPerIndex" in how) is (job.backoff_limit_per_index is not None)
