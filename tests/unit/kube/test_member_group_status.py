"""The Job controller's ``scheduling.k8s.io`` PodGroups inside a JobSet get their status.

On 1.36 (``WorkloadWithJob``) every Indexed Job of a JobSet gets its own PodGroup, which its
pods name, while the gang is the JobSet's: the plan speaks of the JobSet's gang only, so the
status sync, which follows the pods, writes each Job's group ``PodGroupScheduled=True`` once
all its pods are bound (issue 33 item 7), and nothing while any waits.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.kube.write.group_sync import GroupStatusSync
from scheduler.model import PodRequirements, Resources
from scheduler.model.native import GroupPolicy, NativeGroupInfo
from scheduler.model.workloads import (
    JobSetInfo,
    OwnerRef,
    PodInfo,
    PodPhase,
    ReplicatedJobInfo,
)
from tests.unit.kube.fakes import RecordingApi, recording_actuator

JOBSET = JobSetInfo("ns", "pair", "js-uid", (ReplicatedJobInfo("leader"),
                                             ReplicatedJobInfo("workers", 1, 2, 2)))


def pod(job: str, i: int, node: str = "") -> PodInfo:
    rjob = job.split("-")[1]
    return PodInfo(uid=f"u-{job}-{i}", namespace="ns", name=f"{job}-{i}",
                   requirements=PodRequirements(Resources.of(gpu=1)),
                   scheduler_name="gang-scheduler", node_name=node,
                   phase=PodPhase.RUNNING if node else PodPhase.PENDING,
                   labels={"jobset.sigs.k8s.io/jobset-name": "pair",
                           "jobset.sigs.k8s.io/replicatedjob-name": rjob},
                   owner=OwnerRef("Job", job, f"uid-{job}"), pod_group_name=f"{job}-pg")


def group(job: str, **changes: Any) -> NativeGroupInfo:
    return dataclasses.replace(NativeGroupInfo(
        "ns", f"{job}-pg", GroupPolicy(min_count=1), uid=f"uid-{job}-pg",
        owner_kind="Job", owner_name=job), **changes)


@pytest.fixture
def fixture() -> Iterator[tuple[RecordingApi, Any, Any]]:
    yield from recording_actuator([])


def scheduled(api: RecordingApi) -> list[str]:
    """The PodGroups whose scheduling condition was written True."""
    return sorted(path.split("/")[-2] for path, body in api.patches
                  if "/apis/scheduling.k8s.io/" in path
                  and body["status"]["conditions"][0]["status"] == "True")


@pytest.mark.parametrize(("bound", "said"), [
    ({"pair-leader-0": 1, "pair-workers-0": 2}, ["pair-leader-0-pg", "pair-workers-0-pg"]),
    ({"pair-leader-0": 1, "pair-workers-0": 1}, ["pair-leader-0-pg"]),  # a worker waits
])
def test_a_jobs_podgroup_says_scheduled_once_all_its_pods_are_bound_with_the_jobset(
        fixture: tuple[RecordingApi, Any, Any], bound: dict[str, int], said: list[str]) -> None:
    api, cache, actuator = fixture
    cache.upsert_jobset(JOBSET)
    sizes = {"pair-leader-0": 1, "pair-workers-0": 2}
    for job, size in sizes.items():
        cache.upsert_native_group(group(job))
        for i in range(size):
            cache.upsert_pod(pod(job, i, "n0" if i < bound[job] else ""))
    sync = GroupStatusSync(cache, actuator.statuses, actuator.writer, actuator.native_statuses)
    sync.sync(cache.cycle_input(time.time()).snapshot.running)
    assert actuator.writer.flush()
    assert scheduled(api) == said


def test_a_group_already_scheduled_is_not_written_again(
        fixture: tuple[RecordingApi, Any, Any]) -> None:
    api, cache, actuator = fixture
    cache.upsert_jobset(JOBSET)
    cache.upsert_native_group(group("pair-leader-0", scheduled=True))
    cache.upsert_pod(pod("pair-leader-0", 0, "n0"))
    GroupStatusSync(cache, actuator.statuses, actuator.writer, actuator.native_statuses).sync(
        cache.cycle_input(time.time()).snapshot.running)
    assert actuator.writer.flush()
    assert scheduled(api) == []
