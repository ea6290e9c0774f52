"""`explain NAMESPACE/JOB` maps a Job, JobSet or TrainJob to its gangs, and a gang with no pods
right now (preempted, its controller yet to recreate them) says so (issue 33: "not found")."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from scheduler.cli import explain_workload as ew
from scheduler.cli.explain import resolve
from scheduler.feed.cache import ClusterCache
from scheduler.feed.grouping_jobset import JOBSET_NAME_LABEL
from scheduler.kube.client import Response
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


def test_a_job_of_a_jobset_maps_to_the_jobsets_gang_not_its_podgroup() -> None:
    """Inside a JobSet the Job controller's PodGroup is no gang (the JobSet's is)."""
    label = {JOBSET_NAME_LABEL: "pair"}
    job = JobInfo("ns", "train", "job-uid", labels=label)
    cache = cache_with(job, (rank(0, group="train-pg-1a2b", labels=label),), native=True)
    workload = ew.find("ns/train", cache)
    assert workload is not None and workload.gangs == ("ns/pair",)


def test_a_preempted_job_waiting_for_its_controller_says_when() -> None:
    workload = ew.find("ns/train", cache_with(native=True))
    assert workload is not None
    note = "preempted by ns/urgent (priority 100): lower priority (4 pod(s) evicted; ...)"
    text = ew.gap_text(workload, "ns/train-pg-1a2b", ew.Preemptions(NOW - 30, note, 4), NOW)
    assert "no pods right now" in text
    assert f"{note} (at " in text
    assert "waiting for the Job controller to recreate its pods" in text
    assert "at least 80s after the eviction" in text and "(in 50s)" in text
    # Preempted a second time: 8 pods failed since the Job's last success, the 10 min cap.
    again = ew.gap_text(workload, "ns/train-pg-1a2b", ew.Preemptions(NOW, note, 8), NOW)
    assert "at least 600s after the eviction" in again, again


class Events:
    """The events list as the apiserver answers it (core v1, the evictor's notes)."""

    def __init__(self, items: list[dict[str, object]], status: int = 200) -> None:
        self.items, self.status = items, status

    def request(self, method: str, path: str, **kw: object) -> Response:
        assert (method, path) == ("GET", "/api/v1/namespaces/ns/events"), path
        return Response(self.status, json.dumps({"items": self.items}).encode())


def event(job: str, at: str, evicted: int, **more: object) -> dict[str, object]:
    return {"involvedObject": {"kind": "Job", "name": job}, "reason": "Preempted",
            "eventTime": at, "message": f"preempted by ns/x ({evicted} pod(s) evicted; ...)",
            **more}


def test_the_preemptions_are_read_from_the_events_on_the_job() -> None:
    workload = ew.find("ns/train", cache_with(native=True))
    assert workload is not None
    client = Events([event("train", "2026-12-04T15:00:00.000000Z", 4),
                     event("train", "2026-12-04T15:05:00.000000Z", 4,
                           series={"count": 2, "lastObservedTime": "2026-12-04T15:09:00Z"}),
                     event("other", "2026-12-04T15:20:00.000000Z", 4)])
    found = ew.last_preemption(client, workload)  # type: ignore[arg-type]
    assert found is not None and found.evicted == 12
    assert found.at == datetime(2026, 12, 4, 15, 9, tzinfo=UTC).timestamp()
    assert ew.last_preemption(Events([], 403), workload) is None  # type: ignore[arg-type]
    assert ew.last_preemption(Events([event("other", "2026-12-04T15:20:00Z", 4)]),  # type: ignore[arg-type]
                              workload) is None


def test_per_index_backoff_counts_the_ranks_own_failures() -> None:
    """With backoffLimitPerIndex the evicted pods stay (Failed) until replaced: a second
    preemption (one ignored failure before) waits 20 s."""
    job = replace(JOB, backoff_limit_per_index=2)
    failed = tuple(rank(i, phase=PodPhase.FAILED,
                        annotations={INDEX_IGNORED_FAILURES_ANNOTATION: "1"})
                   for i in range(4))
    workload = ew.find("ns/train", cache_with(job, failed))
    assert workload is not None and len(workload.failed) == 4
    text = ew.gap_text(workload, "ns/train", ew.Preemptions(NOW, "preempted by ns/urgent"), NOW)
    assert "backoffLimitPerIndex" in text and "at least 20s" in text


def test_without_a_preemption_event_it_still_says_what_it_waits_for() -> None:
    workload = ew.find("ns/train", cache_with())
    assert workload is not None
    text = ew.gap_text(workload, "ns/train", None, NOW)
    assert "its pods are gone" in text and "waiting for the Job controller" in text
    done = ew.find("ns/train", cache_with(replace(JOB, succeeded=4)))
    assert done is not None
    assert "its completions are all done" in ew.gap_text(done, "ns/train", None, NOW)
