"""``deploy/`` proven on a real control plane: the manifests apply with the real
``kubectl apply -k``, and the scheduler, running as the deploy/ ServiceAccount with the
ConfigMap's configuration (leader election on), schedules, explains and preempts gangs with
exactly the deploy/ RBAC, while that identity cannot read Secrets or create pods.

Setup (module fixture ``deployed``, tests/e2e/test_deploy_support.py): a dev cluster of its
own, the pre-installed CRDs deleted, ``kubectl apply -k deploy/`` then ``-k deploy/queues``, the
a100/h100 pools of scheduler/examples/clusters/dev.yaml, and ``gang-scheduler run``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from scheduler.kube.client import connect
from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import PODGROUP_GROUP, PODGROUP_VERSION, wait_for
from tests.e2e.test_deploy_support import (
    REPO,
    SA_NAME,
    SYSTEM_NS,
    Deployed,
    deployed,  # noqa: F401  (module fixture)
    kubectl,
    kubectl_json,
)

pytestmark = pytest.mark.e2e

GPU = "nvidia.com/gpu"
QUEUES = ("gangscheduler.io", "v1alpha1", "queues")


def rendered(env: Deployed, path: str) -> list[dict]:
    """The objects ``kubectl kustomize <path>`` renders."""
    out = env.kubectl("kustomize", str(REPO / path)).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def applied_lines(out: str) -> dict[str, str]:
    """``kind.group/name created`` lines of ``kubectl apply`` -> {"kind.group/name": verb}."""
    lines = (re.fullmatch(r"(\S+) (created|configured|unchanged)", ln.strip())
             for ln in out.splitlines() if ln.strip())
    return {m.group(1): m.group(2) for m in lines if m}


def resource_versions(env: Deployed) -> dict[str, str]:
    """``kind/namespace/name`` -> resourceVersion of every object ``deploy/`` renders."""
    out = env.kubectl("get", "-k", str(REPO / "deploy"), "-o", "json").stdout
    items = json.loads(out).get("items") or [json.loads(out)]
    return {f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}":
            o["metadata"]["resourceVersion"] for o in items}


def test_every_manifest_applies_cleanly_with_kubectl(deployed: Deployed) -> None:  # noqa: F811
    base, queues = deployed.applied["base"], deployed.applied["queues"]
    objects = rendered(deployed, "deploy")
    base_lines = applied_lines(base.stdout)
    assert len(base_lines) == len(objects) == len(base.stdout.strip().splitlines()), base.stdout
    assert set(base_lines.values()) == {"created"}, base.stdout
    assert base.stderr.strip() == "", base.stderr  # not even a warning
    assert set(applied_lines(queues.stdout).values()) == {"created"}, queues.stdout
    assert queues.stderr.strip() == "", queues.stderr
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert ("Deployment", "gang-scheduler") in kinds and ("ClusterRole", "gang-scheduler") in kinds
    # A second apply changes nothing on the server (same resourceVersions). kubectl still
    # prints "configured" for the PriorityClasses (the server omits `globalDefault: false`,
    # so the three-way merge re-sends it) and the PodDisruptionBudget (its selector is sent
    # again); both patches are no-ops, which is what this checks.
    before = resource_versions(deployed)
    again = deployed.kubectl("apply", "-k", str(REPO / "deploy"))
    assert set(applied_lines(again.stdout).values()) <= {"unchanged", "configured"}, again.stdout
    assert resource_versions(deployed) == before
    names = {q["metadata"]["name"] for q in kubectl_json(deployed.admin, "get", "queues")["items"]}
    assert names == {"default", "research", "team-a", "team-b"}
    # The queues are valid as the scheduler reads them.
    wait_for(lambda: all(c.get("status") == "True"
                         for q in kubectl_json(deployed.admin, "get", "queues")["items"]
                         for c in (q.get("status") or {}).get("conditions", [{}])
                         if c.get("type") == "Valid")
             and all((q.get("status") or {}).get("conditions")
                     for q in kubectl_json(deployed.admin, "get", "queues")["items"]),
             30, what="every Queue Valid=True")


def test_monitoring_renders_the_expected_objects(deployed: Deployed) -> None:  # noqa: F811
    """Applying it needs the Prometheus operator's CRDs, which this cluster does not have."""
    objects = rendered(deployed, "deploy/monitoring")
    kinds = sorted((o["apiVersion"], o["kind"]) for o in objects)
    assert kinds == [("monitoring.coreos.com/v1", "PrometheusRule"),
                     ("monitoring.coreos.com/v1", "ServiceMonitor"),
                     ("v1", "ConfigMap")]
    dashboard = next(o for o in objects if o["kind"] == "ConfigMap")
    assert dashboard["metadata"]["namespace"] == SYSTEM_NS
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["grafana-dashboard.json"])["panels"]
    # The ConfigMap alone does not need the operator: the server accepts it (dry run).
    cm = deployed.kubectl("apply", "--dry-run=server", "-f", "-",
                          stdin=json.dumps(dashboard))
    assert "created (server dry run)" in cm.stdout, cm.stdout


