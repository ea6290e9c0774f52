"""The install manifests (deploy/) and examples/ checked without a cluster.

What a typo in a manifest would otherwise only show on a real cluster: files that do not parse
or are not listed in their kustomization, RBAC wider or narrower than the scheduler needs, a
Deployment without its hardening, a config the scheduler refuses, Queues the policy parser or
the CRD schema refuses, and dashboards or alerts on metrics that do not exist. The proof on a
real apiserver is the e2e suite's job.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies import parsing, queues
from policies.validation import read_files
from scheduler.decide.plan import ReasonCategory
from scheduler.feed.grouping import GangSet, GroupingConfig, build_gangs
from scheduler.kube.read import convert
from scheduler.model.durations import parse_duration
from scheduler.model.resources import parse_quantity
from scheduler.run.config import load_config
from scheduler.run.metrics import SchedulerMetrics
from scheduler.world import clusterspec

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
EXAMPLES = ROOT / "examples"
NAMESPACE = "gang-scheduler-system"
OWNED_ELSEWHERE = {DEPLOY / "crds" / "scheduling.x-k8s.io_podgroups.yaml"}
#: The Helm chart: Go templates, not manifests (tests/unit/test_helm_chart.py checks it).
HELM = DEPLOY / "helm"
GPU = "nvidia.com/gpu"


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def kustomize_files(pattern: str) -> list[Path]:
    """Files under deploy/ matching *pattern*, outside the Helm chart."""
    return [p for p in DEPLOY.rglob(pattern) if not p.is_relative_to(HELM)]


def manifest_files() -> list[Path]:
    files = [*kustomize_files("*.yaml"), *EXAMPLES.rglob("*.yaml")]
    return sorted(p for p in files if p.name != "kustomization.yaml")


def objects(*paths: Path) -> Iterator[dict[str, Any]]:
    for path in paths:
        yield from docs(path)


def one(kind: str, name: str | None = None, where: Path = DEPLOY) -> dict[str, Any]:
    found = [o for p in sorted(where.glob("*.yaml")) if p.name != "kustomization.yaml"
             for o in docs(p) if o["kind"] == kind
             and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''} in {where}, found {len(found)}"
    return found[0]


# Files and kustomizations -----------------------------------------------------------------
@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_manifest_parses_with_one_kind_per_file(path: Path) -> None:
    objs = docs(path)
    assert objs, f"{path}: no objects"
    for obj in objs:
        assert {"apiVersion", "kind", "metadata"} <= obj.keys(), f"{path}: {obj.keys()}"
        assert obj["metadata"].get("name"), f"{path}: an object without metadata.name"
    kinds = {o["kind"] for o in objs}
    if path.is_relative_to(DEPLOY):  # examples bundle their Namespace with the workload
        assert len(kinds) == 1, f"{path}: one kind per file, found {sorted(kinds)}"


def kustomizations() -> list[Path]:
    return sorted(DEPLOY.rglob("kustomization.yaml"))


@pytest.mark.parametrize("path", kustomizations(), ids=lambda p: str(p.relative_to(ROOT)))
def test_kustomization_entries_exist(path: Path) -> None:
    k = docs(path)[0]
    assert k["kind"] == "Kustomization"
    for entry in k.get("resources", []):
        target = path.parent / entry
        assert target.is_file() or (target / "kustomization.yaml").is_file(), f"{path}: {entry}"
    for gen in k.get("configMapGenerator", []):
        for entry in gen.get("files", []):
            assert (path.parent / entry.split("=")[-1]).is_file(), f"{path}: {entry}"


def test_every_deploy_file_is_listed_in_a_kustomization() -> None:
    listed: set[Path] = set()
    for path in kustomizations():
        k = docs(path)[0]
        listed |= {(path.parent / e).resolve() for e in k.get("resources", [])}
        listed |= {(path.parent / e["path"]).resolve() for e in k.get("patches", [])}
        listed |= {(path.parent / f.split("=")[-1]).resolve()
                   for g in k.get("configMapGenerator", []) for f in g.get("files", [])}
    files = {p.resolve() for p in [*kustomize_files("*.yaml"), *kustomize_files("*.json")]
             if p.name != "kustomization.yaml"}
    assert files - listed == set(), "manifests no kustomization lists"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
@pytest.mark.parametrize("directory,kinds", [
    ("deploy", {"CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole",
                "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Deployment",
                "PodDisruptionBudget", "Service", "PriorityClass", "ValidatingAdmissionPolicy",
                "ValidatingAdmissionPolicyBinding"}),
    ("deploy/queues", {"Queue"}),
    ("deploy/users", {"ClusterRole", "ClusterRoleBinding"}),
    ("deploy/monitoring", {"ServiceMonitor", "PrometheusRule", "ConfigMap"}),
    ("deploy/webhook", {"Service", "MutatingWebhookConfiguration",
                        "ValidatingWebhookConfiguration"}),
    ("deploy/webhook/cert-manager", {"Issuer", "Certificate"}),
])
def test_kubectl_kustomize_builds(directory: str, kinds: set[str]) -> None:
    out = subprocess.run(["kubectl", "kustomize", str(ROOT / directory)], check=True,
                         capture_output=True, text=True, timeout=60).stdout
    assert {d["kind"] for d in yaml.safe_load_all(out) if d} == kinds


# RBAC -------------------------------------------------------------------------------------
EXPECTED_CLUSTER_RULES = {
    *(("", "pods", v) for v in ("get", "list", "watch", "delete", "patch")),
    ("", "pods/binding", "create"),
    ("", "pods/eviction", "create"),
    ("policy", "poddisruptionbudgets", "list"),
    *(("", "pods/status", v) for v in ("patch", "update")),
    *((g, "events", v) for g in ("", "events.k8s.io") for v in ("create", "patch", "update")),
    *(("", "nodes", v) for v in ("get", "list", "watch")),
    *(("", "namespaces", v) for v in ("get", "list", "watch")),
    *(("", r, v) for r in ("persistentvolumeclaims", "persistentvolumes")
      for v in ("get", "list", "watch", "patch")),
    *(("storage.k8s.io", r, v) for r in ("storageclasses", "csinodes")
      for v in ("get", "list", "watch")),
    *(("resource.k8s.io", r, v) for r in ("deviceclasses", "resourceslices", "resourceclaims",
                                          "resourceclaimtemplates")
      for v in ("get", "list", "watch")),
    # Claims allocated before a gang binds: the finalizer, then status (issue 35).
    ("resource.k8s.io", "resourceclaims", "patch"),
    *(("resource.k8s.io", "resourceclaims/status", v) for v in ("update", "patch")),
    *(("resource.k8s.io", "resourceclaims/binding", v) for v in ("update", "patch")),
    *(("batch", "jobs", v) for v in ("get", "list", "watch", "patch")),
    *(("jobset.x-k8s.io", "jobsets", v) for v in ("get", "list", "watch", "patch")),
    *(("kubeflow.org", r, v) for r in ("pytorchjobs", "mpijobs")
      for v in ("get", "list", "watch")),
    *(("ray.io", "rayclusters", v) for v in ("get", "list", "watch")),
    *(("scheduling.k8s.io", "priorityclasses", v) for v in ("get", "list", "watch")),
    *(("scheduling.x-k8s.io", "podgroups", v) for v in ("get", "list", "watch", "patch")),
    *(("scheduling.x-k8s.io", "podgroups/status", v) for v in ("update", "patch")),
    *(("scheduling.k8s.io", r, v) for r in ("workloads", "podgroups")
      for v in ("get", "list", "watch")),
    ("scheduling.k8s.io", "podgroups/status", "patch"),
    *(("gangscheduler.io", "queues", v) for v in ("get", "list", "watch", "patch")),
    *(("gangscheduler.io", "queues/status", v) for v in ("update", "patch")),
    *(("", "podtemplates", v) for v in ("create", "deletecollection")),
    *(("autoscaling.x-k8s.io", "provisioningrequests", v) for v in ("list", "create", "delete")),
}


def grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    out = set()
    for rule in role["rules"]:
        assert not rule.get("resourceNames") and not rule.get("nonResourceURLs"), rule
        for g in rule["apiGroups"]:
            for r in rule["resources"]:
                out |= {(g, r, v) for v in rule["verbs"]}
    return out


def test_cluster_role_grants_exactly_what_the_scheduler_uses() -> None:
    got = grants(one("ClusterRole", "gang-scheduler"))
    assert got - EXPECTED_CLUSTER_RULES == set(), "more than the scheduler needs"
    assert EXPECTED_CLUSTER_RULES - got == set(), "less than the scheduler needs"
    assert not any("*" in part for g in got for part in g)
    assert not any(r.split("/")[0] in ("secrets", "configmaps") for _, r, _ in got)


def test_the_charts_cluster_role_grants_what_deploys_does() -> None:
    """Without helm (test_helm_chart.py renders it when helm is built): the chart's rules,
    read past its template lines, are deploy's, the claim allocation's writes included."""
    text = (HELM / "gang-scheduler" / "templates" / "clusterrole.yaml").read_text()
    rules = yaml.safe_load(text[text.index("\nrules:"):])
    chart = grants(rules)
    assert chart == grants(one("ClusterRole", "gang-scheduler"))
    assert {("resource.k8s.io", r, v) for r in ("resourceclaims/status",
                                                 "resourceclaims/binding")
            for v in ("update", "patch")} \
        | {("resource.k8s.io", "resourceclaims", "patch")} <= chart


USERS = DEPLOY / "users"


def test_user_roles_only_read_and_cover_what_explain_reads() -> None:
    """deploy/users: everyone reads Queues; gang-scheduler-tenant reads a namespace's gangs
    (bound per namespace, and aggregated into view); gang-scheduler-viewer reads what explain's
    fresh decision needs. None of them may write anything (but the checkpoint writer, below)
    or read Secrets."""
    roles = {o["metadata"]["name"]: o for p in sorted(USERS.glob("*.yaml"))
             if p.name != "kustomization.yaml" for o in docs(p) if o["kind"] == "ClusterRole"}
    writer = roles.pop("gang-scheduler-checkpoint-writer")
    for role in roles.values():
        got = grants(role)
        assert {v for _, _, v in got} <= {"get", "list", "watch"}, role["metadata"]["name"]
        assert not any(r.split("/")[0] in ("secrets", "configmaps") for _, r, _ in got)
    # A trainer's account patches (the checkpoint annotation on) its pod, Job or PodGroup
    # and nothing else: no create, delete, status, Secrets or other kinds.
    assert grants(writer) == {(g, r, v) for g, r in (("", "pods"), ("batch", "jobs"),
                                                     ("scheduling.x-k8s.io", "podgroups"))
                              for v in ("get", "patch")}
    labels = roles["gang-scheduler-tenant"]["metadata"]["labels"]
    assert labels["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    binding = one("ClusterRoleBinding", where=USERS)
    assert binding["roleRef"]["name"] == "gang-scheduler-queue-viewer"
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                    "name": "system:authenticated"}]
    tenant = {(g, r) for g, r, _ in grants(roles["gang-scheduler-tenant"])}
    assert {("", "pods"), ("batch", "jobs"), ("scheduling.x-k8s.io", "podgroups")} <= tenant
    # The views size an operator's gang from its object as the scheduler does.
    assert {("kubeflow.org", "pytorchjobs"), ("kubeflow.org", "mpijobs"),
            ("ray.io", "rayclusters")} <= tenant
    # The viewer reads every collection the scheduler itself lists (its informers).
    reads = {(g, r) for g, r, v in EXPECTED_CLUSTER_RULES if v == "list"}
    assert reads <= {(g, r) for g, r, _ in grants(roles["gang-scheduler-viewer"])}


def test_leader_election_role_is_namespaced_to_leases() -> None:
    role = one("Role", "gang-scheduler-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert grants(role) == {("coordination.k8s.io", "leases", v)
                            for v in ("get", "create", "update")}


@pytest.mark.parametrize("kind,role_kind", [("ClusterRoleBinding", "ClusterRole"),
                                            ("RoleBinding", "Role")])
def test_bindings_grant_to_the_scheduler_service_account_only(kind: str, role_kind: str) -> None:
    binding = one(kind)
    role = one(role_kind, "gang-scheduler" if role_kind == "ClusterRole" else None)
    sa = one("ServiceAccount")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": sa["metadata"]["namespace"]}]
    if kind == "RoleBinding":
        assert binding["metadata"]["namespace"] == role["metadata"]["namespace"]


# The scheduler Deployment ------------------------------------------------------------------
def scheduler_config(tmp_path: Path) -> Any:
    cm = one("ConfigMap", "gang-scheduler-config")
    path = tmp_path / "config.yaml"
    path.write_text(cm["data"]["config.yaml"], encoding="utf-8")
    return load_config(path)


def test_config_map_loads_with_the_scheduler_config_parser(tmp_path: Path) -> None:
    config = scheduler_config(tmp_path)
    assert config.scheduler_name == "gang-scheduler"
    assert config.leader_election.enabled
    assert config.leader_election.lease_namespace == one("Role")["metadata"]["namespace"]
    assert config.log_format == "json"
    assert config.metrics_bind_address.rsplit(":", 1)[1] == "8080"


def test_deployment_is_hardened_and_highly_available(tmp_path: Path) -> None:
    dep = one("Deployment", "gang-scheduler")
    assert dep["metadata"]["namespace"] == NAMESPACE
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    spec = pod["spec"]
    assert spec["serviceAccountName"] == one("ServiceAccount")["metadata"]["name"]
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    anti = spec["affinity"]["podAntiAffinity"]
    terms = [t.get("podAffinityTerm", t) for t in
             anti.get("preferredDuringSchedulingIgnoredDuringExecution", [])
             + anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])]
    assert any(t["topologyKey"] == "kubernetes.io/hostname" for t in terms)
    [container] = spec["containers"]
    assert container["image"] == "ghcr.io/gang-scheduler/gang-scheduler:0.1.0"
    sc = container["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 65532
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"},
                                  {"name": "webhook", "containerPort": 9443, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    for key in ("requests", "limits"):
        assert {"cpu", "memory"} <= container["resources"][key].keys()
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert mounts.keys() == volumes.keys()
    assert "emptyDir" in volumes[mounts_at(mounts, "/tmp")]  # the only writable path
    # args name the file the ConfigMap provides, at the path where it is mounted
    assert container["args"][:2] == ["run", "--config"]
    config_path = Path(container["args"][2])
    config_volume = volumes[mounts_at(mounts, str(config_path.parent))]
    assert config_volume["configMap"]["name"] == "gang-scheduler-config"
    assert config_path.name in one("ConfigMap", "gang-scheduler-config")["data"]
    scheduler_config(tmp_path)  # and that file loads


def test_the_webhook_pieces_fit_together(tmp_path: Path) -> None:
    """deploy/webhook's Service reaches the port the config serves the webhook on, and the
    certificate cert-manager writes is the Secret mounted where the config reads it."""
    config = scheduler_config(tmp_path).webhook
    assert not config.enabled  # off by default
    pod = one("Deployment")["spec"]["template"]
    container = pod["spec"]["containers"][0]
    port = next(p for p in container["ports"] if p["name"] == "webhook")
    assert config.bind_address.endswith(f":{port['containerPort']}")
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    secret = volumes[mounts_at(mounts, str(Path(config.cert_file).parent))]["secret"]
    assert Path(config.key_file).parent == Path(config.cert_file).parent
    assert secret["optional"] is True  # the scheduler starts without it while the webhook is off
    where = DEPLOY / "webhook"
    certificate = one("Certificate", where=where / "cert-manager")
    assert certificate["spec"]["secretName"] == secret["secretName"]
    assert svc_host(one("Service", where=where)) in certificate["spec"]["dnsNames"]
    svc = one("Service", where=where)
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert svc["spec"]["ports"][0]["targetPort"] == "webhook"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (hook,) = one(kind, where=where)["webhooks"]
        assert hook["clientConfig"]["service"]["name"] == svc["metadata"]["name"]
        assert hook["clientConfig"]["service"]["port"] == svc["spec"]["ports"][0]["port"]
        assert hook["namespaceSelector"] == {"matchLabels": {"gangscheduler.io/defaults":
                                                             "enabled"}}


def svc_host(svc: dict[str, Any]) -> str:
    return f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc"


def mounts_at(mounts: dict[str, dict[str, Any]], path: str) -> str:
    [name] = [n for n, m in mounts.items() if m["mountPath"] == path]
    return name


def test_pdb_and_service_select_the_scheduler_pods() -> None:
    labels = one("Deployment")["spec"]["template"]["metadata"]["labels"]
    pdb = one("PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    svc = one("Service")
    assert svc["spec"]["selector"].items() <= labels.items()
    assert svc["spec"]["ports"] == [{"name": "metrics", "port": 8080, "targetPort": "metrics",
                                     "protocol": "TCP"}]
    monitor = one("ServiceMonitor", where=DEPLOY / "monitoring")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]


def test_namespaced_objects_live_in_the_scheduler_namespace() -> None:
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ClusterRole",
                      "ClusterRoleBinding", "PriorityClass", "ValidatingAdmissionPolicy",
                      "ValidatingAdmissionPolicyBinding"}
    for obj in objects(*sorted(p for p in DEPLOY.glob("*.yaml")
                               if p.name != "kustomization.yaml")):
        expected = None if obj["kind"] in cluster_scoped else NAMESPACE
        assert obj["metadata"].get("namespace") == expected, obj["metadata"]["name"]


def test_priority_classes() -> None:
    classes = {o["metadata"]["name"]: o for o in docs(DEPLOY / "priorityclasses.yaml")}
    assert {n: c["value"] for n, c in classes.items()} == {
        "gang-high": 100000, "gang-normal": 1000, "gang-low": 100}
    assert not any(c.get("globalDefault") for c in classes.values())
    assert classes["gang-low"]["preemptionPolicy"] == "Never"


# Queues and the Queue CRD ------------------------------------------------------------------
QUEUE_FILES = sorted(p for p in (DEPLOY / "queues").glob("*.yaml")
                     if p.name != "kustomization.yaml")
QUEUE_CRD = DEPLOY / "crds" / "gangscheduler.io_queues.yaml"


def example_queues() -> queues.QueueSet:
    result = read_files(QUEUE_FILES)
    assert result.errors == (), "\n".join(map(str, result.errors))
    return result.policies.queues


def test_example_queues_pass_the_policy_validator() -> None:
    qs = example_queues()
    assert [q.name for q in qs] == ["default", "research", "team-a", "team-b"]
    assert qs.children_of("research") == ("team-a", "team-b")
    assert [qs.get(n).weight for n in ("team-a", "team-b")] == [1.0, 3.0]  # type: ignore[union-attr]


def test_example_quotas_add_up_to_the_dev_cluster_pools() -> None:
    dev = clusterspec.load(ROOT / "scheduler" / "examples" / "clusters" / "dev.yaml")
    capacity = {p.name: p.count * p.gpus_per_node for p in dev.pools}
    nominal = dict.fromkeys(capacity, 0)
    for queue in example_queues():
        for quota in queue.quotas:
            nominal[quota.pool] += quota.nominal.get(GPU, 0)
    assert nominal == capacity


def crd_version() -> dict[str, Any]:
    crd = docs(QUEUE_CRD)[0]
    [version] = crd["spec"]["versions"]
    return version


def strict(node: Any) -> Any:
    """The CRD schema as kubectl's strict field validation applies it: unknown fields fail."""
    if isinstance(node, list):
        return [strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict(v) for k, v in node.items()}
    if "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def crd_validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the dev extra")
    schema = strict(crd_version()["schema"]["openAPIV3Schema"])
    jsonschema.Draft4Validator.check_schema(schema)  # OpenAPI v3.0: boolean exclusiveMinimum
    return jsonschema.Draft4Validator(schema)


