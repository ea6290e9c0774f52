"""Issue 39, "the right defaults at admission": the admission webhook with the real apiserver.

``gang-scheduler run`` serves the webhook (HTTPS, a certificate from the dev cluster's CA) with
the webhook configurations deploy/webhook ships, pointed at it (a loopback URL: in a cluster
they name the Service, which cannot route to a process on the host). The tenant's namespace
is opted in (``gangscheduler.io/defaults=enabled``); another is not. With the real kubectl:

* a bare Job applied to the opted-in namespace is stored with the scheduler's name, the
  namespace's queue label (the Job's and its pods') and the resume recipe, and its pod is
  bound by the scheduler;
* what the user wrote (another queue, a podFailurePolicy) is kept, and a queue that will not
  take the namespace's gangs is warned about;
* a Job with a malformed annotation is refused by ``kubectl apply``, naming the field and the
  reason, and does not exist;
* a Job whose recipe cannot be added is admitted with kubectl printing why;
* in the namespace not opted in, the same Jobs are stored as written.
"""

from __future__ import annotations

import base64
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from scheduler.feed.admission import OPT_IN, OPT_LABEL, RESUME_RULE
from scheduler.tools.devcluster import certs, procs, rest
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import GPU, POOL_LABEL, QUEUE_LABEL, Tenant
from tests.e2e.live_process import SchedulerProcess
from tests.e2e.test_deploy_support import REPO, kubectl

pytestmark = pytest.mark.e2e

WEBHOOK_DIR = REPO / "deploy" / "webhook"
RUNTIME = "gangscheduler.io/expected-runtime"


def configurations(port: int, ca: Path, tag: str) -> list[dict[str, Any]]:
    """deploy/webhook's two configurations, named for this test and pointed at *port*."""
    bundle = base64.b64encode(ca.read_bytes()).decode()
    out = []
    for name in ("mutatingwebhookconfiguration.yaml", "validatingwebhookconfiguration.yaml"):
        doc = yaml.safe_load((WEBHOOK_DIR / name).read_text())
        doc["metadata"]["name"] += f"-{tag}"
        doc["metadata"].pop("annotations", None)  # cert-manager's: no cert-manager here
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
        out.append(doc)
    return out


