"""``explain``'s "last failures" section: each rank's exit reason, when, and what its Job's
backoff leaves (issue 39: a Job failing in a backoff loop is explained with its ranks' exit
reasons, also while it has no pods at all)."""

from __future__ import annotations

import pytest

from policies.queues import PolicySet, QueueSet
from scheduler.cli.explain import FAILED_STATE, explain_text, failures_of
from scheduler.feed.cache import ClusterCache
from scheduler.model import PodRequirements, Resources
from scheduler.model.failures import Failure, FailureKind
from scheduler.model.workloads import JobInfo, OwnerRef, PodInfo, PodPhase
from scheduler.views.failures import failures_text, what_happened

NOW = 1000.0


def failure(rank: str = "0", kind: FailureKind = FailureKind.CRASHED, code: int | None = 1,
            reason: str = "Error", at: float | None = NOW - 25, container: str = "trainer",
            **more: object) -> Failure:
    return Failure(uid=f"u{rank}-{at}", pod=f"train-{rank}-abcde", rank=rank, kind=kind,
                   reason=reason, exit_code=code, container=container, finished_at=at,
                   job="train", **more)  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "record", "text"), [
    ("exit 1", failure(), "exit code 1 (Error) in container trainer"),
    ("OOMKilled", failure(kind=FailureKind.OOM_KILLED, code=137, reason="OOMKilled"),
     "OOMKilled (exit code 137) in container trainer"),
    ("an init container", failure(code=3, container="fetch", init_container=True),
     "exit code 3 (Error) in init container fetch"),
    ("evicted by the kubelet", failure(kind=FailureKind.EVICTED, code=None, reason="Evicted",
                                       container=""),
     "evicted (Evicted): not a failure of its code"),
    ("preempted, not a crash", failure(kind=FailureKind.PREEMPTED, code=137,
                                       reason="PreemptionByScheduler"),
     "preempted (PreemptionByScheduler): not a failure of its code"),
    ("deadline", failure(kind=FailureKind.DEADLINE, code=None, reason="DeadlineExceeded",
                         container=""), "deadline exceeded (DeadlineExceeded)"),
    ("nothing known", failure(kind=FailureKind.UNKNOWN, code=None, reason="", container=""),
     "failed; its status gives no exit code or reason"),
])
def test_what_happened(name: str, record: Failure, text: str) -> None:
    assert what_happened(record) == text, name


def per_index(**more: object) -> JobInfo:
    return JobInfo("ns", "train", "j", parallelism=2, completions=2, indexed=True,
                   backoff_limit_per_index=2, **more)  # type: ignore[arg-type]


def test_per_index_each_rank_says_its_retries_and_when_it_comes_back() -> None:
    records = [failure("1", kind=FailureKind.OOM_KILLED, code=137, reason="OOMKilled",
                       at=NOW - 5, index_failures=1),
               failure("0", at=NOW - 25), failure("0", at=NOW - 90)]
    text = failures_text(records, {"train": per_index()}.get, NOW)
    assert text.splitlines() == [
        "", "",
        "last failures (newest per rank; 1 earlier kept):",
        "  rank 0: exit code 1 (Error) in container trainer, 25s ago (pod train-0-abcde)",
        "    retry 1 of backoffLimitPerIndex 2 comes next (1 more after it)",
        "    its backoff is over: the Job controller makes its pod again now",
        "  rank 1: OOMKilled (exit code 137) in container trainer, 5s ago (pod train-1-abcde)",
        "    retry 2 of backoffLimitPerIndex 2 comes next (the last: one more failure fails "
        "rank 1)",
        "    the Job controller makes its pod again in ~15s (not before 1970-01-01T00:16:55Z)",
    ]


def test_job_wide_the_retries_are_the_job_s() -> None:
    job = JobInfo("ns", "train", "j", parallelism=2, completions=2, backoff_limit=4, failed=2)
    text = failures_text([failure("0", at=NOW - 5), failure("1", at=NOW - 8)],
                         {"train": job}.get, NOW)
    assert "  Job ns/train: retry 2 of backoffLimit 4 comes next (2 more after it)" in text
    assert "    the Job controller makes its pods again in ~15s" in text
    assert "retry" not in text.split("Job ns/train")[0]


def test_a_job_that_gave_up_says_so_and_no_pod_comes_back() -> None:
    job = per_index(failed_indexes=frozenset({0}))
    text = failures_text([failure("0", index_failures=2)], {"train": job}.get, NOW)
    assert "no retry: rank 0 failed for good (status.failedIndexes)" in text
    assert "makes its pod again" not in text


def no_job(_name: str) -> JobInfo | None:
    return None


def test_without_a_job_or_a_time_it_still_says_what_it_knows() -> None:
    text = failures_text([Failure("u", "lone", "lone", FailureKind.UNKNOWN)], no_job, NOW)
    assert text.splitlines()[-1] == ("  pod: failed; its status gives no exit code or reason, "
                                     "at an unknown time (pod lone)")
    assert failures_text([], no_job, NOW) == ""


class Fixed:
    def current(self) -> PolicySet:
        return PolicySet(QueueSet.of([]))


def test_a_job_with_no_pods_but_failed_ones_is_explained_not_not_found() -> None:
    cache = ClusterCache()
    cache.upsert_job(per_index())
    for rank in ("0", "1"):
        cache.upsert_pod(PodInfo(
            uid=f"u{rank}", namespace="ns", name=f"train-{rank}-abcde",
            requirements=PodRequirements(Resources.of(gpu=1)), scheduler_name="gang-scheduler",
            phase=PodPhase.FAILED, owner=OwnerRef("Job", "train", "j"),
            failure=failure(rank, at=NOW - 3)))
    text, found = explain_text("ns/train", cache, Fixed(), NOW)
    assert found and FAILED_STATE in text, text
    section = failures_of("ns/train", cache, NOW)
    assert "rank 0: exit code 1 (Error)" in section and "rank 1: exit code 1" in section
    assert section.count("retry 1 of backoffLimitPerIndex 2 comes next (1 more after it)") == 2