def test_the_webhook_applies_and_its_certificate_renders(deployed: Deployed) -> None:  # noqa: F811
    """``kubectl apply -k deploy/webhook``: the server takes the Service and both webhook
    configurations. cert-manager's Issuer and Certificate need its CRDs, which this cluster
    does not have: rendered only. No namespace is opted in here, so nothing calls the webhook
    (whose Service has no endpoints: the scheduler runs outside the cluster); removed after."""
    applied = deployed.kubectl("apply", "-k", str(REPO / "deploy" / "webhook"))
    try:
        assert set(applied_lines(applied.stdout).values()) == {"created"}, applied.stdout
        assert applied.stderr.strip() == "", applied.stderr
        hook = kubectl_json(deployed.admin, "get", "mutatingwebhookconfiguration",
                            "gang-scheduler-defaults")["webhooks"][0]
        assert hook["clientConfig"]["service"]["name"] == "gang-scheduler-webhook"
        assert hook["namespaceSelector"] == {"matchLabels": {"gangscheduler.io/defaults":
                                                             "enabled"}}
        kinds = sorted(o["kind"] for o in rendered(deployed, "deploy/webhook/cert-manager"))
        assert kinds == ["Certificate", "Issuer"]
    finally:
        deployed.kubectl("delete", "-k", str(REPO / "deploy" / "webhook"))


def _gang(env: Deployed, ns: str, name: str, size: int, gpus: int, pool: str,
          queue: str | None = None, priority: str = "gang-normal") -> list[str]:
    labels = {"gangscheduler.io/queue": queue} if queue else {}
    objs: list[dict] = [{
        "apiVersion": f"{PODGROUP_GROUP}/{PODGROUP_VERSION}", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"minMember": size}}]
    pods = [f"{name}-{i}" for i in range(size)]
    for pod in pods:
        objs.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": pod, "namespace": ns,
            "labels": {**labels, "scheduling.x-k8s.io/pod-group": name}},
            "spec": {"schedulerName": "gang-scheduler", "priorityClassName": priority,
                     "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "nodeSelector": {"gangscheduler.io/pool": pool},
                     "containers": [{"name": "main", "image": "registry.invalid/train:1",
                                     "resources": {"requests": {"cpu": "1", GPU: str(gpus)},
                                                   "limits": {GPU: str(gpus)}}}]}})
    env.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                      "items": objs}))
    return pods


def _pods(env: Deployed, ns: str) -> dict[str, dict]:
    return {p["metadata"]["name"]: p
            for p in kubectl_json(env.admin, "-n", ns, "get", "pods")["items"]}


def _bound(env: Deployed, ns: str, names: list[str]) -> list[str]:
    pods = _pods(env, ns)
    return sorted(n for n in names if n in pods and pods[n]["spec"].get("nodeName"))