def test_queue_crd_names_and_version_match_the_policy_api() -> None:
    crd = docs(QUEUE_CRD)[0]
    assert crd["spec"]["group"] == queues.API_GROUP
    assert f"{crd['spec']['group']}/{crd_version()['name']}" == queues.API_VERSION
    assert crd["spec"]["names"]["kind"] == parsing.QUEUE_KIND
    assert crd["metadata"]["name"] == f"{crd['spec']['names']['plural']}.{queues.API_GROUP}"
    assert crd["spec"]["scope"] == "Cluster"
    assert crd_version()["subresources"] == {"status": {}}


@pytest.mark.parametrize("path", QUEUE_FILES, ids=lambda p: p.name)
def test_queue_crd_schema_accepts_the_example_queues(path: Path) -> None:
    validator = crd_validator()
    for obj in docs(path):
        errors = [f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(obj)]
        assert errors == []


BAD_QUEUES = {
    "weight zero": lambda s: s.update(weight=0),
    "unknown field": lambda s: s.update(weigth=2),
    "bad enum": lambda s: s["preemption"].update(withinQueue="Always"),
    "negative quantity": lambda s: s["quotas"][0]["nominal"].update({GPU: -1}),
    "negative quantity string": lambda s: s["quotas"][0]["nominal"].update({GPU: "-1"}),
    "not a quantity": lambda s: s["quotas"][0]["nominal"].update({GPU: "lots"}),
    "quota without pool": lambda s: s["quotas"][0].pop("pool"),
    "unknown quota field": lambda s: s["quotas"][0].update(gpus=8),
    "namespaces not a list": lambda s: s.update(namespaces="team-a"),
    "backfill not a bool": lambda s: s["queueing"].update(backfill="yes"),
    "negative reserveAfterSeconds": lambda s: s["queueing"].update(reserveAfterSeconds=-1),
    "reserveAfterSeconds not a number": lambda s: s["queueing"].update(reserveAfterSeconds="1h"),
}


