"""The admission webhook's edge (``scheduler.run.webhook``): the AdmissionReview envelope the
apiserver expects, and HTTPS with a certificate that is read again when it is rotated."""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
from pathlib import Path
from typing import Any

import pytest

from scheduler.feed.admission import Defaults
from scheduler.run.webhook import MUTATE, VALIDATE, BadReview, answer, serve_webhook
from scheduler.tools.devcluster import certs

NOW = 1_800_000_000.0


def defaults_of(namespace: str) -> Defaults:
    return Defaults("gang-scheduler", f"q-{namespace}")


def review(kind: dict[str, str], obj: dict[str, Any], operation: str = "CREATE",
           old: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": kind, "namespace": "ns", "name": "x",
                        "operation": operation, "object": obj, "oldObject": old}}


POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}
JOB_KIND = {"group": "batch", "version": "v1", "kind": "Job"}
BAD = {"metadata": {"annotations": {"gangscheduler.io/expected-runtime": "soon"}}}


def test_a_mutation_is_a_base64_json_patch_with_the_namespace_queue() -> None:
    out = answer(review(POD_KIND, {"metadata": {}, "spec": {}}), MUTATE, defaults_of, NOW)
    response = out["response"]
    assert out["kind"] == "AdmissionReview" and response["uid"] == "u-1"
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert {"op": "add", "path": "/metadata/labels/gangscheduler.io~1queue",
            "value": "q-ns"} in patch


def test_a_refusal_names_the_field_in_the_status_message() -> None:
    response = answer(review(JOB_KIND, BAD), VALIDATE, defaults_of, NOW)["response"]
    assert response["allowed"] is False
    assert response["status"]["message"].startswith(
        "gang-scheduler: metadata.annotations[gangscheduler.io/expected-runtime]: cannot read")


@pytest.mark.parametrize(("endpoint", "operation", "kind"), [
    (MUTATE, "UPDATE", POD_KIND),  # defaults on creation only
    (MUTATE, "CREATE", {"group": "apps", "version": "v1", "kind": "Deployment"}),
    (VALIDATE, "DELETE", JOB_KIND),
    (MUTATE, "CREATE", JOB_KIND),  # the mutating endpoint refuses nothing
])
def test_what_is_not_ours_to_answer_is_allowed_untouched(
        endpoint: str, operation: str, kind: dict[str, str]) -> None:
    response = answer(review(kind, BAD | {"spec": {}}, operation), endpoint, defaults_of,
                      NOW)["response"]
    assert response["allowed"] is True and "status" not in response
    if kind is not JOB_KIND:
        assert "patch" not in response


@pytest.mark.parametrize("body", [{}, {"request": {}}, [], {"request": {"uid": 3}}])
def test_a_body_that_is_no_review_is_refused_as_such(body: Any) -> None:
    with pytest.raises(BadReview, match=r"request\.uid"):
        answer(body, VALIDATE, defaults_of, NOW)


# Over HTTPS ------------------------------------------------------------------------------
@pytest.fixture
def pki(tmp_path: Path) -> certs.CertPaths:
    return certs.generate(tmp_path / "pki")


def _post(port: int, ca: Path, path: str, body: dict[str, Any]) -> tuple[int, Any, bytes]:
    context = ssl.create_default_context(cafile=str(ca))
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        assert isinstance(conn.sock, ssl.SSLSocket)
        peer = conn.sock.getpeercert(binary_form=True)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, json.loads(data) if resp.status == 200 else data, peer or b""
    finally:
        conn.close()


def test_reviews_over_tls_and_a_rotated_certificate_is_served_without_a_restart(
        pki: certs.CertPaths) -> None:
    cert, key = certs.loopback_serving(pki, "webhook")
    counts: list[tuple[str, str]] = []
    server = serve_webhook(defaults_of, lambda: NOW, "127.0.0.1", 0, cert, key,
                           counted=lambda *c: counts.append(c))
    port = server.server_address[1]
    try:
        status, out, first = _post(port, pki.ca_cert, VALIDATE, review(JOB_KIND, BAD))
        assert status == 200 and out["response"]["allowed"] is False
        status, body, _ = _post(port, pki.ca_cert, "/nope", review(JOB_KIND, BAD))
        assert status == 404
        status, body, _ = _post(port, pki.ca_cert, VALIDATE, {"request": {}})
        assert status == 400 and b"request.uid" in body

        certs.loopback_serving(pki, "webhook")  # rotation: new files in place
        stat = os.stat(cert)  # same-second writes: make the change visible to the mtime check
        os.utime(cert, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        status, out, second = _post(port, pki.ca_cert, MUTATE,
                                    review(POD_KIND, {"metadata": {}, "spec": {}}))
        assert status == 200 and out["response"]["allowed"] is True
        assert second != first
        assert counts == [("validate", "refused"), ("mutate", "patched")]  # answered reviews
    finally:
        server.shutdown()


def test_an_unreadable_certificate_stops_the_start(tmp_path: Path) -> None:
    missing = tmp_path / "tls.crt"
    with pytest.raises(OSError):
        serve_webhook(defaults_of, lambda: NOW, "127.0.0.1", 0, missing, tmp_path / "tls.key")
