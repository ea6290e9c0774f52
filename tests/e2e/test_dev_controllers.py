"""The real kube-controller-manager and kube-scheduler of the dev cluster do their jobs.

Each test pins what it creates to its own node (a ``nodeSelector`` on the node's hostname) so
that kube-scheduler never places a pod on another test's nodes in the shared session cluster.
"""

from __future__ import annotations

import subprocess
import uuid
from typing import Any

import pytest
from kubernetes import client

from scheduler.tools.devcluster import build, rest
from tests.e2e.cluster_api import SIMULATED_RUNTIME, ControlPlane, wait_for

pytestmark = pytest.mark.e2e


def pinned_pod_spec(node: str) -> dict[str, Any]:
    """A pod spec for kube-scheduler (``default-scheduler``) that only fits on `node`."""
    return {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [{"name": "main", "image": "registry.invalid/x",
                            "resources": {"requests": {"cpu": "100m"}}}]}


@pytest.mark.parametrize("component", [build.KUBE_CONTROLLER_MANAGER, build.KUBE_SCHEDULER],
                         ids=lambda c: c.name)
def test_controller_binaries_report_the_pinned_release(component: build.Component) -> None:
    out = subprocess.run([str(component.binary()), "--version"], capture_output=True,
                         text=True, check=True, timeout=30)
    assert out.stdout.strip() == f"Kubernetes {component.version}"


def test_a_job_is_placed_by_kube_scheduler_completed_and_cleaned_up(
        control_plane: ControlPlane, namespace: str) -> None:
    """Job controller, kube-scheduler, ttl-after-finished and the garbage collector in turn:
    the Job's pods are created and placed, succeed, and the finished Job goes with them."""
    node = control_plane.create_node(gpus=0)
    batch = client.BatchV1Api(control_plane.api)
    template = {"metadata": {"annotations": {SIMULATED_RUNTIME: "1"}},
                "spec": pinned_pod_spec(node)}
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "hello"},
            "spec": {"parallelism": 2, "completions": 2, "ttlSecondsAfterFinished": 3,
                     "template": template}}
    job = rest.call(batch.create_namespaced_job, namespace, body)

    def pods() -> list[dict[str, Any]]:
        items = rest.call(control_plane.core.list_namespaced_pod, namespace)["items"]
        return [p for p in items
                if p["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") == "hello"]

    wait_for(lambda: len(pods()) == 2 and all(p["spec"].get("nodeName") == node for p in pods()),
             60, what="kube-scheduler to place the Job's 2 pods on the test's node")

    def status() -> dict[str, Any]:
        return rest.call(batch.read_namespaced_job_status, "hello", namespace).get("status") or {}

    done = wait_for(lambda: status() if status().get("succeeded") == 2 else {}, 60,
                    what="the Job to count 2 succeeded pods")
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in done["conditions"])
    wait_for(lambda: not rest.exists(batch.read_namespaced_job, "hello", namespace), 60,
             what="ttl-after-finished to delete the Job")
    wait_for(lambda: not pods(), 60, what="the garbage collector to delete its pods")
    assert job["metadata"]["uid"]


def test_a_deleted_namespace_finishes_terminating(control_plane: ControlPlane) -> None:
    name = control_plane.new_namespace("doomed")
    wait_for(lambda: rest.exists(control_plane.core.read_namespaced_config_map,
                                 "kube-root-ca.crt", name),
             30, what="the root CA ConfigMap in the new namespace")
    node = control_plane.create_node(gpus=0)
    rest.call(control_plane.core.create_namespaced_pod, name,
              {"metadata": {"name": "p"}, "spec": pinned_pod_spec(node)})
    control_plane.wait_pod_phase(name, "p", "Running", timeout_s=60)
    rest.call(control_plane.core.delete_namespace, name)
    wait_for(lambda: not rest.exists(control_plane.core.read_namespace, name), 90,
             what=f"namespace {name} to be gone")


def test_disruption_controller_keeps_budget_status(control_plane: ControlPlane,
                                                   namespace: str) -> None:
    """A PodDisruptionBudget's status, which the Eviction API reads, is filled in: 2 healthy
    pods, minAvailable 1, so 1 disruption is allowed."""
    node = control_plane.create_node(gpus=0)
    app = f"app-{uuid.uuid4().hex[:6]}"
    for i in range(2):
        rest.call(control_plane.core.create_namespaced_pod, namespace,
                  {"metadata": {"name": f"{app}-{i}", "labels": {"app": app}},
                   "spec": pinned_pod_spec(node)})
        control_plane.wait_pod_phase(namespace, f"{app}-{i}", "Running", timeout_s=60)
    policy = client.PolicyV1Api(control_plane.api)
    rest.call(policy.create_namespaced_pod_disruption_budget, namespace,
              {"metadata": {"name": app},
               "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}}})

    def status() -> dict[str, Any]:
        return rest.call(policy.read_namespaced_pod_disruption_budget, app,
                         namespace).get("status") or {}

    kept = wait_for(lambda: status() if status().get("expectedPods") == 2 else {}, 60,
                    what="the disruption controller to count the budget's pods")
    assert (kept["currentHealthy"], kept["desiredHealthy"], kept["disruptionsAllowed"]) == (2, 1, 1)
