"""Pods of an operator's object (PyTorchJob, MPIJob, RayCluster) with no PodGroup form the gang
their object asks for; the explicit sources (a PodGroup, the min-member annotation) keep
precedence; pods whose object is unseen or unreadable wait with a reason."""

from __future__ import annotations

from typing import Any

from scheduler.feed.cache import ClusterCache
from scheduler.feed.grouping import GroupingConfig, build_gangs
from scheduler.kube.read.operator_convert import SIZERS, operator_job
from scheduler.model import PodRequirements, Resources
from scheduler.model.workloads import (
    JobInfo,
    OwnerRef,
    PodGroupInfo,
    PodInfo,
    PodPhase,
    operator_key,
)
from tests.unit.kube.test_operator_convert import group, mpijob, pytorchjob, raycluster

GPU1 = PodRequirements(requests=Resources.of(gpu=1, cpu=1000))
PT = OwnerRef("PyTorchJob", "pt", "uid-pt")


def pod(name: str, owner: OwnerRef = PT, *, node: str = "",
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None) -> PodInfo:
    return PodInfo(uid=f"uid-{name}", namespace="ml", name=name, requirements=GPU1,
                   scheduler_name="gang-scheduler", node_name=node,
                   phase=PodPhase.RUNNING if node else PodPhase.PENDING,
                   labels={"training.kubeflow.org/job-name": owner.name, **(labels or {})},
                   annotations=annotations or {}, owner=owner)


def operators(kind: str, obj: dict[str, Any]) -> dict[str, JobInfo]:
    job = operator_job(kind, obj, SIZERS[kind])
    return {operator_key(kind, job.namespace, job.name): job}


def master_and_workers(workers: int = 3, labels: dict[str, str] | None = None,
                       annotations: dict[str, str] | None = None) -> list[PodInfo]:
    names = ["pt-master-0", *(f"pt-worker-{i}" for i in range(workers))]
    return [pod(n, labels=labels, annotations=annotations) for n in names]


def test_a_pytorchjob_is_one_gang_of_master_and_workers() -> None:
    out = build_gangs(master_and_workers(), {}, {}, GroupingConfig(),
                      operators=operators("PyTorchJob", pytorchjob(1, 3)))
    [gang] = out.pending
    assert (gang.id, gang.min_member, gang.size, gang.uid) == ("ml/pt", 4, 4, "uid-pt")
    assert not out.problems


def test_pods_created_before_the_rest_wait_for_the_whole_gang() -> None:
    out = build_gangs(master_and_workers(1), {}, {}, GroupingConfig(),
                      operators=operators("PyTorchJob", pytorchjob(1, 3)))
    [gang] = out.pending
    assert (gang.min_member, gang.size, gang.is_complete) == (4, 2, False)


def test_an_mpijob_counts_its_launcher() -> None:
    mpi = OwnerRef("MPIJob", "mpi", "uid-mpi")
    pods = [pod("mpi-launcher", mpi), *(pod(f"mpi-worker-{i}", mpi) for i in range(4))]
    [gang] = build_gangs(pods, {}, {}, GroupingConfig(),
                         operators=operators("MPIJob", mpijob(4))).pending
    assert (gang.id, gang.min_member, gang.size) == ("ml/mpi", 5, 5)


def test_an_autoscaled_raycluster_is_elastic_down_to_head_and_min_replicas() -> None:
    rc = OwnerRef("RayCluster", "rc", "uid-rc")
    pods = [pod("rc-head", rc), *(pod(f"rc-g-{i}", rc) for i in range(3))]
    obj = raycluster(group("g", 3, 1, 5), autoscaling=True)
    [gang] = build_gangs(pods, {}, {}, GroupingConfig(),
                         operators=operators("RayCluster", obj)).pending
    assert (gang.id, gang.min_member, gang.size) == ("ml/rc", 2, 4)


def test_a_running_elastic_pytorchjob_says_its_minimum() -> None:
    obj = pytorchjob(None, 3, elasticPolicy={"minReplicas": 1, "maxReplicas": 3})
    pods = [pod(f"pt-worker-{i}", node="n1") for i in range(3)]
    out = build_gangs(pods, {}, {}, GroupingConfig(), operators=operators("PyTorchJob", obj))
    assert out.running_by_id["ml/pt"].min_member == 1


def test_a_podgroup_keeps_precedence_over_the_object() -> None:
    labels = {"scheduling.x-k8s.io/pod-group": "pt"}
    out = build_gangs(master_and_workers(labels=labels),
                      {"ml/pt": PodGroupInfo("ml", "pt", min_member=2)}, {}, GroupingConfig(),
                      operators=operators("PyTorchJob", pytorchjob(1, 3)))
    [gang] = out.pending
    assert (gang.min_member, gang.size) == (2, 4)


def test_the_min_member_annotation_keeps_precedence_over_the_object() -> None:
    note = {"gangscheduler.io/min-member": "3"}
    out = build_gangs(master_and_workers(annotations=note), {}, {}, GroupingConfig(),
                      operators=operators("PyTorchJob", pytorchjob(1, 3)))
    [gang] = out.pending
    assert (gang.min_member, gang.size) == (3, 4)


def test_pods_of_an_unseen_object_wait_with_a_reason() -> None:
    out = build_gangs(master_and_workers(), {}, {}, GroupingConfig())
    assert not out.pending
    assert "PyTorchJob ml/pt is not known (yet)" in out.problems["ml/pt"]


def test_pods_of_an_unreadable_object_wait_naming_the_field() -> None:
    obj = pytorchjob(1, 3)
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "3"
    out = build_gangs(master_and_workers(), {}, {}, GroupingConfig(),
                      operators=operators("PyTorchJob", obj))
    assert not out.pending
    assert "spec.pytorchReplicaSpecs.Worker.replicas" in out.problems["ml/pt"]


def test_a_kind_not_read_still_asks_for_a_podgroup() -> None:
    tf = OwnerRef("TFJob", "tf", "uid-tf")
    out = build_gangs([pod("tf-worker-0", tf)], {}, {}, GroupingConfig())
    assert "names no gang" in out.problems["ml/tf"]


def test_an_object_of_another_kind_with_the_same_name_sizes_nothing() -> None:
    out = build_gangs(master_and_workers(), {}, {}, GroupingConfig(),
                      operators=operators("MPIJob", mpijob(4) | {"metadata": {
                          "name": "pt", "namespace": "ml"}}))
    assert "PyTorchJob ml/pt is not known" in out.problems["ml/pt"]


def test_the_cache_regroups_when_the_object_arrives_and_goes() -> None:
    cache = ClusterCache()
    for p in master_and_workers():
        cache.upsert_pod(p)
    assert "ml/pt" in cache.cycle_input(0.0).gangs.problems
    cache.upsert_operator_job("PyTorchJob", operator_job(
        "PyTorchJob", pytorchjob(1, 3), SIZERS["PyTorchJob"]))
    [gang] = cache.cycle_input(0.0).gangs.pending
    assert (gang.min_member, gang.size) == (4, 4)
    cache.delete_operator_job("PyTorchJob", "ml/pt")
    gangs = cache.cycle_input(0.0).gangs
    assert not gangs.pending and "ml/pt" in gangs.problems
