"""Start the training operators, JobSet and Kubeflow Trainer, with their CRDs, RBAC and webhooks
(and, on demand, Kueue and Kubeflow training-operator v1).

Why the real ones: a TrainJob becomes a JobSet, a PodGroup and pods only through Trainer, and a
JobSet becomes Jobs (and restarts them by its failure policy) only through the JobSet
controller; their webhooks default and validate what users apply, and JobSet's pod webhooks
see every pod a JobSet makes. Hand-made stand-ins would test our reading of their docs.

Each runs as a process on 127.0.0.1, like the rest of the dev cluster:

* its CRDs, webhook configurations and ClusterRole come from its own pinned release (cached
  beside the binary by build.py), so they match the binary;
* it authenticates with its own client certificate (``jobset-controller``,
  ``trainer-controller``) bound to that release's ClusterRole, so RBAC is exercised too;
* its webhook server serves a certificate from the cluster CA for 127.0.0.1, and its webhook
  configurations are rewritten to call ``https://127.0.0.1:<port><path>`` with that CA as
  ``caBundle`` (in a cluster they name a Service, which cannot route to loopback here);
* leader election is off, and the configurations are created only once the webhook server
  answers (they fail closed: created earlier, they would refuse every pod of a JobSet).
"""

from __future__ import annotations

import base64
import copy
import os
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from scheduler.tools.devcluster import build, certs, crds, kubeconfig, procs, rest

READY_TIMEOUT_S = 90.0
API_QPS, API_BURST = 100, 200


@dataclass(frozen=True, slots=True)
class Operator:
    """One training operator: its build, identity and which of its manifests are what."""

    name: str  # identity stem in certs.CLIENTS, and prefix of its cluster-scoped objects
    component: build.Component
    crds: tuple[str, ...]
    webhooks: str  # "" when it serves none
    webhook_patches: tuple[str, ...]  # JSON patches (replace ops) kustomize would apply
    role: str
    #: Rules its release's ClusterRole lacks but its controller needs (each says why).
    missing_rules: tuple[dict[str, Any], ...] = ()
    #: Only the webhooks whose path contains one of these (empty: all): the release's
    #: manifests name a webhook for every integration, and one whose integration is not
    #: started has no handler (it would fail closed on every object of its kind).
    webhook_paths: tuple[str, ...] = ()
    #: A Role its release grants in its own namespace (Kueue's on Secrets there: its caches
    #: wait for that informer before its controllers start), and that namespace.
    namespace_role: str = ""
    namespace: str = ""

    def load(self, relative: str) -> list[Any]:
        """The YAML documents of one of its cached manifests."""
        path = self.component.manifest(relative)
        # libyaml when present: KubeRay's CRDs are 3 MB of YAML, seconds even so.
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return [d for d in yaml.load_all(path.read_text(encoding="utf-8"), Loader=loader) if d]


JOBSET = Operator(
    "jobset", build.JOBSET, (build.JOBSET.manifests[0],), build.JOBSET.manifests[1],
    build.JOBSET.manifests[2:4], build.JOBSET.manifests[4])
TRAINER = Operator(
    "trainer", build.TRAINER, build.TRAINER.manifests[0:3], build.TRAINER.manifests[3], (),
    build.TRAINER.manifests[4],
    # Trainer v2.0.0's coscheduling plugin watches LimitRanges and RuntimeClasses (for the
    # PodGroup's minResources); its manifests/base/rbac/role.yaml does not grant that, so its
    # informers are refused and no PodGroup is ever made.
    ({"apiGroups": [""], "resources": ["limitranges"], "verbs": ["get", "list", "watch"]},
     {"apiGroups": ["node.k8s.io"], "resources": ["runtimeclasses"],
      "verbs": ["get", "list", "watch"]}))
