"""Smoke tests of the dev cluster itself: the ground every other e2e test stands on."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from scheduler.tools.devcluster import build, kubeconfig, nodes, procs, rest, state
from scheduler.tools.devcluster.cluster import DevCluster
from scheduler.world import clusterspec
from tests.e2e.cluster_api import (
    SIMULATED_EXIT_CODE,
    SIMULATED_RUNTIME,
    ControlPlane,
    wait_for,
)
from tests.e2e.live import PodWatch

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
DEV_YAML = REPO_ROOT / "scheduler" / "examples" / "clusters" / "dev.yaml"


def test_version_reports_the_pinned_release(control_plane: ControlPlane) -> None:
    version = client.VersionApi(control_plane.api).get_code()
    pinned = build.KUBE_APISERVER.version
    assert version.git_version == pinned
    assert (version.major, version.minor) == tuple(pinned.lstrip("v").split(".")[:2])


def test_podgroup_crd_is_served(control_plane: ControlPlane, namespace: str) -> None:
    created = control_plane.create_pod_group(namespace, "train", min_member=4,
                                             min_resources={"nvidia.com/gpu": "32"},
                                             schedule_timeout_seconds=60)
    assert created["spec"] == {"minMember": 4, "minResources": {"nvidia.com/gpu": "32"},
                               "scheduleTimeoutSeconds": 60}
    status = {"phase": "Scheduled", "scheduled": 4, "running": 0, "succeeded": 0, "failed": 0,
              "occupiedBy": f"{namespace}/train", "scheduleStartTime": "2026-01-01T00:00:00Z"}
    rest.call(control_plane.custom.patch_namespaced_custom_object_status,
              "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "train",
              {"status": status}, _content_type=rest.MERGE_PATCH)
    assert control_plane.get_pod_group(namespace, "train")["status"] == status


def test_nodes_from_a_cluster_spec_are_ready_and_untainted(control_plane: ControlPlane) -> None:
    spec = clusterspec.parse({"pools": [{"name": "smoke", "count": 3, "gpusPerNode": 4,
                                         "gpuModel": "NVIDIA-H100-80GB-HBM3"}]})
    names = control_plane.create_nodes(spec)
    assert names == ["smoke-0000", "smoke-0001", "smoke-0002"]
    for name, description in zip(names, spec.nodes(), strict=True):
        node = control_plane.get_node(name)
        assert nodes.is_ready_and_untainted(node), node["spec"]
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"
        assert description.labels.items() <= node["metadata"]["labels"].items()
    # The generated client models must parse our nodes too (their nodeInfo fields are required).
    status = control_plane.core.read_node(names[0]).status
    assert status is not None and status.node_info is not None
    assert status.node_info.kubelet_version == nodes.KUBELET_VERSION


def test_declared_taints_stay_and_not_ready_goes(control_plane: ControlPlane) -> None:
    taint = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
    name = control_plane.create_node(taints=[taint])
    node = control_plane.get_node(name)
    assert node["spec"]["taints"] == [taint]
    assert nodes.is_ready_and_untainted(node, allowed_taints={"dedicated"})


def test_bound_pod_runs(control_plane: ControlPlane, namespace: str) -> None:
    node = control_plane.create_node(gpus=8)
    pod = control_plane.create_pod(namespace, "worker-0", gpus=8)
    assert pod["spec"]["schedulerName"] == "gang-scheduler"
    time.sleep(0.5)  # nothing but our scheduler may bind it: it must still be pending
    pending = control_plane.get_pod(namespace, "worker-0")
    assert pending is not None and not pending["spec"].get("nodeName")

    assert control_plane.bind(namespace, "worker-0", node) == 201

    running = control_plane.wait_pod_phase(namespace, "worker-0", "Running")
    assert running["spec"]["nodeName"] == node
    conditions = {c["type"]: c["status"] for c in running["status"]["conditions"]}
    assert conditions["PodScheduled"] == conditions["Ready"] == "True"
    (container,) = running["status"]["containerStatuses"]
    assert container["ready"] and "running" in container["state"]
    model = control_plane.core.read_namespaced_pod("worker-0", namespace)
    assert model.status is not None and model.status.phase == "Running"


def test_simulated_runtime_pod_succeeds(control_plane: ControlPlane, namespace: str) -> None:
    node = control_plane.create_node()
    control_plane.create_pod(namespace, "short", gpus=1, runtime_s=2)
    assert control_plane.bind(namespace, "short", node) == 201
    control_plane.wait_pod_phase(namespace, "short", "Running")
    done = control_plane.wait_pod_phase(namespace, "short", "Succeeded", timeout_s=15)
    (container,) = done["status"]["containerStatuses"]
    terminated = container["state"]["terminated"]
    assert terminated["exitCode"] == 0 and terminated["reason"] == "Completed"
    assert done["status"]["startTime"]


def test_failing_container_exits_with_the_annotated_code(control_plane: ControlPlane,
                                                         namespace: str) -> None:
    node = control_plane.create_node()
    control_plane.create_pod(namespace, "crash", runtime_s=1,
                             annotations={SIMULATED_EXIT_CODE: "3"})
    assert control_plane.bind(namespace, "crash", node) == 201
    failed = control_plane.wait_pod_phase(namespace, "crash", "Failed", timeout_s=30)
    (container,) = failed["status"]["containerStatuses"]
    assert container["state"]["terminated"]["exitCode"] == 3
    assert container["state"]["terminated"]["reason"] == "Error"


def test_a_malformed_simulation_annotation_is_named_in_a_warning(control_plane: ControlPlane,
                                                                 namespace: str) -> None:
    node = control_plane.create_node()
    control_plane.create_pod(namespace, "odd", annotations={SIMULATED_RUNTIME: "2 minutes"})
    assert control_plane.bind(namespace, "odd", node) == 201
    control_plane.wait_pod_phase(namespace, "odd", "Running")
    warning = wait_for(lambda: [e for e in rest.call(control_plane.core.list_namespaced_event,
                                                     namespace,
                                                     field_selector="involvedObject.name=odd")
                                ["items"] if e["reason"] == "BadSimulationAnnotation"], 30,
                       what="the BadSimulationAnnotation warning")
    assert SIMULATED_RUNTIME in warning[0]["message"]
    time.sleep(1)
    pod = control_plane.get_pod(namespace, "odd")
    assert pod is not None and pod["status"]["phase"] == "Running"


def test_an_overcommit_is_caught_by_the_capacity_watch(control_plane: ControlPlane,
                                                       namespace: str) -> None:
    """kwok admits whatever is bound (a kubelet would refuse it): the capacity watch, which
    fails any test that over-commits a node, sees it."""
    watch = control_plane.capacity
    assert watch is not None
    node = control_plane.create_node(gpus=8)
    control_plane.create_pod(namespace, "big", gpus=8)
    control_plane.create_pod(namespace, "extra", gpus=1)
    assert control_plane.bind(namespace, "big", node) == 201
    control_plane.wait_pod_phase(namespace, "big", "Running")
    before = len(watch.violations)
    with watch.expect(node):
        assert control_plane.bind(namespace, "extra", node) == 201
        wait_for(lambda: len(watch.violations) > before, 30, what="the over-commit recorded")
        for pod in ("extra", "big"):
            rest.call(control_plane.core.delete_namespaced_pod, pod, namespace,
                      grace_period_seconds=0)
    violation = watch.violations[before]
    assert (violation.node, violation.resource) == (node, "nvidia.com/gpu")
    assert (violation.used, violation.allocatable) == (9, 8)


def test_deleting_a_bound_pod_honours_its_grace_period(control_plane: ControlPlane,
                                                       namespace: str) -> None:
    """The pod keeps running for its terminationGracePeriodSeconds, is Failed (killed, exit
    137) at the end of it, and then goes."""
    node = control_plane.create_node()
    body = {"metadata": {"name": "victim"}, "spec": {
        "schedulerName": "gang-scheduler", "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 3, "nodeName": node,
        "containers": [{"name": "main", "image": "registry.invalid/x",
                        "resources": {"requests": {"cpu": "100m"}}}]}}
    rest.call(control_plane.core.create_namespaced_pod, namespace, body)
    control_plane.wait_pod_phase(namespace, "victim", "Running")
    with PodWatch(control_plane, namespace) as history:
        started = time.monotonic()
        rest.call(control_plane.core.delete_namespaced_pod, "victim", namespace)
        wait_for(lambda: control_plane.get_pod(namespace, "victim") is None, 60,
                 what="the deleted pod to disappear")
        gone = time.monotonic() - started
        # The apiserver answered 404; the watch may not have delivered the last versions yet.
        history.seen_deleted(["victim"])
    # deletionTimestamp (when the grace period ends, and when kwok kills the pod) has whole
    # seconds: the apiserver's now + 3 s, truncated, so it is 2 to 3 s after the delete.
    assert gone >= 2.0, f"gone after {gone:.1f}s, before its 3 s grace period"
    assert history.phases("victim")[-1] == "Failed", history.phases("victim")
    terminated = history.last("victim")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 137


def test_minted_service_account_token_is_bound_by_rbac(control_plane: ControlPlane,
                                                       namespace: str) -> None:
    path = control_plane.service_account_kubeconfig(namespace, "robot")
    sa_api = kubeconfig.api_client(path)
    review = rest.call(client.AuthenticationV1Api(sa_api).create_self_subject_review, {})
    assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:robot"

    sa_core = client.CoreV1Api(sa_api)
    with pytest.raises(client.ApiException) as denied:
        rest.call(sa_core.list_namespaced_pod, namespace)
    assert denied.value.status == 403

    rbac = client.RbacAuthorizationV1Api(control_plane.api)
    rest.call(rbac.create_namespaced_role, namespace, {
        "metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
    })
    rest.call(rbac.create_namespaced_role_binding, namespace, {
        "metadata": {"name": "robot-reads-pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": namespace}],
    })
    wait_for(lambda: _allowed(sa_core.list_namespaced_pod, namespace), 60,
             what="the RoleBinding to take effect")
    # Granted pods in its namespace only: not nodes, not pods elsewhere, not binding.
    assert not _allowed(sa_core.list_node)
    assert not _allowed(sa_core.list_namespaced_pod, "default")
    assert not _allowed(sa_core.create_namespaced_pod_binding, "x", namespace,
                        {"metadata": {"name": "x"}, "target": {"kind": "Node", "name": "n"}})


def _allowed(method: Callable[..., Any], *args: Any) -> bool:
    """Whether RBAC lets the caller make this request (403 -> False; other errors raise)."""
    try:
        rest.call(method, *args)
    except client.ApiException as exc:
        if exc.status == 403:
            return False
        raise
    return True


def _cli(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli.main", "dev-cluster", "--state-dir",
         str(state_dir), *args], capture_output=True, text=True, env=env, timeout=180,
        check=False)


def test_cli_up_env_down_across_processes_leaves_nothing(tmp_path: Path) -> None:
    up = _cli(tmp_path, "up", "--cluster", str(DEV_YAML))
    assert up.returncode == 0, up.stderr + up.stdout
    recorded = state.load(tmp_path)
    assert recorded is not None
    assert [p.name for p in recorded.processes] == [
        "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok",
        "jobset-controller", "trainer-controller", "dra-driver"]
    assert all(procs.is_alive(p) for p in recorded.processes)

    env = _cli(tmp_path, "env")
    assert env.stdout.strip() == f"export KUBECONFIG={tmp_path / 'kubeconfig'}"
    listed = rest.call(client.CoreV1Api(kubeconfig.api_client(tmp_path / "kubeconfig")).list_node)
    assert len(listed["items"]) == clusterspec.load(DEV_YAML).node_count()

    down = _cli(tmp_path, "down")
    assert down.returncode == 0, down.stderr
    for proc in recorded.processes:
        assert not procs.is_alive(proc), proc
        assert not procs.group_alive(proc.pid), proc
    assert state.load(tmp_path) is None
    assert _cli(tmp_path, "env").returncode == 1


def test_owned_cluster_dies_with_its_owner_even_on_sigkill(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from scheduler.tools.devcluster.cluster import DevCluster
        DevCluster(Path({str(tmp_path)!r}), owned=True).up(log=lambda _: None)
        print("up", flush=True)
        time.sleep(600)
    """)
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "up"
        recorded = state.load(tmp_path)
        assert recorded is not None and all(procs.is_alive(p) for p in recorded.processes)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    for proc in recorded.processes:
        wait_for(functools.partial(_dead, proc), 15, what=f"{proc.name} to exit")
    DevCluster(tmp_path).down(log=lambda _: None)  # tidies the state file only


def _dead(proc: procs.ManagedProcess) -> bool:
    return not procs.is_alive(proc)
