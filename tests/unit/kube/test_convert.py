"""Table-driven apiserver JSON -> model conversion: fixtures in, records or field errors out."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from scheduler.kube.read import convert
from scheduler.model import NodeLabelConfig, Taint, TaintEffect
from scheduler.model.resources import Resources
from scheduler.model.workloads import OwnerRef, PodPhase

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def patched(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of *obj* with the dotted *path* (``[i]`` for list items) set; None deletes."""
    out = copy.deepcopy(obj)
    parts = path.replace("]", "").replace("[", ".").split(".")
    cur: Any = out
    for part in parts[:-1]:
        cur = cur[int(part)] if isinstance(cur, list) else cur.setdefault(part, {})
    last = parts[-1]
    if value is None:
        cur.pop(last, None)
    elif isinstance(cur, list):
        cur[int(last)] = value
    else:
        cur[last] = value
    return out


# Nodes -------------------------------------------------------------------------------------
def test_node_fixture() -> None:
    node = convert.node_from_json(fixture("node.json"))
    assert node.name == "gpu-a-0"
    assert node.allocatable == Resources({"cpu": 95_500, "memory": 1_000 * 2**30,
                                          "nvidia.com/gpu": 8, "pods": 110,
                                          "ephemeral-storage": 400 * 10**9})
    assert node.taints == (Taint("nvidia.com/gpu", "present", TaintEffect.NO_SCHEDULE),)
    assert node.ready and not node.unschedulable
    assert node.pool == "a100"
    assert node.topology == ("blk-1", "blk-1/rack-3")


def test_node_label_config_is_applied() -> None:
    config = NodeLabelConfig(pool_label="example.com/pool", topology_labels=())
    node = convert.node_from_json(fixture("node.json"), config)
    assert node.pool == "NVIDIA-A100-SXM4-80GB"  # falls back to the GPU product label
    assert node.topology == ()


@pytest.mark.parametrize(("path", "value", "check"), [
    ("spec.unschedulable", True, lambda n: n.unschedulable),
    ("status.conditions", [{"type": "Ready", "status": "False"}], lambda n: not n.ready),
    ("status.conditions", None, lambda n: not n.ready),
    ("spec.taints", None, lambda n: n.taints == ()),
    ("status.allocatable", None, lambda n: n.allocatable == Resources()),
    ("metadata.labels", None, lambda n: n.labels == {"kubernetes.io/hostname": "gpu-a-0"}),
])
def test_node_variants(path: str, value: Any, check: Any) -> None:
    assert check(convert.node_from_json(patched(fixture("node.json"), path, value)))


@pytest.mark.parametrize(("path", "value", "message"), [
    ("status.allocatable.cpu", "12x",
     "node gpu-a-0: status.allocatable.cpu: malformed quantity '12x'"),
    ("status.allocatable.memory", "-1Gi",
     "node gpu-a-0: status.allocatable.memory: negative quantity"),
    ("spec.taints[0].effect", "Sometimes", "node gpu-a-0: spec.taints[0].effect: unknown effect"),
    ("spec.taints[0].key", None, "node gpu-a-0: spec.taints[0].key: missing"),
    ("spec.taints", "oops", "node gpu-a-0: spec.taints: expected a list"),
    ("status.allocatable", [], "node gpu-a-0: status.allocatable: expected an object"),
    ("metadata.name", None, "node ?: metadata.name: missing"),
])
def test_node_errors(path: str, value: Any, message: str) -> None:
    with pytest.raises(convert.ConversionError) as err:
        convert.node_from_json(patched(fixture("node.json"), path, value))
    assert str(err.value).startswith(message)


