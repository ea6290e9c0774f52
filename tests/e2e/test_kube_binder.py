"""The binder and the writers against a real kube-apiserver: gangs bound, a failure part-way
(nothing deleted), evictions, status and events as the apiserver actually answers them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.kube import client as kube_client
from scheduler.kube.events import EventReason, EventRecorder, EventType, ObjectRef
from scheduler.kube.write.binder import SKIPPED, Binder
from scheduler.kube.write.status import PodGroupPhase, PodGroupStatus, StatusWriter
from scheduler.model import PodRef
from tests.e2e.cluster_api import ControlPlane, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def kube(control_plane: ControlPlane) -> Iterator[kube_client.KubeClient]:
    client = kube_client.connect(str(control_plane.kubeconfig), pool_maxsize=32)
    yield client
    client.close()


@pytest.fixture(scope="module")
def binder(kube: kube_client.KubeClient) -> Iterator[Binder]:
    b = Binder(kube, concurrency=16)
    yield b
    b.close()


def make_pods(cp: ControlPlane, ns: str, n: int, prefix: str = "w") -> list[PodRef]:
    refs = []
    for i in range(n):
        pod = cp.create_pod(ns, f"{prefix}-{i}", gpus=1)
        refs.append(PodRef(ns, pod["metadata"]["name"], pod["metadata"]["uid"]))
    return refs


def node_of(cp: ControlPlane, ref: PodRef) -> str | None:
    """The pod's node ("" when pending), or None when the pod no longer exists."""
    pod = cp.get_pod(ref.namespace, ref.name)
    if pod is None or pod["metadata"]["uid"] != ref.uid:
        return None
    return str(pod["spec"].get("nodeName") or "")


def test_a_gang_is_bound_whole(control_plane: ControlPlane, namespace: str,
                               binder: Binder) -> None:
    nodes = [control_plane.create_node() for _ in range(2)]
    refs = make_pods(control_plane, namespace, 6)
    plan = [(ref, nodes[i % 2]) for i, ref in enumerate(refs)]
    outcome = binder.bind_gang(plan, "gang-scheduler", gang=f"{namespace}/g")
    assert outcome.ok, outcome.describe()
    assert [node_of(control_plane, r) for r in refs] == [n for _, n in plan]
    pod = control_plane.get_pod(namespace, refs[0].name)
    assert pod is not None
    scheduled = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled and scheduled[0]["status"] == "True"


def test_a_member_deleted_before_binding_fails_the_gang_and_deletes_nothing(
        control_plane: ControlPlane, namespace: str, binder: Binder) -> None:
    """Whether to complete the gang (its controller recreates the member) or roll it back is
    the decision core's next cycle: the binder keeps what it bound and says where."""
    node = control_plane.create_node()
    refs = make_pods(control_plane, namespace, 8)
    control_plane.core.delete_namespaced_pod(refs[5].name, namespace, grace_period_seconds=0,
                                             _preload_content=False)
    outcome = binder.bind_gang([(r, node) for r in refs], "gang-scheduler", f"{namespace}/g")
    assert not outcome.ok and not outcome.transient and outcome.parked == ()
    real = [f for f in outcome.failed if f.code != SKIPPED]
    assert [(f.pod.name, f.code) for f in real] == [(refs[5].name, 404)]
    on = {ref.name: node_of(control_plane, ref) for ref in refs if ref != refs[5]}
    assert None not in on.values(), f"a member was deleted: {on}"
    assert {ref.name: n for ref, n in outcome.bound} == {
        name: n for name, n in on.items() if n}


def test_a_recreated_namesake_is_not_bound(control_plane: ControlPlane, namespace: str,
                                           binder: Binder) -> None:
    node = control_plane.create_node()
    [old] = make_pods(control_plane, namespace, 1, "reborn")
    control_plane.core.delete_namespaced_pod(old.name, namespace, grace_period_seconds=0,
                                             _preload_content=False)
    new = control_plane.create_pod(namespace, old.name, gpus=1)
    outcome = binder.bind_gang([(old, node)], "gang-scheduler")
    assert not outcome.ok and outcome.failed[0].code == 409, outcome.describe()
    fresh = PodRef(namespace, old.name, new["metadata"]["uid"])
    assert node_of(control_plane, fresh) == ""


