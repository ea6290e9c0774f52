"""The training operators' webhook configurations, rewritten for loopback (no cluster needed)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from scheduler.tools.devcluster import operators

MANIFEST = """
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: mjobset.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-jobset}}
- name: mpod.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validating-webhook-configuration}
webhooks:
- name: vjobset.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /validate-jobset}}
"""
PATCH = """
- op: replace
  path: /webhooks/1
  value:
    name: mpod.kb.io
    clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}}
    objectSelector: {matchExpressions: [{key: jobset.sigs.k8s.io/jobset-name, operator: Exists}]}
"""


@pytest.fixture
def cached_jobset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> operators.Operator:
    """JobSet's operator with its webhook manifests in a fresh binary cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    op = operators.JOBSET
    for relative, text in ((op.webhooks, MANIFEST), (op.webhook_patches[0], PATCH),
                           (op.webhook_patches[1], "[]")):
        path = op.component.manifest(relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return op


def test_webhooks_call_the_loopback_server_trusting_the_cluster_ca(
        cached_jobset: operators.Operator, tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nfake\n")
    mutating, validating = operators.webhook_configurations(cached_jobset, 9443, ca)
    assert mutating["metadata"] == {"name": "jobset-mutatingwebhookconfiguration"}
    assert validating["metadata"] == {"name": "jobset-validatingwebhookconfiguration"}
    bundle = base64.b64encode(ca.read_bytes()).decode()
    hooks = [*mutating["webhooks"], *validating["webhooks"]]
    assert [h["clientConfig"] for h in hooks] == [
        {"url": f"https://127.0.0.1:9443{path}", "caBundle": bundle}
        for path in ("/mutate-jobset", "/mutate--v1-pod", "/validate-jobset")]
    # JobSet's kustomize patch: its pod webhook sees only the pods of JobSets.
    assert mutating["webhooks"][1]["objectSelector"] == yaml.safe_load(PATCH)[0]["value"][
        "objectSelector"]
    assert "objectSelector" not in mutating["webhooks"][0]


@pytest.mark.parametrize(("ops", "expected"), [
    ([{"op": "replace", "path": "/metadata/name", "value": "x"}],
     {"metadata": {"name": "x"}, "webhooks": [{"name": "a"}]}),
    ([{"op": "replace", "path": "/webhooks/0", "value": {"name": "b"}}],
     {"metadata": {"name": "n"}, "webhooks": [{"name": "b"}]}),
])
def test_replace_ops(ops: list[dict[str, object]], expected: dict[str, object]) -> None:
    doc = {"metadata": {"name": "n"}, "webhooks": [{"name": "a"}]}
    assert operators.replace_ops(doc, ops) == expected
    assert doc == {"metadata": {"name": "n"}, "webhooks": [{"name": "a"}]}  # not changed


def test_an_unsupported_patch_op_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match=r"unsupported JSON patch op 'add' at /webhooks/-"):
        operators.replace_ops({"webhooks": []}, [{"op": "add", "path": "/webhooks/-",
                                                  "value": {}}])


KUEUE_MANIFEST = """
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: mclusterqueue.kb.io
  clientConfig: {service: {name: s, namespace: system,
                           path: /mutate-kueue-x-k8s-io-v1beta2-clusterqueue}}
- name: mjob.kb.io
  clientConfig: {service: {name: s, namespace: system, path: /mutate-batch-v1-job}}
- name: mpod.kb.io
  clientConfig: {service: {name: s, namespace: system, path: /mutate--v1-pod}}
- name: mjobset.kb.io
  clientConfig: {service: {name: s, namespace: system,
                           path: /mutate-jobset-x-k8s-io-v1alpha2-jobset}}
"""


def test_kueue_registers_only_the_webhooks_of_what_it_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its release names a webhook per integration; only the Job integration runs here, and a
    # webhook with no handler would refuse every pod (or JobSet) of the cluster.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    op = operators.KUEUE
    path = op.component.manifest(op.webhooks)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(KUEUE_MANIFEST)
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"fake")
    [mutating] = operators.webhook_configurations(op, 9443, ca)
    assert [h["name"] for h in mutating["webhooks"]] == ["mclusterqueue.kb.io", "mjob.kb.io"]
    assert operators.KUEUE_FRAMEWORKS == ("batch/job",)


def test_kuberay_runs_without_webhooks_or_a_batch_scheduler(tmp_path: Path) -> None:
    # Its release registers its webhook only with ENABLE_WEBHOOKS=true; with a batch
    # scheduler KubeRay would write that scheduler's name over its pods' schedulerName.
    op = operators.KUBERAY
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"fake")
    assert operators.webhook_configurations(op, 9443, ca) == []
    argv = operators.argv(op, tmp_path, tmp_path / "certs", 9443, 8081)
    assert "--metrics-addr=0" in argv and "--enable-leader-election=false" in argv
    assert "--health-probe-bind-address=127.0.0.1:8081" in argv
    assert not [a for a in argv if "batch-scheduler" in a or "webhook" in a]