# Pods --------------------------------------------------------------------------------------
def test_pod_fixture() -> None:
    pod = convert.pod_from_json(fixture("pod.json"))
    assert (pod.namespace, pod.name, pod.uid) == ("team-a", "train-0", "2f1c9d9e-pod-0")
    assert pod.scheduler_name == "gang-scheduler"
    assert pod.phase is PodPhase.PENDING and not pod.is_bound
    assert pod.priority == 1000
    assert pod.creation_time == 1714564800.0  # 2024-05-01T12:00:00Z
    assert pod.owner == OwnerRef(kind="Job", name="train", uid="job-uid-1")
    assert pod.resource_version == "4711"
    assert pod.started_at is None
    assert pod.labels["scheduling.x-k8s.io/pod-group"] == "train"
    # app container (4 cpu, 1 gpu) + sidecar (500m), init container peak 2 cpu, overhead 250m
    assert pod.requirements.requests == Resources({"cpu": 4_750, "memory": 33 * 2**30,
                                                   "nvidia.com/gpu": 1})
    assert pod.requirements.node_selector == {"gangscheduler.io/pool": "a100"}
    assert len(pod.requirements.tolerations) == 1
    assert pod.requirements.affinity_terms[0].match_expressions[0].key == "nvidia.com/gpu.product"


@pytest.mark.parametrize(("path", "value", "check"), [
    ("spec.nodeName", "gpu-a-0", lambda p: p.is_bound and p.node_name == "gpu-a-0"),
    ("status.phase", "Succeeded", lambda p: p.is_finished),
    ("status", None, lambda p: p.phase is PodPhase.PENDING),
    ("metadata.deletionTimestamp", "2024-05-01T12:05:00Z", lambda p: p.terminating),
    ("spec.priority", None, lambda p: p.priority == 0),
    ("spec.schedulerName", None, lambda p: p.scheduler_name == "default-scheduler"),
    ("metadata.ownerReferences", [{"kind": "ReplicaSet", "name": "rs", "uid": "u"}],
     lambda p: p.owner is None),  # not a controller reference
    ("metadata.creationTimestamp", "2024-05-01T12:00:00.250000+00:00",
     lambda p: p.creation_time == 1714564800.25),
    ("status.startTime", "2024-05-01T12:01:00Z", lambda p: p.started_at == 1714564860.0),
    ("status.conditions", [{"type": "PodScheduled", "status": "True",
                            "lastTransitionTime": "2024-05-01T12:00:30Z"}],
     lambda p: p.started_at == 1714564830.0),
    ("status.conditions", [{"type": "PodScheduled", "status": "False",
                            "lastTransitionTime": "2024-05-01T12:00:30Z"}],
     lambda p: p.started_at is None),
    ("spec.containers[0].resources", None,
     lambda p: p.requirements.requests["nvidia.com/gpu"] == 0),
    ("spec.terminationGracePeriodSeconds", 120, lambda p: p.grace_period_seconds == 120),
    ("spec.terminationGracePeriodSeconds", 0, lambda p: p.grace_period_seconds == 0),
    ("spec.terminationGracePeriodSeconds", None, lambda p: p.grace_period_seconds is None),
])
def test_pod_variants(path: str, value: Any, check: Any) -> None:
    assert check(convert.pod_from_json(patched(fixture("pod.json"), path, value)))


