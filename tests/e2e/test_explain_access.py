"""`gang-scheduler explain` as the people who run it: a tenant with namespace RBAC, an operator
with the cluster-wide viewer role, found through $KUBECONFIG, with a pod name for the gang.

The tenant is a ServiceAccount bound in one namespace to deploy/users' gang-scheduler-tenant
(applied with the real kubectl); the operator has deploy/users' gang-scheduler-viewer
cluster-wide. Both run the real console script, the way a person would.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from kubernetes import client

from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import InProcessScheduler, Tenant, unschedulable_message
from tests.e2e.test_deploy_support import CLI, REPO, kubectl

pytestmark = pytest.mark.e2e


def _bind(cp: ControlPlane, namespace: str, account: str, role: str, cluster_wide: bool) -> None:
    meta = {"name": f"{account}-{role}"}
    subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
    body = {"apiVersion": "rbac.authorization.k8s.io/v1", "metadata": meta,
            "roleRef": ref, "subjects": [subject]}
    rbac = client.RbacAuthorizationV1Api(cp.api)
    if cluster_wide:
        meta["name"] = f"{namespace}-{account}-{role}"
        rest.call(rbac.create_cluster_role_binding, {**body, "kind": "ClusterRoleBinding"})
    else:
        rest.call(rbac.create_namespaced_role_binding, namespace, {**body, "kind": "RoleBinding"})


def _explain(kubeconfig: Path, tenant: Tenant, target: str,
             tmp_path: Path) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "config.yaml"
    config.write_text(f"schedulerName: {tenant.scheduler_name}\n"
                      f"defaultQueue: {tenant.queue}\n")
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}
    return subprocess.run([str(CLI), "explain", target, "--config", str(config)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def waiting(control_plane: ControlPlane, tenant: Tenant,
            live_scheduler: InProcessScheduler) -> list[str]:
    """A 2-pod gang of 8 GPUs a pod on one 8-GPU node: one fits, so the gang waits, and the
    live scheduler says why on its pods."""
    kubectl(control_plane.kubeconfig, "apply", "-k", str(REPO / "deploy" / "users"))
    tenant.create_nodes(1, gpus=8)
    pods = tenant.create_gang("big", 2, gpus=8)
    # The reason of the complete gang: the first one written may be "WaitingForMembers" (the
    # second pod not yet seen), which the next cycle replaces, maybe between the test's reads.
    wait_for(lambda: all(unschedulable_message(p).startswith("Placement")
                         for n, p in tenant.pods().items() if n in pods), 60,
             what="the scheduler's placement reason on every pod")
    return pods


def test_a_tenant_with_namespace_rbac_gets_the_last_answer_and_what_it_cannot_see(
        control_plane: ControlPlane, tenant: Tenant, waiting: list[str], tmp_path: Path) -> None:
    _bind(control_plane, tenant.namespace, "alice", "gang-scheduler-tenant", cluster_wide=False)
    alice = control_plane.service_account_kubeconfig(tenant.namespace, "alice")
    # Through $KUBECONFIG, with a pod's name: resolved to its gang.
    out = _explain(alice, tenant, f"{tenant.namespace}/{waiting[1]}", tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "403" not in out.stdout + out.stderr and "Forbidden" not in out.stdout + out.stderr
    gang = f"{tenant.namespace}/big"
    first = out.stdout.splitlines()[0]
    assert first == f"pod {tenant.namespace}/{waiting[1]} belongs to gang {gang}", out.stdout
    assert f"gang {gang}" in out.stdout
    assert f"queue        {tenant.queue}" in out.stdout
    unseen = next(ln for ln in out.stdout.splitlines() if ln.startswith("not visible to you: "))
    assert "nodes (forbidden)" in unseen
    assert f"pods outside namespace {tenant.namespace} (forbidden)" in unseen
    said = unschedulable_message(tenant.pods()[waiting[0]])
    assert f"the running scheduler last said: {said}" in out.stdout


def test_an_operator_with_the_viewer_role_gets_a_fresh_decision(
        control_plane: ControlPlane, tenant: Tenant, waiting: list[str], tmp_path: Path) -> None:
    _bind(control_plane, tenant.namespace, "sre", "gang-scheduler-viewer", cluster_wide=True)
    sre = control_plane.service_account_kubeconfig(tenant.namespace, "sre")
    out = _explain(sre, tenant, f"{tenant.namespace}/big", tmp_path)
    assert out.returncode == 0, out.stderr
    assert "not visible to you" not in out.stdout
    assert "state        pending: Placement" in out.stdout, out.stdout
    assert "cluster free now:" in out.stdout
