"""The Helm chart (deploy/helm/gang-scheduler) checked with the real helm, without a cluster.

What the chart must be: the same install as ``kubectl apply -k deploy/`` with its default
values (every object rendered and compared with the deploy/ manifest it mirrors, Helm's own
labels aside), the same queues and monitoring when those are switched on, and values that
are refused with the key named when they are wrong. ``helm install`` on a real apiserver is
tests/e2e/test_helm_install.py.

helm is built from its Go module (hack/helm) like the control plane's binaries: CI's
``gang-scheduler dev-cluster build`` builds it; without it these tests skip.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.run.config import SchedulerConfig, load_config
from scheduler.tools.devcluster import build

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CHART = DEPLOY / "helm" / "gang-scheduler"
NAMESPACE = "gang-scheduler-system"
HELM_LABELS = ("app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart")

pytestmark = pytest.mark.skipif(not build.HELM.binary().is_file(),
                                reason="helm not built: run `gang-scheduler dev-cluster build`")


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(build.HELM.binary()), *args], capture_output=True, text=True,
                          timeout=120, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} exited {proc.returncode}\n{proc.stderr}")
    return proc


def render(*sets: str, namespace: str = NAMESPACE, crds: bool = False) -> list[dict[str, Any]]:
    """``helm template`` with ``--set`` *sets*: the objects it renders."""
    args = ["template", "gang-scheduler", str(CHART), "--namespace", namespace]
    args += ["--include-crds"] if crds else []
    for s in sets:
        args += ["--set", s]
    return [d for d in yaml.safe_load_all(helm(*args).stdout) if d]


def deploy_objects(*paths: str) -> list[dict[str, Any]]:
    out = []
    for rel in paths:
        path = DEPLOY / rel
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        for f in files:
            if f.name != "kustomization.yaml":
                out += [d for d in yaml.safe_load_all(f.read_text()) if d]
    return out


def key(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def without_helm(obj: dict[str, Any]) -> dict[str, Any]:
    """*obj* less its labels (compared by ``same``) and the pods' config checksum."""
    obj = json.loads(json.dumps(obj))
    obj["metadata"].pop("labels", None)
    if obj["kind"] == "Deployment":
        annotations = obj["spec"]["template"]["metadata"].pop("annotations", {})
        assert set(annotations) <= {"checksum/config"}
    if obj["kind"] == "ConfigMap" and "config.yaml" in obj["data"]:
        obj["data"]["config.yaml"] = "compared parsed, below"
    return obj


def same(chart: dict[str, Any], deploy: dict[str, Any]) -> None:
    """The chart's object is deploy/'s, with Helm's labels added to its own."""
    assert without_helm(chart) == without_helm(deploy), key(deploy)
    labels = dict(chart["metadata"].get("labels") or {})
    for label in HELM_LABELS:
        assert labels.pop(label), (key(chart), label)
    assert labels.items() >= (deploy["metadata"].get("labels") or {}).items(), key(deploy)


def config_of(objs: Sequence[dict[str, Any]], tmp_path: Path) -> SchedulerConfig:
    cm = next(o for o in objs if key(o) == ("ConfigMap", "gang-scheduler-config"))
    path = tmp_path / "config.yaml"
    path.write_text(cm["data"]["config.yaml"])
    return load_config(path)


BASE = ["serviceaccount.yaml", "clusterrole.yaml", "clusterrolebinding.yaml", "role.yaml",
        "rolebinding.yaml", "configmap.yaml", "deployment.yaml", "poddisruptionbudget.yaml",
        "service.yaml", "priorityclasses.yaml", "leader-fence-policy.yaml",
        "leader-fence-binding.yaml"]


def test_lint_is_clean_with_defaults_and_with_every_option() -> None:
    for sets in ([], ["queues.create=true", "monitoring.serviceMonitor.enabled=true",
                      "monitoring.prometheusRule.enabled=true",
                      "monitoring.grafanaDashboard.enabled=true", "webhook.enabled=true"],
                 ["webhook.enabled=true", "webhook.certificate.source=cert-manager"]):
        args = [f"--set={s}" for s in sets]
        out = helm("lint", "--strict", str(CHART), "--namespace", NAMESPACE, *args)
        assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout, out.stdout


def test_defaults_render_what_kubectl_apply_k_deploy_installs(tmp_path: Path) -> None:
    chart = {key(o): o for o in render("users.create=false")}
    deploy = {key(o): o for o in deploy_objects(*BASE)}
    assert set(chart) == set(deploy)
    for k, want in deploy.items():
        same(chart[k], want)
    # The config: the same file as the ConfigMap's once parsed (comments differ).
    assert config_of(list(chart.values()), tmp_path) == config_of(list(deploy.values()),
                                                                  tmp_path)