OPERATORS = (JOBSET, TRAINER)  # in start order: Trainer watches JobSets
#: Kueue, started on demand (``DevCluster.start_kueue``): its Job webhook sees every Job,
#: which the other tests need not pay for. Only its batch/v1 Job integration is started, so
#: only its own kinds' webhooks and the Job ones are registered.
KUEUE = Operator(
    "kueue", build.KUEUE, build.KUEUE.manifests[0:11], build.KUEUE.manifests[11], (),
    build.KUEUE.manifests[12], webhook_paths=("-kueue-x-k8s-io-", "-batch-v1-job"),
    namespace_role=build.KUEUE.manifests[13], namespace="kueue-system")
#: Kubeflow training-operator v1 (PyTorchJob, MPIJob), started on demand
#: (``DevCluster.start_training_operator_v1``): its controllers watch every pod and Service,
#: which the other tests need not pay for. It runs without webhooks (they only validate; each
#: controller defaults its jobs itself) and without creating PodGroups: gang-scheduler sizes
#: the gang from the job object (see hack/controlplane/training-operator/main.go).
TRAINING_OPERATOR_V1 = Operator(
    "training-operator", build.TRAINING_OPERATOR, build.TRAINING_OPERATOR.manifests[0:2], "",
    (), build.TRAINING_OPERATOR.manifests[2])
#: KubeRay, started on demand (``DevCluster.start_kuberay``): RayClusters and RayJobs make
#: their pods themselves, so only the tests of them need it. No webhooks (its release runs
#: without them by default) and no batch-scheduler integration: with one (``--batch-scheduler
#: scheduler-plugins``, volcano, ...) KubeRay would write that scheduler's name over every
#: pod's ``schedulerName``, taking its pods away from gang-scheduler.
KUBERAY = Operator(
    "kuberay", build.KUBERAY, build.KUBERAY.manifests[0:3], "", (), build.KUBERAY.manifests[3])
#: Kueue's label naming a Job's LocalQueue, and the kinds the dev cluster runs it for.
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_FRAMEWORKS = ("batch/job",)
#: Trainer's ClusterTrainingRuntime for PyTorch, as its release ships it.
TORCH_RUNTIME = build.TRAINER.manifests[5]


def replace_ops(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """`doc` with JSON-patch ``replace`` operations applied (all that the webhook patches of
    these releases use); any other op is an error naming it."""
    out = copy.deepcopy(doc)
    for op in ops:
        if op.get("op") != "replace":
            raise ValueError(f"unsupported JSON patch op {op.get('op')!r} at {op.get('path')}")
        *parents, last = [p for p in str(op["path"]).split("/") if p]
        target: Any = out
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if isinstance(target, list):
            target[int(last)] = op["value"]
        else:
            target[last] = op["value"]
    return out


def webhook_configurations(operator: Operator, port: int, ca: Path) -> list[dict[str, Any]]:
    """The operator's webhook configurations, pointed at its loopback server."""
    if not operator.webhooks:
        return []
    patches = [op for relative in operator.webhook_patches for op in _ops(operator, relative)]
    bundle = base64.b64encode(ca.read_bytes()).decode("ascii")
    out = []
    for doc in operator.load(operator.webhooks):
        kind_patches = [p for p in patches if p["kind"] == doc["kind"]]
        doc = replace_ops(doc, [p["op"] for p in kind_patches])
        doc["metadata"] = {"name": f"{operator.name}-{doc['kind'].lower()}"}
        hooks = [h for h in doc.get("webhooks") or []
                 if not operator.webhook_paths
                 or any(k in h["clientConfig"]["service"]["path"] for k in operator.webhook_paths)]
        doc["webhooks"] = hooks
        for hook in hooks:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}",
                                    "caBundle": bundle}
        out.append(doc)
    return out


def _ops(operator: Operator, relative: str) -> list[dict[str, Any]]:
    """The ops of one patch file (a YAML list), each tagged with the kind it targets."""
    kind = ("MutatingWebhookConfiguration" if "mutating" in relative
            else "ValidatingWebhookConfiguration")
    ops: list[dict[str, Any]] = []
    for doc in operator.load(relative):
        ops += doc if isinstance(doc, list) else [doc]
    return [{"kind": kind, "op": op} for op in ops]


