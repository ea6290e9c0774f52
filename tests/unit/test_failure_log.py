"""A gang's last failures are kept after its pods are gone, within bounds, and forgotten
with their owner (issue 39)."""

from __future__ import annotations

from scheduler.feed.cache import ClusterCache
from scheduler.feed.cache_failures import FailureLog
from scheduler.model import PodRequirements, Resources
from scheduler.model.failures import Failure, FailureKind
from scheduler.model.workloads import (
    POD_GROUP_LABEL,
    JobInfo,
    OwnerRef,
    PodGroupInfo,
    PodInfo,
    PodPhase,
)


def failure(uid: str, at: float | None, rank: str = "0", job: str = "train") -> Failure:
    return Failure(uid=uid, pod=f"p-{uid}", rank=rank, kind=FailureKind.CRASHED,
                   reason="Error", exit_code=1, finished_at=at, job=job)


def test_newest_first_one_per_pod_and_a_later_status_replaces_it() -> None:
    log = FailureLog()
    log.record("ns/g", failure("a", 10.0))
    log.record("ns/g", failure("b", 30.0))
    log.record("ns/g", failure("c", None))
    log.record("ns/g", failure("a", 20.0))  # the same pod, updated
    assert [(f.uid, f.finished_at) for f in log.of("ns/g")] == [
        ("b", 30.0), ("a", 20.0), ("c", None)]
    assert log.of("ns/other") == ()


def test_bounded_per_gang_and_in_gangs() -> None:
    log = FailureLog(per_gang=3, gangs=2)
    for i in range(10):
        log.record("ns/g", failure(str(i), float(i)))
    assert [f.uid for f in log.of("ns/g")] == ["9", "8", "7"]
    log.record("ns/h", failure("h", 1.0))
    log.record("ns/g", failure("10", 10.0))  # g failed most recently: h is older
    log.record("ns/k", failure("k", 1.0))
    assert log.gang_ids() == ("ns/g", "ns/k")


def test_forgotten_with_their_owner() -> None:
    log = FailureLog()
    log.record("ns/g", failure("a", 1.0, job="train"))
    log.record("ns/g", failure("b", 2.0, job="other"))
    log.record("other/g", failure("c", 3.0, job="train"))
    log.record("ns/lone", failure("d", 4.0, job=""))
    log.forget_job("ns/train")
    assert [f.uid for f in log.of("ns/g")] == ["b"] and log.of("other/g")
    log.forget_unowned("ns/g")  # a Job's failures outlive its PodGroup
    assert [f.uid for f in log.of("ns/g")] == ["b"]
    log.forget_unowned("ns/lone")
    log.forget_job("ns/other")
    assert log.gang_ids() == ("other/g",)


def pod(uid: str, phase: PodPhase, owner: OwnerRef | None = None,
        labels: dict[str, str] | None = None, fail: Failure | None = None) -> PodInfo:
    return PodInfo(uid=uid, namespace="ns", name=f"p-{uid}",
                   requirements=PodRequirements(Resources.of(gpu=1)),
                   scheduler_name="gang-scheduler", phase=phase, owner=owner,
                   labels=labels or {}, failure=fail)


def test_the_cache_keeps_a_job_s_failures_until_the_job_is_deleted() -> None:
    cache = ClusterCache()
    cache.upsert_job(JobInfo("ns", "train", "j", parallelism=2, completions=2))
    owner = OwnerRef("Job", "train", "j")
    cache.upsert_pod(pod("a", PodPhase.RUNNING, owner))
    assert cache.failures("ns/train") == ()
    cache.upsert_pod(pod("a", PodPhase.FAILED, owner, fail=failure("a", 5.0)))
    cache.delete_pod("a")  # the controller (or the pod GC) removed it: the record stays
    assert [f.uid for f in cache.failures("ns/train")] == ["a"]
    cache.delete_job("ns/train")
    assert cache.failures("ns/train") == ()


def test_the_cache_forgets_a_lone_pod_s_failure_with_the_pod_and_a_group_s_with_it() -> None:
    cache = ClusterCache()
    cache.upsert_pod(pod("a", PodPhase.FAILED, fail=failure("a", 5.0, rank="p-a", job="")))
    assert cache.failures("ns/p-a")
    cache.delete_pod("a")
    assert cache.failures("ns/p-a") == ()
    cache.upsert_group(PodGroupInfo("ns", "g", min_member=1))
    cache.upsert_pod(pod("b", PodPhase.FAILED, labels={POD_GROUP_LABEL: "g"},
                         fail=failure("b", 5.0, job="")))
    cache.delete_pod("b")
    assert cache.failures("ns/g")  # its PodGroup is still there
    cache.delete_group("ns/g")
    assert cache.failures("ns/g") == ()


def test_other_schedulers_pods_are_not_recorded() -> None:
    cache = ClusterCache()
    other = PodInfo(uid="x", namespace="ns", name="x", requirements=PodRequirements(Resources()),
                    phase=PodPhase.FAILED, failure=failure("x", 1.0, job=""))
    cache.upsert_pod(other)
    assert cache.failures("ns/x") == ()
