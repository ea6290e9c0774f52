"""The Job controller's pod-recreation backoff as ``explain`` reckons it (issue 33: a 4-pod Job
preempted with ``podFailurePolicy`` Ignore was recreated 80 s after its first preemption and
10 min after its second; ``backoffLimitPerIndex`` makes that 10 s, then 20 s)."""

from __future__ import annotations

import pytest

from scheduler.model import PodRequirements, Resources
from scheduler.model.failures import Failure, FailureKind, FailureRule, RuleAction
from scheduler.model.job_backoff import (
    INDEX_FAILURES_ANNOTATION,
    INDEX_IGNORED_FAILURES_ANNOTATION,
    least_delay,
    next_pods_at,
    recreation_delay,
    retries,
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


# What a failure leaves of the Job's backoff limit, and when its rank comes back (issue 39).
def crash(index: int = 0, earlier: int = 0, ignored: int = 0, code: int = 1,
          at: float | None = 100.0, disruption: str = "") -> Failure:
    kind = FailureKind.PREEMPTED if disruption else FailureKind.CRASHED
    return Failure(uid=f"u{index}", pod=f"train-{index}", rank=str(index), kind=kind,
                   exit_code=code, finished_at=at, job="train", index_failures=earlier,
                   index_ignored_failures=ignored, exits=(("trainer", code, False),),
                   disruption=disruption)


IGNORE_PREEMPTION = FailureRule(RuleAction.IGNORE, conditions=frozenset({"DisruptionTarget"}))
FAIL_ON_42 = FailureRule(RuleAction.FAIL_JOB, frozenset({42}), container="trainer")


def wide(failed: int = 1, limit: int | None = None, **more: object) -> JobInfo:
    return JobInfo("ns", "train", "uid", parallelism=2, completions=2, indexed=True,
                   backoff_limit=limit, failed=failed, **more)  # type: ignore[arg-type]


def per_index(limit: int = 2, **more: object) -> JobInfo:
    return JobInfo("ns", "train", "uid", parallelism=2, completions=2, indexed=True,
                   backoff_limit_per_index=limit, **more)  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "job", "failure", "left", "used", "final"), [
    ("Job-wide: the default limit of 6, 1 failed", wide(1), crash(), 5, 1, ""),
    ("Job-wide: its count, not the record's", wide(3, limit=4), crash(), 1, 3, ""),
    ("Job-wide: one failure past the limit fails the Job", wide(3, limit=2), crash(), 0, 3,
     "the Job exceeded its backoffLimit"),
    ("the Job's Failed condition says it gave up", wide(1, failed_reason="DeadlineExceeded"),
     crash(), 5, 1, "the Job failed (DeadlineExceeded)"),
    ("FailJob on exit code 42", wide(1, failure_rules=(FAIL_ON_42,)), crash(code=42), 5, 1,
     "its podFailurePolicy fails the Job on this failure (FailJob)"),
    ("per index: this failure and the earlier ones of its rank", per_index(2),
     crash(earlier=1), 0, 2, ""),
    ("per index: the first failure", per_index(2), crash(), 1, 1, ""),
    ("per index: a preemption the policy ignores uses no retry",
     per_index(1, failure_rules=(IGNORE_PREEMPTION,)),
     crash(disruption="PreemptionByScheduler"), 1, 0, ""),
    ("per index: a preemption without such a rule counts", per_index(1),
     crash(disruption="PreemptionByScheduler"), 0, 1, ""),
    ("per index: a rank in status.failedIndexes", per_index(1, failed_indexes=frozenset({3})),
     crash(3, earlier=1), 0, 2, "rank 3 failed for good (status.failedIndexes)"),
    ("per index: FailIndex", per_index(3, failure_rules=(
        FailureRule(RuleAction.FAIL_INDEX, frozenset({1})),)), crash(), 2, 1,
     "its podFailurePolicy fails rank 0 on this failure (FailIndex)"),
])
def test_the_retries_a_failure_leaves(name: str, job: JobInfo, failure: Failure, left: int,
                                      used: int, final: str) -> None:
    counted = retries(job, failure)
    assert (counted.left, counted.used, counted.final) == (left, used, final), name


@pytest.mark.parametrize(("name", "job", "failure", "last", "at"), [
    ("per index: 10 s after its own first failure", per_index(2), crash(at=100.0), 500.0,
     110.0),
    ("per index: doubled per earlier failure of the rank, ignored ones too", per_index(5),
     crash(earlier=1, ignored=1, at=100.0), 500.0, 140.0),
    ("Job-wide: from the Job's last failure, doubled per failure", wide(3), crash(at=100.0),
     150.0, 190.0),
    ("no time known: no answer", per_index(2), crash(at=None), 0.0, None),
    ("no retry: no pod comes back", wide(3, limit=2), crash(), 100.0, None),
])
def test_when_the_rank_comes_back(name: str, job: JobInfo, failure: Failure, last: float,
                                  at: float | None) -> None:
    assert next_pods_at(job, failure, last) == at, name