def test_crds_are_deploys_byte_for_byte() -> None:
    for crd in sorted((DEPLOY / "crds").glob("*.yaml")):
        assert (CHART / "crds" / crd.name).read_bytes() == crd.read_bytes(), crd.name
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == \
        sorted(p.name for p in (DEPLOY / "crds").iterdir())
    kinds = [o["kind"] for o in render(crds=True)]
    assert kinds.count("CustomResourceDefinition") == 2


def test_users_option_installs_deploy_users() -> None:
    chart = {key(o): o for o in render() if "gang-scheduler-" in o["metadata"]["name"]
             and o["kind"] in ("ClusterRole", "ClusterRoleBinding")}
    deploy = {key(o): o for o in deploy_objects("users")}
    assert set(chart) == set(deploy) and len(deploy) == 5
    for k, want in deploy.items():
        same(chart[k], want)
    for f in (DEPLOY / "users").glob("*.yaml"):
        if f.name != "kustomization.yaml":
            assert (CHART / "files" / "users" / f.name).read_bytes() == f.read_bytes(), f.name
    assert not [o for o in render("users.create=false") if o["kind"] == "ClusterRoleBinding"
                and o["metadata"]["name"] != "gang-scheduler"]


def test_queues_option_installs_deploy_queues() -> None:
    assert not [o for o in render() if o["kind"] == "Queue"]  # off by default
    chart = {key(o): o for o in render("queues.create=true") if o["kind"] == "Queue"}
    deploy = {key(o): o for o in deploy_objects("queues")}
    assert set(chart) == set(deploy) == {("Queue", n) for n in
                                         ("default", "research", "team-a", "team-b")}
    for k, want in deploy.items():
        same(chart[k], want)


def test_monitoring_options_install_deploy_monitoring() -> None:
    assert {o["kind"] for o in render()} & {"ServiceMonitor", "PrometheusRule"} == set()
    chart = {o["kind"]: o for o in render("monitoring.serviceMonitor.enabled=true",
                                          "monitoring.prometheusRule.enabled=true",
                                          "monitoring.grafanaDashboard.enabled=true")
             if o["kind"] in ("ServiceMonitor", "PrometheusRule")
             or key(o) == ("ConfigMap", "gang-scheduler-grafana-dashboard")}
    deploy = {o["kind"]: o for o in deploy_objects("monitoring")}
    for kind in ("ServiceMonitor", "PrometheusRule"):
        same(chart[kind], deploy[kind])
    dashboard = chart["ConfigMap"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = (DEPLOY / "monitoring" / "grafana-dashboard.json").read_text()
    assert json.loads(dashboard["data"]["grafana-dashboard.json"]) == json.loads(shipped)
    assert (CHART / "files" / "grafana-dashboard.json").read_text() == shipped
    # Labels a Prometheus selects on are added where asked for.
    labelled = render("monitoring.serviceMonitor.enabled=true",
                      "monitoring.serviceMonitor.labels.release=kps")
    monitor = next(o for o in labelled if o["kind"] == "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kps"


def _webhook_objects(*sets: str) -> dict[tuple[str, str], dict[str, Any]]:
    kinds = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Issuer",
             "Certificate", "Secret")
    return {key(o): o for o in render(*sets) if o["kind"] in kinds
            or key(o) == ("Service", "gang-scheduler-webhook")}


def _without_ca(obj: dict[str, Any]) -> dict[str, Any]:
    """*obj* less what differs by where the CA comes from (cert-manager's annotation, the
    chart's own caBundle)."""
    obj = json.loads(json.dumps(obj))
    obj["metadata"].pop("annotations", None)
    for hook in obj.get("webhooks", []):
        hook["clientConfig"].pop("caBundle", None)
    return obj


def test_webhook_option_installs_deploy_webhook_with_a_certificate_it_makes(
        tmp_path: Path) -> None:
    from cryptography import x509

    assert _webhook_objects() == {}  # off by default
    objs = render("webhook.enabled=true")
    chart = _webhook_objects("webhook.enabled=true")
    deploy = {key(o): o for o in deploy_objects("webhook")}
    assert set(chart) == set(deploy) | {("Secret", "gang-scheduler-webhook-tls")}
    for k, want in deploy.items():
        same(_without_ca(chart[k]), _without_ca(want))
    # The Secret's certificate names the Service and is signed by the CA the apiserver is told.
    secret = chart[("Secret", "gang-scheduler-webhook-tls")]["data"]
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["tls.crt"]))
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["ca.crt"]))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "gang-scheduler-webhook.gang-scheduler-system.svc" in names.get_values_for_type(
        x509.DNSName)
    cert.verify_directly_issued_by(ca)
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (hook,) = next(o for k, o in chart.items() if k[0] == kind)["webhooks"]
        assert hook["clientConfig"]["caBundle"] == secret["ca.crt"]
    config = config_of(objs, tmp_path)
    assert config.webhook.enabled and config.webhook.bind_address == "0.0.0.0:9443"