@pytest.mark.parametrize("mutate", BAD_QUEUES.values(), ids=BAD_QUEUES.keys())
def test_queue_crd_schema_and_parser_both_refuse_bad_queues(mutate: Any) -> None:
    validator = crd_validator()
    obj = docs(DEPLOY / "queues" / "team-a.yaml")[0]
    mutate(obj["spec"])
    assert list(validator.iter_errors(obj)), "the CRD schema accepted it"
    assert parsing.parse_queue(obj)[1], "the policy parser accepted it"


def test_queue_crd_schema_accepts_what_the_parser_accepts() -> None:
    validator = crd_validator()
    obj = docs(DEPLOY / "queues" / "team-a.yaml")[0]
    obj["spec"].update(weight=0.5)
    obj["spec"]["quotas"][0]["nominal"].update({"cpu": "500m", "memory": "2Ti"})
    obj["spec"]["queueing"].update(reserveAfterSeconds=0)
    assert parsing.parse_queue(obj)[1] == []
    assert list(validator.iter_errors(obj)) == []


def test_queue_crd_fields_mirror_the_policy_parser() -> None:
    spec = crd_version()["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert set(spec) == parsing._QUEUE_FIELDS
    assert set(spec["quotas"]["items"]["properties"]) == parsing._QUOTA_FIELDS
    assert set(spec["preemption"]["properties"]) == parsing._PREEMPTION_FIELDS
    assert set(spec["queueing"]["properties"]) == parsing._QUEUEING_FIELDS
    enums = [
        (spec["preemption"]["properties"]["withinQueue"]["enum"], queues.WithinQueuePreemption),
        (spec["preemption"]["properties"]["reclaimFromOthers"]["enum"], queues.ReclaimPolicy),
        (spec["queueing"]["properties"]["strategy"]["enum"], queues.QueueingStrategy),
    ]
    for values, enum in enums:
        assert values == [e.value for e in enum]


def test_queue_printer_columns_point_at_schema_fields() -> None:
    version = crd_version()
    root = version["schema"]["openAPIV3Schema"]
    for column in version["additionalPrinterColumns"]:
        node = root
        for part in re.sub(r"\[.*?\]", "", column["jsonPath"]).strip(".").split("."):
            if "properties" not in node:  # metadata: the apiserver's own schema
                break
            assert part in node["properties"], column
            node = node["properties"][part]
            node = node.get("items", node)


# Examples ----------------------------------------------------------------------------------
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod (or pod template) an example object defines, as {metadata, spec}."""
    if obj["kind"] == "Pod":
        return [obj]
    if obj["kind"] == "Job":
        return [obj["spec"]["template"]]
    if obj["kind"] in ("PyTorchJob", "MPIJob"):  # training-operator v1: one per replica type
        return [replica["template"] for field, specs in obj["spec"].items()
                if field.endswith("ReplicaSpecs") for replica in specs.values()]
    if obj["kind"] in ("TrainingRuntime", "ClusterTrainingRuntime"):
        return [rj["template"]["spec"]["template"]
                for rj in obj["spec"]["template"]["spec"]["replicatedJobs"]]
    return []


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_pods_use_gang_scheduler_and_an_admitting_queue(path: Path,
                                                               tmp_path: Path) -> None:
    config = scheduler_config(tmp_path)
    qs = example_queues()
    classes = {o["metadata"]["name"] for o in docs(DEPLOY / "priorityclasses.yaml")}
    templates = [(obj, t) for obj in docs(path) for t in pod_templates(obj)]
    assert templates, f"{path}: no pods"
    for obj, template in templates:
        spec = template["spec"]
        assert spec["schedulerName"] == config.scheduler_name
        assert spec.get("priorityClassName") in classes
        queue = template.get("metadata", {}).get("labels", {}).get("gangscheduler.io/queue")
        namespace = obj["metadata"].get("namespace")
        if queue is not None:
            assert qs.get(queue) is not None, f"no Queue {queue}"
            assert qs.get(queue).admits_namespace(namespace)  # type: ignore[union-attr]
    assert path.read_text().startswith("#"), "each example starts with a comment explaining it"


def test_example_pods_fit_a_dev_cluster_node() -> None:
    dev = clusterspec.load(ROOT / "scheduler" / "examples" / "clusters" / "dev.yaml")
    nodes = [{"cpu": parse_quantity(p.cpu, "cpu"), "memory": parse_quantity(p.memory, "memory"),
              GPU: p.gpus_per_node} for p in dev.pools]
    for obj in objects(*EXAMPLE_FILES):
        for template in pod_templates(obj):
            for container in template["spec"]["containers"]:
                requests = container.get("resources", {}).get("requests", {})
                need = {r: parse_quantity(v, r) for r, v in requests.items()}
                assert any(all(n.get(r, 0) >= v for r, v in need.items()) for n in nodes)


def as_pod(template: dict[str, Any], namespace: str, name: str,
           owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a controller would create from a pod template (just what grouping reads)."""
    meta = {**template.get("metadata", {}), "name": name, "namespace": namespace, "uid": name}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": owner["kind"], "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["name"], "controller": True}]
    return {"metadata": meta, "spec": template["spec"]}