def job(name: str, tenant: Tenant, annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None, restart: str = "Never",
        policy: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Job as a new user writes it: no scheduler name, no queue, no podFailurePolicy."""
    spec: dict[str, Any] = {
        "completions": 1, "parallelism": 1, "backoffLimit": 0,
        "template": {"spec": {
            "restartPolicy": restart,
            "nodeSelector": {POOL_LABEL: tenant.pool},
            "containers": [{"name": "train", "image": "trainer:1",
                            "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}}}]}}}
    if policy is not None:
        spec["podFailurePolicy"] = policy
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


@pytest.fixture
def served(control_plane: ControlPlane, tenant: Tenant,
           tmp_path: Path) -> Iterator[SchedulerProcess]:
    """The tenant's scheduler, serving the webhook; deploy/webhook's configurations; the
    tenant's namespace opted in. Configurations are removed before the scheduler stops."""
    cp = control_plane
    tag = uuid.uuid4().hex[:8]
    pki = certs.CertPaths.under(cp.cluster.state_dir / "pki")
    cert, key = certs.loopback_serving(pki, f"gang-scheduler-webhook-{tag}")
    port = procs.free_port()
    scheduler = SchedulerProcess(cp, tenant, tmp_path, args=(  # as the run --help example
        "--webhook-address", f"127.0.0.1:{port}", "--webhook-cert", str(cert),
        "--webhook-key", str(key)))
    admission = client.AdmissionregistrationV1Api(cp.api)
    docs = configurations(port, pki.ca_cert, tag)
    scheduler.start()
    try:
        rest.call(admission.create_mutating_webhook_configuration, docs[0])
        rest.call(admission.create_validating_webhook_configuration, docs[1])
        kubectl(cp.kubeconfig, "label", "namespace", tenant.namespace, f"{OPT_LABEL}={OPT_IN}")
        # The apiserver takes in new configurations from its own watch: wait until a
        # dry-run create comes back defaulted.
        probe = job("probe", tenant)
        batch = client.BatchV1Api(cp.api)

        def defaulted() -> bool:
            got = rest.call(batch.create_namespaced_job, tenant.namespace, probe,
                            dry_run="All")
            return bool(got["spec"].get("podFailurePolicy"))

        wait_for(defaulted, 60, 0.5, what="the webhook configurations in force")
        yield scheduler
    finally:
        for delete, doc in ((admission.delete_mutating_webhook_configuration, docs[0]),
                            (admission.delete_validating_webhook_configuration, docs[1])):
            try:
                rest.call(delete, doc["metadata"]["name"])
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
        scheduler.stop()


def apply(cp: ControlPlane, namespace: str, obj: dict[str, Any],
          check: bool = True) -> subprocess.CompletedProcess[str]:
    return kubectl(cp.kubeconfig, "apply", "-n", namespace, "-f", "-",
                   stdin=yaml.safe_dump(obj), check=check)


def stored(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any] | None:
    batch = client.BatchV1Api(cp.api)
    try:
        return rest.call(batch.read_namespaced_job, name, namespace)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_opted_in_jobs_get_the_defaults_bad_annotations_are_refused_others_untouched(
        control_plane: ControlPlane, tenant: Tenant, served: SchedulerProcess) -> None:
    cp, ns = control_plane, tenant.namespace
    tenant.create_nodes(1)

    # A bare Job: the scheduler's name, the namespace's queue, the resume recipe.
    apply(cp, ns, job("bare", tenant))
    got = stored(cp, ns, "bare")
    assert got is not None
    assert got["spec"]["template"]["spec"]["schedulerName"] == tenant.scheduler_name
    assert got["metadata"]["labels"][QUEUE_LABEL] == tenant.queue
    assert got["spec"]["template"]["metadata"]["labels"][QUEUE_LABEL] == tenant.queue
    assert got["spec"]["podFailurePolicy"] == {"rules": [RESUME_RULE]}

    # ... and the scheduler takes its pod (named by the webhook, not by the user).
    def bound() -> bool:
        pods = rest.call(cp.core.list_namespaced_pod, ns,
                         label_selector="batch.kubernetes.io/job-name=bare")["items"]
        return bool(pods) and all(p["spec"].get("nodeName") for p in pods)

    wait_for(bound, 120, 0.5, what="the defaulted Job's pod bound by the scheduler")

    # What the user wrote is kept.
    own = {"rules": [{"action": "FailJob",
                      "onExitCodes": {"operator": "In", "values": [42]}}]}
    kept = apply(cp, ns, job("own", tenant, labels={QUEUE_LABEL: "elsewhere"}, policy=own))
    assert "queue 'elsewhere' does not take this namespace's gangs" in kept.stderr, kept.stderr
    assert f"use one of: {tenant.queue}" in kept.stderr
    got = stored(cp, ns, "own")
    assert got is not None
    assert got["metadata"]["labels"][QUEUE_LABEL] == "elsewhere"
    assert got["spec"]["template"]["metadata"]["labels"][QUEUE_LABEL] == "elsewhere"
    assert got["spec"]["podFailurePolicy"]["rules"][0]["action"] == "FailJob"

    # A malformed annotation: refused at apply time, naming the field and the reason.
    refused = apply(cp, ns, job("bad", tenant, annotations={RUNTIME: "soon"}), check=False)
    assert refused.returncode != 0, refused.stdout
    print(f"kubectl apply (bad annotation):\n{refused.stderr}")  # the README shows it
    assert "metadata.annotations[gangscheduler.io/expected-runtime]: cannot read 'soon'" in \
        refused.stderr, refused.stderr
    assert stored(cp, ns, "bad") is None

    # A recipe that cannot be added: admitted, and kubectl prints why.
    warned = apply(cp, ns, job("onfailure", tenant, restart="OnFailure"))
    assert "spec.podFailurePolicy not added: it needs restartPolicy Never" in warned.stderr
    print(f"kubectl apply (OnFailure):\n{warned.stdout}{warned.stderr}")
    got = stored(cp, ns, "onfailure")
    assert got is not None and "podFailurePolicy" not in got["spec"]

    # A namespace not opted in: stored as written, the bad annotation included.
    plain = cp.new_namespace("plain")
    apply(cp, plain, job("bare", tenant))
    apply(cp, plain, job("bad", tenant, annotations={RUNTIME: "soon"}))
    for name in ("bare", "bad"):
        got = stored(cp, plain, name)
        assert got is not None
        assert got["spec"]["template"]["spec"]["schedulerName"] == "default-scheduler"
        assert QUEUE_LABEL not in (got["metadata"].get("labels") or {})
        assert "podFailurePolicy" not in got["spec"]
    got = stored(cp, plain, "bad")
    assert got is not None and got["metadata"]["annotations"][RUNTIME] == "soon"

    # The scheduler counts what its webhook answered.
    with urllib.request.urlopen(f"http://127.0.0.1:{served.port}/metrics", timeout=10) as resp:
        metrics = resp.read().decode()
    for webhook, result in (("mutate", "patched"), ("validate", "refused")):
        line = (f'gang_scheduler_admission_reviews_total{{result="{result}",'
                f'webhook="{webhook}"}}')
        assert line in metrics, metrics[-2000:]


def jobset(name: str, tenant: Tenant, annotations: dict[str, str] | None = None
           ) -> dict[str, Any]:
    """A JobSet of two one-pod replicated Jobs as a new user writes it: no scheduler name,
    no queue."""
    pod = {"restartPolicy": "Never", "nodeSelector": {POOL_LABEL: tenant.pool},
           "containers": [{"name": "train", "image": "trainer:1",
                           "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}}}]}
    rjobs = [{"name": rjob, "replicas": 1, "template": {"spec": {
        "parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {"spec": pod}}}}
        for rjob in ("driver", "workers")]
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta,
            "spec": {"replicatedJobs": rjobs}}


def test_an_opted_in_jobset_gets_the_defaults_and_a_bad_gang_scope_is_refused(
        control_plane: ControlPlane, tenant: Tenant, served: SchedulerProcess) -> None:
    """With the real JobSet controller (and its own webhooks): the JobSet is stored with the
    scheduler's name in every replicated Job and the namespace's queue, the Jobs its
    controller makes are admitted (not given a queue or a recipe of their own), and the
    scheduler binds its pods; ``gang-scope: per-job`` is refused naming the field."""
    if not control_plane.operators:
        pytest.skip("the session cluster runs without the training operators")
    cp, ns = control_plane, tenant.namespace
    tenant.create_nodes(1)
    apply(cp, ns, jobset("pair", tenant))
    got = rest.call(cp.custom.get_namespaced_custom_object, "jobset.x-k8s.io", "v1alpha2", ns,
                    "jobsets", "pair")
    assert got["metadata"]["labels"][QUEUE_LABEL] == tenant.queue
    for rjob in got["spec"]["replicatedJobs"]:
        assert rjob["template"]["spec"]["template"]["spec"]["schedulerName"] == \
            tenant.scheduler_name

    def bound() -> list[str]:
        pods = rest.call(cp.core.list_namespaced_pod, ns,
                         label_selector="jobset.sigs.k8s.io/jobset-name=pair")["items"]
        return sorted(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName"))

    wait_for(lambda: len(bound()) == 2, 120, 0.5, what="the JobSet's 2 pods bound")
    jobs = rest.call(client.BatchV1Api(cp.api).list_namespaced_job, ns,
                     label_selector="jobset.sigs.k8s.io/jobset-name=pair")["items"]
    assert len(jobs) == 2
    for made in jobs:  # the JobSet's failurePolicy decides, and its label gives the queue
        assert "podFailurePolicy" not in made["spec"]
        assert QUEUE_LABEL not in (made["metadata"].get("labels") or {})

    refused = apply(cp, ns, jobset("split", tenant, {"gangscheduler.io/gang-scope": "per-job"}),
                    check=False)
    assert refused.returncode != 0, refused.stdout
    assert ("metadata.annotations[gangscheduler.io/gang-scope]: 'per-job' is not one of "
            "jobset, replicated-job") in refused.stderr, refused.stderr
