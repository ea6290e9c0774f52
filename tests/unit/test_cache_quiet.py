"""The cache changes (its generation moves, the live loop is woken) only when something the
scheduler reads changed: an informer event for a write that changed nothing it reads (the
scheduler's own condition or status on a pod or PodGroup, a node heartbeat, a relist), and
a cycle that bound nothing, leave it as it was; every real change still moves it, once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from scheduler.feed.cache import ClusterCache
from scheduler.model import Node, PodRef, PodRequirements, Resources
from scheduler.model.native import GroupPolicy, NativeGroupInfo, WorkloadInfo
from scheduler.model.workloads import JobInfo, PodGroupInfo, PodInfo

NODE = Node.build("n1", Resources.of(gpu=8, cpu=64000, pods=110))
POD = PodInfo(uid="u-a", namespace="ns", name="a", scheduler_name="gang-scheduler",
              requirements=PodRequirements(requests=Resources.of(gpu=4)), resource_version="1")
GROUP = PodGroupInfo(namespace="ns", name="pg", uid="u-pg", min_member=2, resource_version="1")
JOB = JobInfo(namespace="ns", name="job", uid="u-job", parallelism=2)
NATIVE = NativeGroupInfo(namespace="ns", name="npg", policy=GroupPolicy(2), uid="u-npg",
                         resource_version="1")
WORKLOAD = WorkloadInfo(namespace="ns", name="wl", uid="u-wl")
REF = PodRef("ns", "a", "u-a")


def filled() -> ClusterCache:
    cache = ClusterCache()
    cache.upsert_node(NODE)
    cache.upsert_pod(POD)
    cache.upsert_group(GROUP)
    cache.upsert_job(JOB)
    cache.upsert_native_group(NATIVE)
    cache.upsert_workload(WORKLOAD)
    cache.cycle_input(0.0)
    return cache


@dataclass(frozen=True)
class Update:
    name: str
    apply: Callable[[ClusterCache], None]
    changes: bool


UPDATES = [
    Update("a pod rewritten with a new resourceVersion only (a condition written)",
           lambda c: c.upsert_pod(dataclasses.replace(POD, resource_version="2")), False),
    Update("a node reported again unchanged (a heartbeat)",
           lambda c: c.upsert_node(dataclasses.replace(NODE)), False),
    Update("a PodGroup with a new resourceVersion only (its status written)",
           lambda c: c.upsert_group(dataclasses.replace(GROUP, resource_version="7")), False),
    Update("a Job reported again unchanged", lambda c: c.upsert_job(JOB), False),
    Update("a native PodGroup with a new resourceVersion only",
           lambda c: c.upsert_native_group(dataclasses.replace(NATIVE, resource_version="9")),
           False),
    Update("a Workload reported again unchanged", lambda c: c.upsert_workload(WORKLOAD), False),
    Update("a cycle that bound nothing", lambda c: c.assume([], 1.0, binding=True), False),
    Update("nothing to forget", lambda c: c.forget([PodRef("ns", "x", "u-x")]), False),
    Update("a pod's labels changed",
           lambda c: c.upsert_pod(dataclasses.replace(POD, labels={"k": "v"})), True),
    Update("a node's allocatable changed",
           lambda c: c.upsert_node(dataclasses.replace(NODE, allocatable=Resources.of(gpu=4))),
           True),
    Update("a PodGroup's minMember changed",
           lambda c: c.upsert_group(dataclasses.replace(GROUP, min_member=3)), True),
    Update("a Job's parallelism changed",
           lambda c: c.upsert_job(dataclasses.replace(JOB, parallelism=3)), True),
    Update("a pending pod assumed bound", lambda c: c.assume([(REF, "n1")], 1.0), True),
]


@pytest.mark.parametrize("update", UPDATES, ids=lambda u: u.name)
def test_the_cache_changes_only_when_what_the_scheduler_reads_does(update: Update) -> None:
    cache = filled()
    woken: list[int] = []
    cache.on_change = lambda: woken.append(cache.generation)
    before, memo = cache.generation, cache.cycle_input(0.0)
    update.apply(cache)
    assert (cache.generation != before) == update.changes
    assert len(woken) == (1 if update.changes else 0)
    assert (cache.cycle_input(0.0) is memo) == (not update.changes)


def test_the_newest_object_is_kept_even_when_nothing_changed() -> None:
    cache = filled()
    cache.upsert_pod(dataclasses.replace(POD, resource_version="2"))
    cache.upsert_group(dataclasses.replace(GROUP, resource_version="7"))
    pod, group = cache.pod(POD.uid), cache.group(GROUP.key)
    assert pod is not None and pod.resource_version == "2"
    assert group is not None and group.resource_version == "7"


def test_an_assumption_lapsing_is_the_cache_s_next_expiry() -> None:
    cache = filled()
    assert cache.next_expiry() is None
    cache.assume([(REF, "n1")], 10.0, binding=True)
    assert cache.next_expiry() is None  # in flight: it does not lapse
    cache.settle([REF], 20.0)
    assert cache.next_expiry() == 20.0 + cache.assume_ttl
    before = cache.generation
    cache.cycle_input(20.0 + cache.assume_ttl)
    assert cache.generation == before  # not past yet
    cache.cycle_input(20.0 + cache.assume_ttl + 0.001)
    assert cache.generation == before + 1 and cache.next_expiry() is None