def gangs_of(pods: Sequence[dict[str, Any]], groups: Sequence[dict[str, Any]] = (),
             jobs: Sequence[dict[str, Any]] = ()) -> GangSet:
    def key(o: dict[str, Any]) -> str:
        return f"{o['metadata']['namespace']}/{o['metadata']['name']}"

    return build_gangs([convert.pod_from_json(p) for p in pods],
                       {key(g): convert.podgroup_from_json(g) for g in groups},
                       {key(j): convert.job_from_json(j) for j in jobs}, GroupingConfig())


def test_indexed_job_example_is_one_gang_of_four_one_gpu_pods() -> None:
    [job] = [o for o in docs(EXAMPLES / "pytorch-ddp-indexed-job.yaml") if o["kind"] == "Job"]
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["parallelism"] == spec["completions"] == 4
    [container] = spec["template"]["spec"]["containers"]
    assert container["resources"]["requests"][GPU] == container["resources"]["limits"][GPU] == 1
    ns = job["metadata"]["namespace"]
    pods = [as_pod(spec["template"], ns, f"ddp-train-{i}", owner=job) for i in range(4)]
    [gang] = gangs_of(pods, jobs=[job]).pending
    assert (gang.id, gang.queue, gang.min_member) == ("team-a/ddp-train", "team-a", 4)
    assert gang.min_requests[GPU] == 4
    assert gang.runtime_estimate == parse_duration("30m") == 1800