def test_the_service_account_schedules_with_exactly_the_deploy_rbac(
        deployed: Deployed) -> None:  # noqa: F811
    env, cp = deployed, deployed.cp
    env.kubectl("create", "namespace", "team-a")
    # A gang of team-a that fits, and one that its queue can never cover (a100: 8 + 8 borrowed).
    fits = _gang(env, "team-a", "fits", 4, 2, "a100", queue="team-a")
    too_big = _gang(env, "team-a", "too-big", 3, 8, "a100", queue="team-a")
    wait_for(lambda: _bound(env, "team-a", fits) == fits, 60, what="gang 'fits' bound")
    nodes = {p["spec"]["nodeName"] for n, p in _pods(env, "team-a").items() if n in fits}
    assert nodes and all(n.startswith("a100-") for n in nodes)
    wait_for(lambda: all(p["status"].get("phase") == "Running"
                         for n, p in _pods(env, "team-a").items() if n in fits), 30,
             what="kwok ran the gang")
    # PodGroup status (podgroups/status), Scheduled and FailedScheduling events, the pending
    # reason on the pods (pods/status), Queue status (queues/status): all written.
    group = wait_for(lambda: cp.get_pod_group("team-a", "fits")
                     if (cp.get_pod_group("team-a", "fits").get("status") or {})
                     .get("scheduled") == 4 else None, 30, what="PodGroup status")
    assert group is not None
    assert group["status"]["phase"] in ("Scheduled", "Running"), group["status"]
    reasons = wait_for(lambda: (r := {e["reason"] for e in kubectl_json(
        env.admin, "-n", "team-a", "get", "events.v1.events.k8s.io")["items"]})
        >= {"Scheduled", "FailedScheduling"} and r, 60, what="Scheduled and FailedScheduling")
    assert reasons
    # The pod's condition is a write of its own, in no fixed order with the events.
    def pending_condition() -> dict[str, Any]:
        pod = _pods(env, "team-a")[too_big[0]]
        return next((c for c in pod["status"].get("conditions") or ()
                     if c["type"] == "PodScheduled"), {})

    cond = wait_for(pending_condition, 30, what=f"PodScheduled on {too_big[0]}")
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable" and cond["message"]
    assert _bound(env, "team-a", too_big) == []
    # Queue status is written at most every few seconds: wait for both figures together.
    team_a = wait_for(lambda: (q := rest.call(cp.custom.get_cluster_custom_object, *QUEUES,
                                              "team-a")).get("status", {}).get("allocatedGPUs")
                      == 8 and q["status"].get("pendingGangs") == 1 and q, 30,
                      what="team-a Queue status: 8 GPUs allocated, 1 gang pending")
    assert team_a["status"]["admittedGangs"] == 1
    # Leader election used the namespaced Role: the Lease exists and names this scheduler.
    lease = kubectl_json(env.admin, "-n", SYSTEM_NS, "get", "lease", "gang-scheduler")
    assert lease["spec"]["holderIdentity"] == "e2e-deploy"
    # The leader fence of deploy/ was in force: the binds carried this term's stamp, which
    # the apiserver copied onto the pods (leader-fence-policy.yaml checked it).
    stamp = _pods(env, "team-a")[fits[0]]["metadata"]["annotations"]
    assert (stamp["gangscheduler.io/leader"], stamp["gangscheduler.io/leader-term"],
            stamp["gangscheduler.io/leader-lease"]) == (
        "e2e-deploy", str(lease["spec"].get("leaseTransitions") or 0),
        f"{SYSTEM_NS}/gang-scheduler")

    # Preemption through the Eviction API (pods/eviction): the default queue (a100: 8 GPUs,
    # withinQueue LowerPriority, no minimum runtime) takes a low gang's quota for a high one.
    env.kubectl("create", "namespace", "rbac-default")
    low = _gang(env, "rbac-default", "low", 1, 8, "a100", priority="gang-low")
    wait_for(lambda: _bound(env, "rbac-default", low) == low, 60, what="low gang bound")
    high = _gang(env, "rbac-default", "high", 2, 4, "a100", priority="gang-high")
    wait_for(lambda: _bound(env, "rbac-default", high) == high, 90, what="high gang bound")
    # The victim's exit freed its GPUs; the pod object goes a moment later.
    wait_for(lambda: "low-0" not in _pods(env, "rbac-default"), 60, what="the victim gone")
    preempted = wait_for(lambda: [e for e in kubectl_json(env.admin, "-n", "rbac-default", "get",
                                                          "events.v1.events.k8s.io")["items"]
                                  if e["reason"] == "Preempted"], 30, what="a Preempted event")
    assert "rbac-default/high" in preempted[0]["note"], preempted

    log = env.log()
    assert '"event": "leading"' in log, log[-2000:]
    assert not re.search(r"\b403\b|forbidden", log, re.IGNORECASE), \
        [ln for ln in log.splitlines() if re.search(r"403|forbidden", ln, re.IGNORECASE)][:5]