def apply_object(api: client.ApiClient, doc: dict[str, Any]) -> None:
    """Create `doc` (a cluster-scoped RBAC or webhook object), or replace it if it exists."""
    kinds: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]] = {}
    rbac = client.RbacAuthorizationV1Api(api)
    adm = client.AdmissionregistrationV1Api(api)
    kinds["ClusterRole"] = (rbac.create_cluster_role, rbac.read_cluster_role,
                            rbac.replace_cluster_role)
    kinds["ClusterRoleBinding"] = (rbac.create_cluster_role_binding,
                                   rbac.read_cluster_role_binding,
                                   rbac.replace_cluster_role_binding)
    kinds["MutatingWebhookConfiguration"] = (
        adm.create_mutating_webhook_configuration, adm.read_mutating_webhook_configuration,
        adm.replace_mutating_webhook_configuration)
    kinds["ValidatingWebhookConfiguration"] = (
        adm.create_validating_webhook_configuration, adm.read_validating_webhook_configuration,
        adm.replace_validating_webhook_configuration)
    create, read, replace = kinds[doc["kind"]]
    try:
        rest.call(create, doc)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
        current = rest.call(read, doc["metadata"]["name"])
        doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        rest.call(replace, doc["metadata"]["name"], doc)


def grant(api: client.ApiClient, operator: Operator) -> None:
    """The release's ClusterRole, renamed after the operator, bound to its identity."""
    (role,) = operator.load(operator.role)
    name = f"{operator.name}-controller"
    role["metadata"] = {"name": name}
    role["rules"] = [*role.get("rules", []), *operator.missing_rules]
    apply_object(api, role)
    apply_object(api, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                       "metadata": {"name": name},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                   "name": name},
                       "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                     "name": certs.CLIENTS[operator.name].user}]})
    if operator.namespace_role:
        _grant_in_namespace(api, operator, name)


def _grant_in_namespace(api: client.ApiClient, operator: Operator, name: str) -> None:
    """Its namespace, and the release's Role there bound to its identity."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    ns = operator.namespace
    (role,) = operator.load(operator.namespace_role)
    role["metadata"] = {"name": name, "namespace": ns}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": name, "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                           "name": name},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                             "name": certs.CLIENTS[operator.name].user}]}
    steps: tuple[tuple[Callable[..., Any], tuple[Any, ...]], ...] = (
        (core.create_namespace, ({"metadata": {"name": ns}},)),
        (rbac.create_namespaced_role, (ns, role)),
        (rbac.create_namespaced_role_binding, (ns, binding)))
    for create, args in steps:
        try:
            rest.call(create, *args)
        except client.ApiException as exc:
            if exc.status != 409:  # there from an earlier start: the release's, unchanged
                raise


def argv(operator: Operator, state_dir: Path, cert_dir: Path, webhook_port: int,
         probe_port: int) -> list[str]:
    """The operator's command line (writing its config file where it reads one)."""
    binary = str(operator.component.binary())
    if operator is TRAINING_OPERATOR_V1:
        return [binary, f"--health-probe-bind-address=127.0.0.1:{probe_port}"]
    if operator is TRAINER:
        return [binary, "--webhook-host=127.0.0.1", f"--webhook-port={webhook_port}",
                f"--cert-dir={cert_dir}", f"--health-probe-bind-address=127.0.0.1:{probe_port}"]
    if operator is KUBERAY:  # flags: no webhook, no batch scheduler (see KUBERAY)
        return [binary, "--metrics-addr=0", f"--health-probe-bind-address=127.0.0.1:{probe_port}",
                "--enable-leader-election=false", "--log-stdout-encoder=console",
                f"--qps={API_QPS}", f"--burst={API_BURST}"]
    config = state_dir / "config" / f"{operator.name}.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    if operator is KUEUE:
        config.write_text(yaml.safe_dump(_kueue_config(cert_dir, webhook_port, probe_port),
                                         sort_keys=False), encoding="utf-8")
        # The visibility API server wants an APIService and in-cluster TLS; nothing here uses it.
        return [binary, f"--config={config}", "--feature-gates=VisibilityOnDemand=false"]
    config.write_text(yaml.safe_dump({
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": API_QPS, "burst": API_BURST},
    }, sort_keys=False), encoding="utf-8")
    return [binary, f"--config={config}", "--metrics-bind-address=0"]