def test_podgroup_example_is_one_gang_with_launcher_and_workers() -> None:
    objs = docs(EXAMPLES / "podgroup-launcher-workers.yaml")
    [group] = [o for o in objs if o["kind"] == "PodGroup"]
    pods = [o for o in objs if o["kind"] == "Pod"]
    assert group["spec"]["minMember"] == len(pods) == 5
    assert all(p["metadata"]["labels"][POD_GROUP_LABEL] == "mpi-train" for p in pods)
    for pod in pods:
        pod["metadata"]["uid"] = pod["metadata"]["name"]
    [gang] = gangs_of(pods, groups=[group]).pending
    assert (gang.id, gang.queue, gang.min_member) == ("team-b/mpi-train", "team-b", 5)
    assert {r.name: r.count for r in gang.roles} == {"launcher": 1, "worker": 4}
    assert gang.min_requests[GPU] == 32


def test_trainer_example_becomes_one_podgroup_gang() -> None:
    objs = {o["kind"]: o for o in docs(EXAMPLES / "trainer-runtime-coscheduling.yaml")}
    runtime, job = objs["TrainingRuntime"], objs["TrainJob"]
    assert runtime["apiVersion"] == job["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert runtime["spec"]["podGroupPolicy"] == {"coscheduling": {"scheduleTimeoutSeconds": 120}}
    assert job["spec"]["runtimeRef"]["name"] == runtime["metadata"]["name"]
    assert job["spec"]["runtimeRef"]["kind"] == "TrainingRuntime"
    assert runtime["metadata"]["namespace"] == job["metadata"]["namespace"]
    [node_job] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert node_job["template"]["metadata"]["labels"] == {
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
    # What Trainer creates: a PodGroup named after the TrainJob, minMember = all its pods, and
    # pods with the template's labels, the pod-group label and the per-node resources.
    name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
    trainer = job["spec"]["trainer"]
    group = {"metadata": {"name": name, "namespace": ns, "uid": name},
             "spec": {"minMember": trainer["numNodes"], "scheduleTimeoutSeconds": 120}}
    template = node_job["template"]["spec"]["template"]
    [container] = template["spec"]["containers"]
    pod_spec = {**template["spec"],
                "containers": [{**container, "resources": trainer["resourcesPerNode"]}]}
    labels = {**template["metadata"]["labels"], POD_GROUP_LABEL: name}
    pods = [as_pod({"metadata": {"labels": labels}, "spec": pod_spec}, ns,
                   f"{name}-node-0-{i}") for i in range(trainer["numNodes"])]
    [gang] = gangs_of(pods, groups=[group]).pending
    assert (gang.id, gang.queue, gang.min_member) == (f"{ns}/{name}", "team-b", 4)
    assert gang.min_requests[GPU] == 32
    # A queue that can run it (the default queue could not: no h100 and 8 a100 GPUs): it
    # admits the namespace and its nominal quota over both pools covers the whole gang.
    queue = example_queues().get(gang.queue)
    assert queue is not None and queue.admits_namespace(ns)
    assert sum(q.nominal.get(GPU, 0) for q in queue.quotas) >= gang.min_requests[GPU]


# Monitoring --------------------------------------------------------------------------------
METRIC = re.compile(r"\bgang_scheduler_[a-z0-9_]+")


def exported_series() -> set[str]:
    """Series names the scheduler exports, from the metrics module itself."""
    names: set[str] = set()
    for family in SchedulerMetrics().registry.collect():
        if family.type == "counter":
            names.add(f"{family.name}_total")
        elif family.type == "histogram":
            names |= {f"{family.name}{s}" for s in ("_bucket", "_sum", "_count")}
        else:
            names.add(family.name)
    return names


def dashboard_exprs() -> list[str]:
    dashboard = json.loads((DEPLOY / "monitoring" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    return exprs


def test_grafana_dashboard_uses_only_exported_metrics() -> None:
    used = {m for e in dashboard_exprs() for m in METRIC.findall(e)}
    assert used and used - exported_series() == set()
    # the panels an operator asked for
    for wanted in ("pending_gangs", "gang_scheduling_latency_seconds_bucket",
                   "cycle_duration_seconds_bucket", "allocated_gpus", "nominal_gpus",
                   "fair_share", "usage_share", "binds_total", "rollbacks_total",
                   "preemptions_total", "is_leader"):
        assert f"gang_scheduler_{wanted}" in used, wanted


def test_grafana_dashboard_panel_ids_are_unique() -> None:
    dashboard = json.loads((DEPLOY / "monitoring" / "grafana-dashboard.json").read_text())
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_alerts_use_only_exported_metrics_and_cover_the_failure_modes() -> None:
    rule = one("PrometheusRule", where=DEPLOY / "monitoring")
    everything = [r for g in rule["spec"]["groups"] for r in g["rules"]]
    recorded = {r["record"] for r in everything if "record" in r}
    for r in everything:
        used = set(METRIC.findall(r["expr"].replace(":", " ")))
        assert used <= exported_series() | recorded, r.get("alert") or r.get("record")
    rules = [r for r in everything if "alert" in r]
    for r in rules:
        assert r["labels"]["severity"] in ("critical", "warning", "info")
        assert r["annotations"]["summary"]
    assert {"GangSchedulerNoLeader", "GangSchedulerCyclesStalled", "GangSchedulerBindRollbacks",
            "GangSchedulerGangsPendingTooLong"} <= {r["alert"] for r in rules}
    # reason label values the alerts match on are pending-reason categories the cycle reports
    matched = {v for r in rules for m in re.findall(r'reason=~"([^"]+)"', r["expr"])
               for v in m.split("|")}
    assert matched and matched <= {c.value for c in ReasonCategory}


# Image -------------------------------------------------------------------------------------
def test_dockerfile_runs_the_console_script_as_non_root() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    assert "pip install --no-cache-dir ." in text
    assert re.search(r"^USER 65532(:65532)?$", text, re.M)
    assert 'ENTRYPOINT ["gang-scheduler"]' in text
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^gang-scheduler = "scheduler\.cli\.main:main"$', pyproject, re.M)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ignored[ignored.index("*") + 1:][:1], "allow-list after '*'"
    for needed in ("pyproject.toml", "scheduler", "policies", "simulator"):
        assert f"!{needed}" in ignored, f"{needed} must reach the build context"