@pytest.mark.parametrize(("path", "value", "message"), [
    ("spec.containers[0].resources.requests.cpu", "12x",
     "pod team-a/train-0: spec.containers[0].resources.requests.cpu: malformed quantity '12x'"),
    ("spec.containers[1].resources.limits.memory", "1ki",
     "pod team-a/train-0: spec.containers[1].resources.limits.memory: malformed quantity '1ki'"),
    ("spec.initContainers[0].resources.requests.cpu", "",
     "pod team-a/train-0: spec.initContainers[0].resources.requests.cpu: empty quantity"),
    ("spec.overhead.cpu", "lots", "pod team-a/train-0: spec.overhead.cpu: malformed quantity"),
    ("spec.tolerations[0].effect", "Never",
     "pod team-a/train-0: spec.tolerations[0].effect: unknown effect 'Never'"),
    ("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
     ".nodeSelectorTerms[0].matchExpressions[0].operator", "Near",
     "pod team-a/train-0: spec.affinity.nodeAffinity.required.nodeSelectorTerms[0]"
     ".matchExpressions[0].operator: unknown operator 'Near'"),
    ("status.phase", "Dancing", "pod team-a/train-0: status.phase: unknown phase 'Dancing'"),
    ("spec.priority", "high", "pod team-a/train-0: spec.priority: expected an integer"),
    ("metadata.creationTimestamp", "yesterday",
     "pod team-a/train-0: metadata.creationTimestamp: malformed time 'yesterday'"),
    ("spec.containers", {"a": 1}, "pod team-a/train-0: spec.containers: expected a list"),
    ("status.startTime", "soon", "pod team-a/train-0: status.startTime: malformed time 'soon'"),
    ("spec.terminationGracePeriodSeconds", -1,
     "pod team-a/train-0: spec.terminationGracePeriodSeconds: must be >= 0"),
    ("spec.terminationGracePeriodSeconds", "30s",
     "pod team-a/train-0: spec.terminationGracePeriodSeconds: expected an integer"),
])
def test_pod_errors(path: str, value: Any, message: str) -> None:
    with pytest.raises(convert.ConversionError) as err:
        convert.pod_from_json(patched(fixture("pod.json"), path, value))
    assert str(err.value).startswith(message), str(err.value)
    assert err.value.kind == "pod" and err.value.key == "team-a/train-0"


def test_pod_requirements_are_shared_across_per_pod_container_fields() -> None:
    """Admission gives each pod a volumeMount of its own name; the memo must not see it."""
    a = patched(fixture("pod.json"), "spec.containers[0].volumeMounts",
                [{"name": "kube-api-access-aaaaa", "mountPath": "/var/run/secrets"}])
    b = patched(a, "spec.containers[0].volumeMounts[0].name", "kube-api-access-bbbbb")
    assert convert.pod_from_json(a).requirements is convert.pod_from_json(b).requirements


def test_not_an_object() -> None:
    with pytest.raises(convert.ConversionError, match=r"pod \?: expected an object, got list"):
        convert.pod_from_json([])  # type: ignore[arg-type]


# PodGroups, Jobs, PriorityClasses ------------------------------------------------------------
def test_podgroup_fixture() -> None:
    pg = convert.podgroup_from_json(fixture("podgroup.json"))
    assert (pg.key, pg.uid, pg.min_member) == ("team-a/train", "pg-uid-1", 4)
    assert pg.min_resources == Resources({"cpu": 16_000, "nvidia.com/gpu": 4})
    assert pg.schedule_timeout_seconds == 600
    assert pg.labels == {"gangscheduler.io/queue": "research"}
    assert pg.resource_version == "812"


@pytest.mark.parametrize(("path", "value", "check"), [
    ("spec.minResources", None, lambda g: g.min_resources is None),
    ("spec.scheduleTimeoutSeconds", None, lambda g: g.schedule_timeout_seconds is None),
    ("spec.minMember", None, lambda g: g.min_member == 1),
    ("spec.minMember", 0, lambda g: g.min_member == 1),
    ("spec", None, lambda g: g.min_member == 1),
])
def test_podgroup_variants(path: str, value: Any, check: Any) -> None:
    assert check(convert.podgroup_from_json(patched(fixture("podgroup.json"), path, value)))


@pytest.mark.parametrize(("path", "value", "message"), [
    ("spec.minResources.cpu", "12x",
     "podgroup team-a/train: spec.minResources.cpu: malformed quantity '12x'"),
    ("spec.minMember", -1, "podgroup team-a/train: spec.minMember: must be >= 0"),
    ("spec.minMember", "4", "podgroup team-a/train: spec.minMember: expected an integer"),
    ("spec.minMember", True, "podgroup team-a/train: spec.minMember: expected an integer"),
    ("spec.scheduleTimeoutSeconds", -5,
     "podgroup team-a/train: spec.scheduleTimeoutSeconds: must be >= 0"),
    ("spec.minResources", "8 gpus", "podgroup team-a/train: spec.minResources: expected an object"),
])
def test_podgroup_errors(path: str, value: Any, message: str) -> None:
    with pytest.raises(convert.ConversionError) as err:
        convert.podgroup_from_json(patched(fixture("podgroup.json"), path, value))
    assert str(err.value).startswith(message), str(err.value)