#: Where Kueue v0.17's main reads its metrics server's certificate whenever its internal
#: certificate management is off (a fixed path in its code, not a setting).
KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")


def _kueue_metrics_certs(cert_dir: Path, target: Path = KUEUE_METRICS_CERTS) -> None:
    """Give Kueue a certificate at its fixed metrics path, or it exits at start.

    Its metrics server is off here (``bindAddress: "0"``): the files are only read, never
    served, so one left by another dev cluster (another CA) does as well and is kept.
    Internal certificate management is no way out: it issues a certificate for an
    in-cluster Service name, which a webhook on loopback cannot present.
    """
    if (target / "tls.crt").is_file() and (target / "tls.key").is_file():
        return
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name in ("tls.crt", "tls.key"):
            tmp = target / f".{name}.{os.getpid()}.tmp"
            tmp.write_bytes((cert_dir / name).read_bytes())
            tmp.chmod(0o600)
            tmp.replace(target / name)
    except OSError as exc:
        raise build.BuildError(
            f"kueue-controller: cannot write its metrics certificate to {target} ({exc}); "
            f"Kueue v0.17 reads it from that fixed path: create {target} writable by this "
            "user (any tls.crt/tls.key pair will do: its metrics server is off)") from None


def _kueue_config(cert_dir: Path, webhook_port: int, probe_port: int) -> dict[str, Any]:
    """Kueue's Configuration: its webhook on loopback with the dev cluster's certificate, no
    leader election or metrics server, and only the Job integration (``KUEUE_FRAMEWORKS``)."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": API_QPS, "burst": API_BURST},
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
        "namespace": KUEUE.namespace,
    }


def start(operator: Operator, api: client.ApiClient, server: str, pki: certs.CertPaths,
          state_dir: Path, owned: bool) -> procs.ManagedProcess:
    """CRDs and RBAC, the controller, then (once it serves) its webhook configurations."""
    documents = [d for relative in operator.crds for d in operator.load(relative)]
    crds.apply_documents(api, documents)
    grant(api, operator)
    client_config = kubeconfig.write_client(
        state_dir / "kubeconfigs" / f"{operator.name}.kubeconfig", server, pki, operator.name)
    cert_dir = state_dir / "serving-certs" / operator.name
    cert_dir.mkdir(parents=True, exist_ok=True)
    cert, key = certs.loopback_serving(pki, operator.name)
    (cert_dir / "tls.crt").write_bytes(cert.read_bytes())
    (cert_dir / "tls.key").write_bytes(key.read_bytes())
    if operator is KUEUE:
        _kueue_metrics_certs(cert_dir)
    env = {"PATH": "/usr/bin:/bin", "KUBECONFIG": str(client_config), "HOME": str(state_dir)}

    def serve() -> tuple[procs.ManagedProcess, int]:
        webhook_port, probe_port = procs.free_port(), procs.free_port()
        proc = procs.spawn(operator.component.name,
                           argv(operator, state_dir, cert_dir, webhook_port, probe_port),
                           state_dir / "logs" / f"{operator.component.name}.log", owned, env=env)
        procs.wait_until(lambda: _ready(probe_port), READY_TIMEOUT_S,
                         f"{operator.component.name} /readyz", proc, interval_s=0.25)
        return proc, webhook_port

    proc, webhook_port = procs.start_listening(serve)
    if operator.webhooks:
        for doc in webhook_configurations(operator, webhook_port, pki.ca_cert):
            apply_object(api, doc)
    return proc


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False
