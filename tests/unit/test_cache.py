"""The cache: assumed binds keep capacity until confirmed or expired; memoised cycle input."""

from __future__ import annotations

import dataclasses

from scheduler.feed.cache import ClusterCache
from scheduler.model import Node, PodRef, PodRequirements, Resources
from scheduler.model.demand import gpus_of
from scheduler.model.workloads import JobInfo, OwnerRef, PodInfo, PodPhase

NODE = Node.build("n1", Resources.of(gpu=8, cpu=64000, pods=110))


def gpu_pod(name: str, gpus: int = 4) -> PodInfo:
    return PodInfo(uid=f"u-{name}", namespace="ns", name=name,
                   requirements=PodRequirements(requests=Resources.of(gpu=gpus)),
                   scheduler_name="gang-scheduler")


def test_assumed_bind_keeps_capacity_until_confirmed() -> None:
    cache = ClusterCache()
    cache.upsert_node(NODE)
    p = gpu_pod("a")
    cache.upsert_pod(p)
    assert gpus_of(cache.cycle_input(0).snapshot.free("n1")) == 8
    cache.assume([(PodRef("ns", "a", p.uid), "n1")], now=0)
    snap = cache.cycle_input(1).snapshot
    assert gpus_of(snap.free("n1")) == 4
    assert cache.cycle_input(1).gangs.pending == ()
    # the watch confirms: still charged, no longer assumed
    cache.upsert_pod(dataclasses.replace(p, node_name="n1", phase=PodPhase.RUNNING))
    assert gpus_of(cache.cycle_input(100).snapshot.free("n1")) == 4


def test_assumption_expires_when_never_confirmed() -> None:
    cache = ClusterCache(assume_ttl=30)
    cache.upsert_node(NODE)
    p = gpu_pod("a")
    cache.upsert_pod(p)
    cache.assume([(PodRef("ns", "a", p.uid), "n1")], now=0)
    assert gpus_of(cache.cycle_input(10).snapshot.free("n1")) == 4
    assert gpus_of(cache.cycle_input(31).snapshot.free("n1")) == 8
    assert [g.id for g in cache.cycle_input(31).gangs.pending] == ["ns/a"]


def test_forget_releases_capacity() -> None:
    cache = ClusterCache()
    cache.upsert_node(NODE)
    p = gpu_pod("a")
    cache.upsert_pod(p)
    ref = PodRef("ns", "a", p.uid)
    cache.assume([(ref, "n1")], now=0)
    cache.forget([ref])
    assert gpus_of(cache.cycle_input(1).snapshot.free("n1")) == 8


def test_cycle_input_is_memoised_until_a_change() -> None:
    cache = ClusterCache()
    cache.upsert_node(NODE)
    first = cache.cycle_input(0)
    assert cache.cycle_input(1) is first
    cache.upsert_pod(gpu_pod("b"))
    assert cache.cycle_input(2) is not first


def test_delete_pod_frees_capacity() -> None:
    cache = ClusterCache()
    cache.upsert_node(NODE)
    p = dataclasses.replace(gpu_pod("a"), node_name="n1", phase=PodPhase.RUNNING)
    cache.upsert_pod(p)
    assert gpus_of(cache.cycle_input(0).snapshot.free("n1")) == 4
    cache.delete_pod(p.uid)
    assert gpus_of(cache.cycle_input(0).snapshot.free("n1")) == 8


def test_job_pods_seen_before_their_job_wait_then_form_one_gang() -> None:
    """The pod and Job watches are separate streams: pods may arrive first."""
    cache = ClusterCache()
    cache.upsert_node(NODE)
    for i in range(2):
        cache.upsert_pod(dataclasses.replace(gpu_pod(f"j-{i}", 1),
                                             owner=OwnerRef("Job", "j", "juid")))
    gangs = cache.cycle_input(0).gangs
    assert gangs.pending == () and set(gangs.problems) == {"ns/j"}
    cache.upsert_job(JobInfo("ns", "j", "juid", parallelism=2))
    (gang,) = cache.cycle_input(1).gangs.pending
    assert (gang.id, gang.min_member, gang.is_complete) == ("ns/j", 2, True)
    cache.delete_job("ns/j")
    assert cache.cycle_input(2).gangs.pending == ()
