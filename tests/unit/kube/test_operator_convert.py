"""Operators' objects read as the gang their operator creates: PyTorchJob, MPIJob (Kubeflow
training-operator v1.8.1) and RayCluster (KubeRay v1.5.0), from objects shaped as the
apiserver serves them; a spec that does not read says which field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.feed.grouping_terms import SIZED_OPERATOR_KINDS
from scheduler.kube.read import informer
from scheduler.kube.read.fields import ConversionError
from scheduler.kube.read.operator_convert import SIZERS, operator_job

TEMPLATE = {"spec": {"schedulerName": "gang-scheduler",
                     "containers": [{"name": "c", "image": "busybox"}]}}


def meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": "ml", "uid": f"uid-{name}",
            "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"team": "a"}}


def pytorchjob(master: int | None = 1, worker: int | None = 3, **spec: Any) -> dict[str, Any]:
    specs: dict[str, Any] = {}
    if master is not None:
        specs["Master"] = {"replicas": master, "restartPolicy": "OnFailure",
                           "template": TEMPLATE}
    if worker is not None:
        specs["Worker"] = {"replicas": worker, "restartPolicy": "OnFailure",
                           "template": TEMPLATE}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta("pt"),
            "spec": {"pytorchReplicaSpecs": specs, "runPolicy": {}, **spec}}


def mpijob(workers: int = 4, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "metadata": meta("mpi"),
            "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": TEMPLATE},
                "Worker": {"replicas": workers, "template": TEMPLATE}}, **spec}}


def group(name: str, replicas: int | None, low: int, high: int, **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"groupName": name, "minReplicas": low, "maxReplicas": high,
                           "rayStartParams": {}, "template": TEMPLATE, **more}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def raycluster(*groups: dict[str, Any], autoscaling: bool = False) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta("rc"),
            "spec": {"rayVersion": "2.46.0", "enableInTreeAutoscaling": autoscaling,
                     "headGroupSpec": {"rayStartParams": {}, "template": TEMPLATE},
                     "workerGroupSpecs": list(groups)}}


# (name, kind, object, gang size, minimum or None)
CASES = [
    ("pytorch master + 3 workers", "PyTorchJob", pytorchjob(), 4, None),
    ("pytorch replicas unset are 1", "PyTorchJob", pytorchjob(None, None) | {"spec": {
        "pytorchReplicaSpecs": {"Master": {"template": TEMPLATE},
                                "Worker": {"template": TEMPLATE}}}}, 2, None),
    ("pytorch minAvailable", "PyTorchJob",
     pytorchjob(runPolicy={"schedulingPolicy": {"minAvailable": 2}}), 4, 2),
    ("pytorch elastic: minReplicas workers", "PyTorchJob",
     pytorchjob(None, 3, elasticPolicy={"rdzvBackend": "c10d", "minReplicas": 1,
                                        "maxReplicas": 3, "maxRestarts": 100}), 3, 1),
    ("pytorch elastic with a master: master counts in the minimum", "PyTorchJob",
     pytorchjob(1, 4, elasticPolicy={"minReplicas": 2, "maxReplicas": 4}), 5, 3),
    ("pytorch minAvailable wins over elastic", "PyTorchJob",
     pytorchjob(None, 4, elasticPolicy={"minReplicas": 1, "maxReplicas": 4},
                runPolicy={"schedulingPolicy": {"minAvailable": 3}}), 4, 3),
    ("mpi launcher + workers", "MPIJob", mpijob(4), 5, None),
    ("mpi minAvailable", "MPIJob",
     mpijob(4, runPolicy={"schedulingPolicy": {"minAvailable": 3}}), 5, 3),
    ("ray head + groups", "RayCluster",
     raycluster(group("small", 2, 0, 5), group("gpu", 1, 1, 1)), 4, None),
    ("ray replicas clamped to min..max, times numOfHosts", "RayCluster",
     raycluster(group("below", 0, 2, 4), group("above", 9, 0, 3),
                group("tpu", 1, 1, 2, numOfHosts=4)), 10, None),
    ("ray replicas unset: minReplicas", "RayCluster",
     raycluster(group("g", None, 2, 5)), 3, None),
    ("ray suspended group: none", "RayCluster",
     raycluster(group("g", 2, 0, 5), group("off", 3, 1, 3, suspend=True)), 3, None),
    ("ray autoscaling: elastic, head + minReplicas", "RayCluster",
     raycluster(group("g", 3, 1, 5), group("h", 2, 0, 2), autoscaling=True), 6, 2),
    ("ray autoscaling at its minimum: not elastic", "RayCluster",
     raycluster(group("g", 1, 1, 5), autoscaling=True), 2, None),
    ("ray head alone", "RayCluster", raycluster(), 1, None),
]


@pytest.mark.parametrize(("name", "kind", "obj", "size", "least"), CASES,
                         ids=[c[0] for c in CASES])
def test_operator_object_sizes_its_gang(name: str, kind: str, obj: dict[str, Any],
                                        size: int, least: int | None) -> None:
    job = operator_job(kind, obj, SIZERS[kind])
    assert (job.parallelism, job.min_available, job.unknown) == (size, least, "")
    assert (job.key, job.uid, job.labels) == (f"ml/{obj['metadata']['name']}",
                                              obj["metadata"]["uid"], {"team": "a"})
    assert job.creation_time > 0


def broken(obj: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    at = out
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    return out


# (kind, object, the field its warning names)
MALFORMED = [
    ("PyTorchJob", broken(pytorchjob(), ["spec", "pytorchReplicaSpecs", "Worker", "replicas"],
                          "three"), "spec.pytorchReplicaSpecs.Worker.replicas"),
    ("PyTorchJob", broken(pytorchjob(), ["spec", "pytorchReplicaSpecs", "Master", "replicas"],
                          -1), "spec.pytorchReplicaSpecs.Master.replicas"),
    ("PyTorchJob", broken(pytorchjob(), ["spec", "pytorchReplicaSpecs"], {}),
     "spec.pytorchReplicaSpecs"),
    ("PyTorchJob", broken(pytorchjob(), ["spec", "runPolicy"],
                          {"schedulingPolicy": {"minAvailable": "2"}}),
     "spec.runPolicy.schedulingPolicy.minAvailable"),
    ("PyTorchJob", broken(pytorchjob(), ["spec", "elasticPolicy"],
                          {"minReplicas": 4, "maxReplicas": 2}), "spec.elasticPolicy.minReplicas"),
    ("MPIJob", broken(mpijob(), ["spec", "mpiReplicaSpecs", "Worker"], [1]),
     "spec.mpiReplicaSpecs.Worker"),
    ("RayCluster", broken(raycluster(group("g", 1, 0, 2)),
                          ["spec", "workerGroupSpecs", 0, "numOfHosts"], 1.5),
     "spec.workerGroupSpecs[0].numOfHosts"),
    ("RayCluster", broken(raycluster(), ["spec", "workerGroupSpecs"], {"g": 1}),
     "spec.workerGroupSpecs"),
]


@pytest.mark.parametrize(("kind", "obj", "path"), MALFORMED,
                         ids=[f"{k}-{p}" for k, _, p in MALFORMED])
def test_a_spec_that_does_not_read_names_its_field(kind: str, obj: dict[str, Any],
                                                   path: str) -> None:
    job = operator_job(kind, obj, SIZERS[kind])
    assert job.unknown.startswith(f"{kind} ml/{obj['metadata']['name']}: {path}: ")
    assert "its pods wait" in job.unknown


def test_an_object_without_a_name_is_skipped_naming_the_field() -> None:
    obj = pytorchjob()
    del obj["metadata"]["name"]
    with pytest.raises(ConversionError) as err:
        operator_job("PyTorchJob", obj, SIZERS["PyTorchJob"])
    assert err.value.path == "metadata.name"


def test_the_kinds_read_are_the_kinds_grouping_sizes_and_their_crds_are_optional() -> None:
    assert set(SIZERS) == set(informer.OPERATOR_OBJECTS) == SIZED_OPERATOR_KINDS
    assert all(kind.optional for kind in informer.OPERATOR_OBJECTS.values())
