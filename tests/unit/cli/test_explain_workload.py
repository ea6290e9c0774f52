"""`explain NAMESPACE/JOB` maps a Job, JobSet or TrainJob to its gangs, and a gang with no pods
right now (preempted, its controller yet to recreate them) says so (issue 33: "not found")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.cache import ClusterCache
from scheduler.cli import explain_workload as ew
from scheduler.cli.explain import resolve
from scheduler.grouping_jobset import JOBSET_NAME_LABEL
from scheduler.model import PodRequirements, Resources
from scheduler.model.job_backoff import INDEX_IGNORED_FAILURES_ANNOTATION
from scheduler.model.native import GroupPolicy, NativeGroupInfo
from scheduler.model.workloads import JobInfo, OwnerRef, PodInfo, PodPhase

NOW = 1_800_000_000.0
JOB = JobInfo("ns", "train", "job-uid", parallelism=4, completions=4, indexed=True)


def rank(i: int, *, group: str = "", phase: PodPhase = PodPhase.RUNNING,
         labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None) -> PodInfo:
    return PodInfo(f"u{i}{phase}", "ns", f"train-{i}-{phase.lower()}",
                   PodRequirements(Resources.of(gpu=1)), scheduler_name="gang-scheduler",
                   node_name="n0" if phase is not PodPhase.PENDING else "", phase=phase,
                   owner=OwnerRef("Job", "train", "job-uid"), pod_group_name=group,
                   labels=labels or {}, annotations=annotations or {})


def cache_with(job: JobInfo = JOB, pods: tuple[PodInfo, ...] = (),
               native: bool = False) -> ClusterCache:
    cache = ClusterCache()
    cache.upsert_job(job)
    if native:  # 1.36, WorkloadWithJob: the Job controller's PodGroup names the gang
        cache.upsert_native_group(NativeGroupInfo(
            "ns", "train-pg-1a2b", GroupPolicy(min_count=4), uid="pg-uid",
            owner_kind="Job", owner_name="train"))
    for p in pods:
        cache.upsert_pod(p)
    return cache


@pytest.mark.parametrize(("name", "cache", "gangs"), [
    ("an Indexed Job on 1.36 runs as its controller's PodGroup",
     cache_with(pods=tuple(rank(i, group="train-pg-1a2b") for i in range(4)), native=True),
     ("ns/train-pg-1a2b",)),
    ("the same with no pods right now (preempted)", cache_with(native=True),
     ("ns/train-pg-1a2b",)),
    ("a Job without a PodGroup is its own gang", cache_with(pods=(rank(0),)), ("ns/train",)),
    ("a Job with no pods and no PodGroup", cache_with(), ("ns/train",)),
])
def test_a_job_maps_to_its_gangs(name: str, cache: ClusterCache,
                                 gangs: tuple[str, ...]) -> None:
    workload = ew.find("ns/train", cache)
    assert workload is not None and workload.kind == "Job", name
    assert workload.gangs == gangs, name
    assert workload.via == f"Job ns/train runs as gang {gangs[0]}"


def test_resolve_alone_does_not_know_the_job_on_1_36() -> None:
    """What issue 33 saw: the name is no gang and no pod, so ``explain`` said "not found"."""
    cache = cache_with(pods=tuple(rank(i, group="train-pg-1a2b") for i in range(4)),
                       native=True)
    assert resolve("ns/train", cache, NOW) == ("ns/train", None)


def test_a_jobset_and_a_trainjob_map_through_the_jobset_label() -> None:
    label = {JOBSET_NAME_LABEL: "pair"}
    cache = ClusterCache()
    cache.upsert_job(JobInfo("ns", "pair-workers-0", "j0", labels=label))
    cache.upsert_pod(replace(rank(0, labels=label),
                             owner=OwnerRef("Job", "pair-workers-0", "j0")))
    assert ew.find("ns/pair", cache) is None  # the JobSet itself is not seen
    trainjob = ew.find("ns/pair", cache, trainjob=True)
    assert trainjob is not None and trainjob.kind == "TrainJob"
    assert trainjob.gangs == ("ns/pair",) and [j.name for j in trainjob.jobs] == [
        "pair-workers-0"]
    assert ew.find("ns/other", cache) is None


def test_a_preempted_job_waiting_for_its_controller_says_when() -> None:
    workload = ew.find("ns/train", cache_with(native=True))
    assert workload is not None
    text = ew.gap_text(workload, "ns/train-pg-1a2b",
                       (NOW - 30, "preempted by gang ns/urgent: priority 100 > 0"), NOW)
    assert "no pods right now" in text
    assert "preempted at " in text and "preempted by gang ns/urgent" in text
    assert "waiting for the Job controller to recreate its pods" in text
    assert "at least 80s after the eviction" in text and "(in 50s)" in text


def test_per_index_backoff_counts_the_ranks_own_failures() -> None:
    """With backoffLimitPerIndex the evicted pods stay (Failed) until replaced: a second
    preemption (one ignored failure before) waits 20 s."""
    job = replace(JOB, backoff_limit_per_index=2)
    failed = tuple(rank(i, phase=PodPhase.FAILED,
                        annotations={INDEX_IGNORED_FAILURES_ANNOTATION: "1"})
                   for i in range(4))
    workload = ew.find("ns/train", cache_with(job, failed))
    assert workload is not None and len(workload.failed) == 4
    text = ew.gap_text(workload, "ns/train", (NOW, "preempted by gang ns/urgent"), NOW)
    assert "backoffLimitPerIndex" in text and "at least 20s" in text


def test_without_a_preemption_event_it_still_says_what_it_waits_for() -> None:
    workload = ew.find("ns/train", cache_with())
    assert workload is not None
    text = ew.gap_text(workload, "ns/train", None, NOW)
    assert "its pods are gone" in text and "waiting for the Job controller" in text
    done = ew.find("ns/train", cache_with(replace(JOB, succeeded=4)))
    assert done is not None
    assert "its completions are all done" in ew.gap_text(done, "ns/train", None, NOW)