def test_webhook_with_cert_manager_installs_deploy_webhook() -> None:
    chart = _webhook_objects("webhook.enabled=true", "webhook.certificate.source=cert-manager")
    deploy = {key(o): o for o in deploy_objects("webhook", "webhook/cert-manager")}
    assert set(chart) == set(deploy)
    for k, want in deploy.items():
        same(chart[k], want)


def test_another_namespace_moves_every_namespaced_object_and_the_lease(tmp_path: Path) -> None:
    objs = render("queues.create=true", namespace="batch-system")
    for obj in objs:
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding", "PriorityClass", "Queue",
                           "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
            assert "namespace" not in obj["metadata"], key(obj)
        else:
            assert obj["metadata"]["namespace"] == "batch-system", key(obj)
    binding = next(o for o in objs if o["kind"] == "ClusterRoleBinding")
    assert binding["subjects"][0]["namespace"] == "batch-system"
    assert config_of(objs, tmp_path).leader_election.lease_namespace == "batch-system"


def test_the_leader_fence_follows_the_lease_and_goes_with_leader_election() -> None:
    """The admission policy's parameter is the Lease the scheduler is configured with; with
    leader election off nothing is stamped, so the chart installs no fence."""
    objs = render("config.leaderElection.leaseName=sched-lease", namespace="batch-system")
    binding = next(o for o in objs if o["kind"] == "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["paramRef"] == {"name": "sched-lease", "namespace": "batch-system",
                                           "parameterNotFoundAction": "Allow"}
    off = render("config.leaderElection.enabled=false", "replicaCount=1")
    assert not [o for o in off if o["kind"].startswith("ValidatingAdmissionPolicy")]


def test_values_reach_the_config_and_the_pods(tmp_path: Path) -> None:
    objs = render("config.logLevel=debug", "metrics.port=9090", "image.tag=1.2.3",
                  "image.repository=registry.example/gs", "replicaCount=1",
                  "config.leaderElection.enabled=false")
    config = config_of(objs, tmp_path)
    assert config.log_level == "debug" and config.metrics_bind_address == "0.0.0.0:9090"
    assert not config.leader_election.enabled
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 1
    assert pod["containers"][0]["image"] == "registry.example/gs:1.2.3"
    assert pod["containers"][0]["ports"][0]["containerPort"] == 9090
    service = next(o for o in objs if o["kind"] == "Service")
    assert service["spec"]["ports"][0]["port"] == 9090
    # One replica: no PodDisruptionBudget, which would block every drain of its node.
    assert not [o for o in objs if o["kind"] == "PodDisruptionBudget"]


def test_a_config_change_rolls_the_pods() -> None:
    def checksum(*sets: str) -> str:
        deployment = next(o for o in render(*sets) if o["kind"] == "Deployment")
        return str(deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum() == checksum("image.tag=0.1.0")
    assert checksum() != checksum("config.logLevel=debug")


@pytest.mark.parametrize(("sets", "message"), [
    (["replicaCount=0"], "replicaCount"),
    (["config.cycleIntervalSecond=1"], "cycleIntervalSecond"),
    (["config.logLevel=loud"], "logLevel"),
    (["metrics.port=70000"], "port"),
    (["config.metricsBindAddress=0.0.0.0:1"], "'metricsBindAddress' not allowed"),
    (["config.leaderElection.leaseNamespace=x"], "'leaseNamespace' not allowed"),
    (["config.pricing.gpuHour.a100=-1"], "/config/pricing/gpuHour/a100"),
    (["config.pricing.currency=dollars"], "/config/pricing/currency"),
    (["config.leaderElection.enabled=false"], "replicaCount: 2 replicas need"),
    (["queues.create=true", "queues.items[0].spec.weight=1"], "name"),
    (["config.webhook.enabled=true"], "'webhook' not allowed"),
    (["webhook.certificate.source=vault"], "/webhook/certificate/source"),
    (["webhook.failurePolicy=Sometimes"], "/webhook/failurePolicy"),
])
def test_bad_values_are_refused_naming_the_key(sets: list[str], message: str) -> None:
    args = ["template", "gang-scheduler", str(CHART)]
    for s in sets:
        args += ["--set", s]
    proc = helm(*args, check=False)
    assert proc.returncode != 0, proc.stdout[:500]
    assert message in proc.stderr, proc.stderr


def test_the_values_schema_knows_every_config_field_the_chart_does_not_own() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    config = schema["properties"]["config"]["properties"]
    fields = {f.split("_")[0] + "".join(w.title() for w in f.split("_")[1:])
              for f in SchedulerConfig.__dataclass_fields__}
    assert set(config) == fields - {"metricsBindAddress", "webhook"}  # the chart owns those
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert set(values["config"]) <= set(config)