def test_a_bound_pod_is_never_rebound(control_plane: ControlPlane, namespace: str,
                                      binder: Binder) -> None:
    first, second = control_plane.create_node(), control_plane.create_node()
    refs = make_pods(control_plane, namespace, 3)
    assert binder.bind_gang([(refs[0], first)], "gang-scheduler").ok
    # Its Binding answers 409; read back, it is bound where it is (a bind whose reply was
    # lost, or a predecessor's): the gang counts it there, and nothing moves it.
    outcome = binder.bind_gang([(r, second) for r in refs], "gang-scheduler")
    assert outcome.ok and set(outcome.bound) == {
        (refs[0], first), (refs[1], second), (refs[2], second)}, outcome.describe()
    assert [node_of(control_plane, r) for r in refs] == [first, second, second]


def test_delete_and_evict(control_plane: ControlPlane, namespace: str, binder: Binder) -> None:
    node = control_plane.create_node()
    refs = make_pods(control_plane, namespace, 3, "victim")
    assert binder.bind_gang([(r, node) for r in refs], "gang-scheduler").ok
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "keep"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"protected": "yes"}}}}
    kube = binder.client
    assert kube.request("POST", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
                        body=pdb).ok
    guarded = control_plane.create_pod(namespace, "guarded", labels={"protected": "yes"})
    guarded_ref = PodRef(namespace, "guarded", guarded["metadata"]["uid"])
    assert binder.bind_gang([(guarded_ref, node)], "gang-scheduler").ok
    # Pending pods bypass PodDisruptionBudgets; kwok makes this one Running.
    control_plane.wait_pod_phase(namespace, "guarded", "Running")
    out = binder.evict_pods([refs[0], guarded_ref, PodRef(namespace, "ghost")],
                            grace_period_seconds=0)
    assert out[0].ok, out[0].reason
    assert not out[1].ok and out[1].code == 429
    assert out[1].reason.startswith("blocked by PodDisruptionBudget")
    assert out[2].ok and out[2].reason == "already gone"
    assert binder.delete_pods(refs[1:]) == []
    wait_for(lambda: all(node_of(control_plane, r) is None for r in refs), 60,
             what="deleted pods to disappear")


def test_status_writer(control_plane: ControlPlane, namespace: str,
                       kube: kube_client.KubeClient) -> None:
    writer = StatusWriter(kube)
    [ref] = make_pods(control_plane, namespace, 1, "pending")
    assert writer.set_unschedulable(ref, "0/3 nodes: 3 Insufficient nvidia.com/gpu")
    assert not writer.set_unschedulable(ref, "0/3 nodes: 3 Insufficient nvidia.com/gpu")
    assert writer.set_nominated_node(ref, "gpu-7")
    pod = control_plane.get_pod(namespace, ref.name)
    assert pod is not None
    cond = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert cond["message"] == "0/3 nodes: 3 Insufficient nvidia.com/gpu"
    assert pod["status"]["nominatedNodeName"] == "gpu-7"
    # A namesake with another uid is never written to.
    stale = PodRef(namespace, ref.name, "00000000-0000-0000-0000-000000000000")
    assert not writer.set_unschedulable(stale, "for someone else")

    control_plane.create_pod_group(namespace, "train", min_member=4)
    status = PodGroupStatus(PodGroupPhase.PENDING, reason="Unschedulable",
                            message="needs 4 GPUs", schedule_start_time=time.time())
    assert writer.set_podgroup_status(namespace, "train", status)
    got: dict[str, Any] = control_plane.get_pod_group(namespace, "train")["status"]
    assert (got["phase"], got["scheduled"]) == ("Pending", 0) and "scheduleStartTime" in got
    assert writer.status_subresource


def test_events_are_created_and_folded_into_a_series(
        control_plane: ControlPlane, namespace: str, kube: kube_client.KubeClient) -> None:
    clock = [1_800_000_000.0]
    rec = EventRecorder(kube, interval=60, clock=lambda: clock[0], instance="e2e")
    [ref] = make_pods(control_plane, namespace, 1, "evented")
    for _ in range(5):
        rec.emit(ObjectRef.pod(ref), EventReason.FAILED_SCHEDULING, "no fit",
                 EventType.WARNING)
        clock[0] += 20
    events = kube.get_json(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
    assert len(events) == 1
    [event] = events
    assert (event["reason"], event["note"], event["type"]) == ("FailedScheduling", "no fit",
                                                               "Warning")
    assert event["regarding"]["uid"] == ref.uid
    assert event["series"]["count"] == 4  # written at the 4th occurrence (60 s later)
