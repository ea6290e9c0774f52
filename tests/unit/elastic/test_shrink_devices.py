"""A shrink frees the devices of the members it takes (issue 38): an elastic gang whose
members hold GPUs through DRA claims gives back those members' devices when a partial
release takes them, in the snapshot the same cycle's victim search and placement read, as a
whole-gang release does. (They once stayed allocated: the shrink proved nothing, and the
preemptor took the whole gang instead.)

One node whose 4 GPUs are only devices (no ``nvidia.com/gpu``); Job ``first`` runs 4 pods of
one device each with minimum 2; Job ``urgent`` (priority 1000) wants 2 devices."""

from __future__ import annotations

from typing import Any

from scheduler.kube.read import informer
from scheduler.kube.read.informer import EventType
from scheduler.model.release import Release
from scheduler.model.workloads import MIN_MEMBER_ANNOTATION
from tests.unit.devices.world import NS, World, claim_for, job_pod, template


def _elastic(pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"]["annotations"][MIN_MEMBER_ANNOTATION] = "2"
    return pod


def _run_elastic_first(w: World, pods: int) -> None:
    """Job ``first`` (minimum 2) decided, bound and its claims allocated, as watches show."""
    w.job("first", pods)
    for i in range(pods):
        w.handlers[informer.PODS](EventType.MODIFIED,
                                  _elastic(job_pod("first", i, "first-gpus")))
    (bind,) = w.decide().binds
    allocations = {d.claim: d for d in bind.placement.prebinds}
    for ref, node in bind.pod_nodes:
        pod = _elastic(job_pod("first", int(ref.name.rsplit("-", 1)[1]), "first-gpus"))
        pod["spec"]["nodeName"] = node
        pod["spec"]["priority"] = 0
        pod["status"]["phase"] = "Running"
        claim = claim_for(pod, template("first-gpus", 1))
        allocation = allocations[f"{NS}/{claim['metadata']['name']}"].allocation
        assert allocation is not None
        claim["status"] = {
            "allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": r.device.pool,
                 "device": r.device.device} for r in allocation.results]}},
            "reservedFor": [{"resource": "pods", "name": ref.name, "uid": ref.uid}]}
        w.handlers[informer.RESOURCE_CLAIMS](EventType.MODIFIED, claim)
        w.handlers[informer.PODS](EventType.MODIFIED, pod)


def _urgent(w: World, pods: int) -> None:
    w.job("urgent", pods)
    for i in range(pods):
        pod = job_pod("urgent", i, "urgent-gpus")
        pod["spec"]["priority"] = 1000
        w.handlers[informer.PODS](EventType.MODIFIED, pod)


def test_a_partial_release_frees_the_released_members_devices_only() -> None:
    w = World(nodes=1, devices=4, gpus=0)
    _run_elastic_first(w, 4)
    snap = w.cache.cycle_input(1.0).snapshot
    (running,) = snap.running.values()
    assert running.min_member == 2
    assert len(snap.volumes.devices.taken()) == 4
    two = [p for p in running.gang.pods if p.name in ("first-2", "first-3")]
    after = snap.without([Release.of_pods(running, two)])
    assert len(after.volumes.devices.taken()) == 2
    assert after.free_gpus(next(iter(snap.node_names))) == 2
    assert {p.name for p, _ in after.running[running.id].pod_nodes} == {"first-0", "first-1"}
    assert len(snap.volumes.devices.taken()) == 4  # the receiver is unchanged


def test_a_shrink_frees_a_device_another_gang_needs_in_the_same_cycle() -> None:
    """The preemptor takes the two members above the minimum, not the whole gang."""
    w = World(nodes=1, devices=4, gpus=0)
    _run_elastic_first(w, 4)
    _urgent(w, 2)
    plan = w.decide()
    (ev,) = plan.evictions
    assert ev.victim == f"{NS}/first"
    assert not ev.release.is_whole
    assert sorted(p.name for p in ev.pods) == ["first-2", "first-3"]
    assert [n.gang_id for n in plan.nominations] == [f"{NS}/urgent"]