def test_job() -> None:
    job = convert.job_from_json(fixture("job.json"))
    assert (job.key, job.uid, job.parallelism, job.completions) == ("team-a/train", "job-uid-1",
                                                                    4, 4)
    assert job.active_deadline_seconds == 3600
    assert job.creation_time == 1796032800.0  # 2026-11-30T10:00:00Z: the gang's age
    with pytest.raises(convert.ConversionError, match=r"metadata\.creationTimestamp"):
        convert.job_from_json(patched(fixture("job.json"), "metadata.creationTimestamp", "x"))
    defaulted = convert.job_from_json(patched(fixture("job.json"), "spec.parallelism", None))
    assert defaulted.parallelism == 1
    with pytest.raises(convert.ConversionError, match=r"job team-a/train: spec\.parallelism"):
        convert.job_from_json(patched(fixture("job.json"), "spec.parallelism", 2.5))
    assert job.succeeded == 0  # no status yet
    done3 = convert.job_from_json(patched(fixture("job.json"), "status", {"succeeded": 3}))
    assert (done3.succeeded, done3.gang_size) == (3, 1)
    with pytest.raises(convert.ConversionError, match=r"job team-a/train: status\.succeeded"):
        convert.job_from_json(patched(fixture("job.json"), "status", {"succeeded": "3"}))
    indexed = convert.job_from_json(patched(patched(fixture("job.json"), "spec.completionMode",
                                                    "Indexed"),
                                            "status", {"completedIndexes": "0-1,3"}))
    assert (indexed.indexed, indexed.completed_indexes) == (True, {0, 1, 3})
    with pytest.raises(convert.ConversionError,
                       match=r"job team-a/train: status\.completedIndexes: not an index"):
        convert.job_from_json(patched(fixture("job.json"), "status", {"completedIndexes": "x"}))


@pytest.mark.parametrize(("obj", "expected"), [
    ({"metadata": {"name": "high"}, "value": 1000}, convert.PriorityClassInfo("high", 1000)),
    ({"metadata": {"name": "d"}, "value": -5, "globalDefault": True},
     convert.PriorityClassInfo("d", -5, True)),
])
def test_priority_class(obj: dict[str, Any], expected: convert.PriorityClassInfo) -> None:
    assert convert.priority_class_from_json(obj) == expected


def test_priority_class_errors_and_default() -> None:
    with pytest.raises(convert.ConversionError, match="priorityclass x: value: missing"):
        convert.priority_class_from_json({"metadata": {"name": "x"}})
    classes = {c.name: c for c in (convert.PriorityClassInfo("a", 10, True),
                                   convert.PriorityClassInfo("b", 50),
                                   convert.PriorityClassInfo("c", 20, True))}
    assert convert.default_priority(classes) == 20
    assert convert.default_priority({}) == 0


def test_object_key() -> None:
    assert convert.object_key({"metadata": {"name": "n", "namespace": "ns"}}) == "ns/n"
    assert convert.object_key({"metadata": {"name": "node"}}) == "node"
    assert convert.object_key({}) == "?"


def test_requirements_are_shared_between_identical_specs() -> None:
    a = convert.pod_from_json(fixture("pod.json"))
    b = convert.pod_from_json(patched(fixture("pod.json"), "metadata.name", "train-1"))
    c = convert.pod_from_json(patched(fixture("pod.json"), "spec.overhead", None))
    assert a.requirements is b.requirements
    assert c.requirements != a.requirements
