"""The Helm chart proven on a real control plane: ``helm install`` on a cluster that already has
a scheduler-plugins PodGroup CRD, then the scheduler, running as the chart's ServiceAccount
with the chart's ConfigMap (leader election on its Lease), schedules a gang of the chart's
example queues.

Why not the chart's Deployment: the dev cluster has no kubelet that runs containers (its nodes
are fake), so, as for deploy/ (test_deploy_install.py), ``gang-scheduler run`` runs here with
exactly what the Deployment would mount and be granted.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from scheduler.tools.devcluster import build
from tests.e2e.cluster_api import wait_for
from tests.e2e.test_deploy_support import REPO, SYSTEM_NS, Deployed, installed, kubectl_json

pytestmark = pytest.mark.e2e

CHART = REPO / "deploy" / "helm" / "gang-scheduler"
RELEASE = "gang-scheduler"
PODGROUP_CRD = "podgroups.scheduling.x-k8s.io"


class HelmInstalled(Deployed):
    """A dev cluster with the chart installed by helm instead of ``kubectl apply -k``."""

    def helm(self, *args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(build.HELM.binary()), "--kubeconfig", str(self.admin),
                               *args], capture_output=True, text=True, timeout=180, check=False)
        if proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} exited {proc.returncode}\n"
                                 f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc

    def install(self) -> None:
        # What the coscheduling plugin's install leaves behind: its own PodGroup CRD.
        self.kubectl("apply", "-f", str(REPO / "deploy" / "crds" /
                                        "scheduling.x-k8s.io_podgroups.yaml"))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{PODGROUP_CRD}")
        self.applied["crd-before"] = self.kubectl("get", "crd", PODGROUP_CRD, "-o", "json")
        self.applied["helm"] = self.helm(
            "install", RELEASE, str(CHART), "--namespace", SYSTEM_NS, "--create-namespace",
            "--set", "queues.create=true")


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HelmInstalled]:
    yield from installed(tmp_path_factory, HelmInstalled, "helm")


def test_helm_install_keeps_an_existing_podgroup_crd(chart: HelmInstalled) -> None:
    before = json.loads(chart.applied["crd-before"].stdout)
    after = kubectl_json(chart.admin, "get", "crd", PODGROUP_CRD)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert "app.kubernetes.io/managed-by" not in (after["metadata"].get("labels") or {})
    # The Queue CRD was installed from the chart's crds/ directory.
    queues = kubectl_json(chart.admin, "get", "crd", "queues.gangscheduler.io")
    assert queues["spec"]["group"] == "gangscheduler.io"
    status = json.loads(chart.helm("status", RELEASE, "-n", SYSTEM_NS, "-o", "json").stdout)
    assert status["info"]["status"] == "deployed"


def test_the_chart_installs_what_deploy_does(chart: HelmInstalled) -> None:
    manifest = chart.helm("get", "manifest", RELEASE, "-n", SYSTEM_NS).stdout
    kinds = {line.split(":", 1)[1].strip() for line in manifest.splitlines()
             if line.startswith("kind:")}
    assert kinds == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                     "RoleBinding", "ConfigMap", "Deployment", "PodDisruptionBudget",
                     "Service", "PriorityClass", "Queue", "ValidatingAdmissionPolicy",
                     "ValidatingAdmissionPolicyBinding"}
    deployment = kubectl_json(chart.admin, "-n", SYSTEM_NS, "get", "deployment", RELEASE)
    assert deployment["spec"]["replicas"] == 2
    names = {q["metadata"]["name"] for q in kubectl_json(chart.admin, "get", "queues")["items"]}
    assert names == {"default", "research", "team-a", "team-b"}


def test_the_installed_scheduler_schedules_a_gang(chart: HelmInstalled) -> None:
    env = chart
    env.kubectl("create", "namespace", "team-b")
    pods = [f"train-{i}" for i in range(2)]
    objs: list[dict] = [{
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "team-b",
                     "labels": {"gangscheduler.io/queue": "team-b"}},
        "spec": {"minMember": 2}}]
    objs += [{"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": pod, "namespace": "team-b",
        "labels": {"gangscheduler.io/queue": "team-b", "scheduling.x-k8s.io/pod-group": "train"}},
        "spec": {"schedulerName": "gang-scheduler", "priorityClassName": "gang-normal",
                 "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                 "nodeSelector": {"gangscheduler.io/pool": "h100"},
                 "containers": [{"name": "main", "image": "registry.invalid/train:1",
                                 "resources": {"requests": {"nvidia.com/gpu": "8"},
                                               "limits": {"nvidia.com/gpu": "8"}}}]}}
             for pod in pods]
    env.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                      "items": objs}))

    def bound() -> list[str]:
        items = kubectl_json(env.admin, "-n", "team-b", "get", "pods")["items"]
        return sorted(p["metadata"]["name"] for p in items if p["spec"].get("nodeName"))

    wait_for(lambda: bound() == pods, 60, what="the gang bound by the helm-installed scheduler")
    lease = kubectl_json(env.admin, "-n", SYSTEM_NS, "get", "lease", "gang-scheduler")
    assert lease["spec"]["holderIdentity"] == "e2e-deploy"
    team_b = wait_for(lambda: (q := kubectl_json(env.admin, "get", "queue", "team-b"))
                      .get("status", {}).get("allocatedGPUs") == 16 and q, 30,
                      what="team-b Queue status: 16 GPUs allocated")
    assert team_b["status"]["admittedGangs"] == 1


def test_webhook_enabled_the_apiserver_takes_its_objects_and_an_upgrade_keeps_the_certificate(
        chart: HelmInstalled) -> None:
    """``webhook.enabled``: the apiserver accepts the chart's Secret and webhook configurations
    (the CA the chart made in each ``caBundle``), and an upgrade keeps the certificate (read
    back with ``lookup``, which ``helm template`` cannot show) so the pair stays valid. No
    namespace is opted in here (nothing would answer at the Service), and the webhook is
    switched off again for the tests after this one."""
    def upgrade(enabled: str) -> None:
        chart.helm("upgrade", RELEASE, str(CHART), "-n", SYSTEM_NS, "--reuse-values",
                   "--set", f"webhook.enabled={enabled}")

    def secret() -> dict[str, str]:
        found = kubectl_json(chart.admin, "-n", SYSTEM_NS, "get", "secret",
                             "gang-scheduler-webhook-tls")
        return dict(found["data"])

    upgrade("true")
    try:
        first = secret()
        for kind, name in (("mutatingwebhookconfiguration", "gang-scheduler-defaults"),
                           ("validatingwebhookconfiguration", "gang-scheduler-annotations")):
            (hook,) = kubectl_json(chart.admin, "get", kind, name)["webhooks"]
            assert hook["clientConfig"]["caBundle"] == first["ca.crt"]
            assert hook["namespaceSelector"] == {
                "matchLabels": {"gangscheduler.io/defaults": "enabled"}}
        upgrade("true")
        assert secret() == first
    finally:
        upgrade("false")