@pytest.mark.parametrize(("verb", "resource", "namespace", "allowed"), [
    ("get", "secrets", SYSTEM_NS, False),
    ("list", "secrets", None, False),
    ("create", "pods", "team-a", False),
    ("update", "pods", "team-a", False),
    ("patch", "nodes", None, False),
    ("get", "configmaps", SYSTEM_NS, False),
    ("create", "leases.coordination.k8s.io", "kube-system", False),
    ("create", "pods/binding", "team-a", True),
    ("create", "pods/eviction", "team-a", True),
    ("patch", "pods/status", "team-a", True),
    ("delete", "pods", "team-a", True),
    ("watch", "pods", None, True),
    ("update", "leases.coordination.k8s.io", SYSTEM_NS, True),
    ("patch", "queues.gangscheduler.io/status", None, True),
    ("update", "queues.gangscheduler.io", None, False),
])
def test_what_the_identity_may_and_may_not_do(deployed: Deployed, verb: str,  # noqa: F811
                                              resource: str, namespace: str | None,
                                              allowed: bool) -> None:
    scope = ["-n", namespace] if namespace else ["--all-namespaces"]
    kind, _, sub = resource.partition("/")  # `can-i create pods/binding` would name a pod
    extra = ["--subresource", sub] if sub else []
    out = kubectl(deployed.sa_kubeconfig, "auth", "can-i", verb, kind, *extra, *scope,
                  check=False)
    assert out.stdout.strip() == ("yes" if allowed else "no"), (out.stdout, out.stderr)


def test_direct_requests_outside_the_role_are_forbidden(deployed: Deployed) -> None:  # noqa: F811
    sa = connect(str(deployed.sa_kubeconfig))
    try:
        assert sa.request("GET", f"/api/v1/namespaces/{SYSTEM_NS}/secrets").status == 403
        assert sa.request("GET", "/api/v1/secrets").status == 403
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sneaky"},
               "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        assert sa.request("POST", f"/api/v1/namespaces/{SYSTEM_NS}/pods", body=pod).status == 403
        # ...while what it needs works with the same token.
        assert sa.request("GET", "/api/v1/nodes").status == 200
    finally:
        sa.close()
    whoami = kubectl_json(deployed.sa_kubeconfig, "auth", "whoami")
    assert whoami["status"]["userInfo"]["username"] == \
        f"system:serviceaccount:{SYSTEM_NS}:{SA_NAME}"


def test_the_scheduler_runs_as_a_non_admin(deployed: Deployed) -> None:  # noqa: F811
    """Guard against a vacuous pass: the token is not in system:masters."""
    out = kubectl(deployed.sa_kubeconfig, "auth", "can-i", "*", "*", "--all-namespaces",
                  check=False)
    assert out.stdout.strip() == "no"


def test_kubectl_is_built_from_the_pinned_module(deployed: Deployed) -> None:  # noqa: F811
    """The kubectl these tests apply with is the apiserver's own release (version-stamped)."""
    from scheduler.tools.devcluster import build

    version = kubectl_json(deployed.admin, "version")
    assert version["clientVersion"]["gitVersion"] == build.KUBECTL.version
    assert version["serverVersion"]["gitVersion"] == build.KUBE_APISERVER.version
    assert build.kubectl_path().parent.name == f"kubectl-{build.KUBECTL.version}"
