"""Fencing: writes go out only while the replica owns the Lease; reads always do; a refusal
is a TransportError subclass (the write did not happen), counted, and logged once. Bindings
and Evictions carry the term, and the apiserver fence's refusal is a fence, not a failure."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s_client
from structlog.testing import capture_logs

from scheduler.kube.client import KubeClient, Response, TransportError
from scheduler.kube.lead.fence import (
    LEADER_ANNOTATION,
    LEASE_ANNOTATION,
    TERM_ANNOTATION,
    USER_ANNOTATION,
    Fenced,
    FencedClient,
    FenceToken,
)
from scheduler.kube.write.binder import FENCED, SKIPPED, Binder
from scheduler.model import PodRef


class Recording(KubeClient):
    """A KubeClient to an address nothing listens on; ``no_network`` records its requests."""

    def __init__(self) -> None:
        configuration = k8s_client.Configuration()
        configuration.host = "https://127.0.0.1:1"
        super().__init__(k8s_client.ApiClient(configuration))


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    sent: list[tuple[str, str]] = []

    def request(self: KubeClient, method: str, path: str, **_: Any) -> Response:
        sent.append((method, path))
        return Response(200, b"{}")

    monkeypatch.setattr(KubeClient, "request", request)
    return sent


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_a_write_by_a_replica_without_the_lease_is_never_sent(
        method: str, no_network: list[tuple[str, str]]) -> None:
    leading, refused = [False], []
    fc = FencedClient(Recording(), lambda: leading[0], on_fenced=lambda: refused.append(1))
    with pytest.raises(Fenced) as raised:
        fc.request(method, "/api/v1/namespaces/ns/pods/p/binding", body={})
    assert isinstance(raised.value, TransportError)  # callers treat it as "not written"
    assert "does not own the leader Lease" in str(raised.value)
    assert no_network == [] and refused == [1]


def test_reads_always_go_out_and_writes_resume_once_the_lease_is_ours_again(
        no_network: list[tuple[str, str]]) -> None:
    leading = [False]
    fc = FencedClient(Recording(), lambda: leading[0])
    fc.request("GET", "/api/v1/pods")
    fc.get_json("/api/v1/nodes")
    with pytest.raises(Fenced):
        fc.request("PATCH", "/api/v1/namespaces/ns/pods/p/status", body={})
    leading[0] = True
    fc.request("PATCH", "/api/v1/namespaces/ns/pods/p/status", body={})
    assert no_network == [("GET", "/api/v1/pods"), ("GET", "/api/v1/nodes"),
                          ("PATCH", "/api/v1/namespaces/ns/pods/p/status")]


def test_the_lease_is_judged_at_the_moment_of_each_write(
        no_network: list[tuple[str, str]]) -> None:
    """A pause between two binds of one gang: the second is refused, not sent on a plan
    made while leading."""
    answers = iter([True, False])
    fc = FencedClient(Recording(), lambda: next(answers))
    fc.request("POST", "/api/v1/namespaces/ns/pods/a/binding", body={})
    with pytest.raises(Fenced):
        fc.request("POST", "/api/v1/namespaces/ns/pods/b/binding", body={})
    assert no_network == [("POST", "/api/v1/namespaces/ns/pods/a/binding")]


# The server-side half: the term stamped on Bindings and Evictions, the policy's refusal --------
TOKEN = FenceToken("replica-a", 5, "sched/gang-scheduler")
STALE = ("gang-scheduler leader fence: written by replica-a in term 5, but the Lease "
         "sched/gang-scheduler is held by replica-b in term 6: a stale leader, not sent on")


def answering(monkeypatch: pytest.MonkeyPatch, status: int,
              message: str = "") -> list[tuple[str, str, Any]]:
    """Every request answers *status* with *message*; returns (method, path, body) sent."""
    sent: list[tuple[str, str, Any]] = []

    def request(self: KubeClient, method: str, path: str, *, body: Any = None,
                **_: Any) -> Response:
        sent.append((method, path, body))
        return Response(status, json.dumps({"kind": "Status", "message": message}).encode())

    monkeypatch.setattr(KubeClient, "request", request)
    return sent


@pytest.mark.parametrize("sub", ["binding", "eviction"])
def test_bindings_and_evictions_carry_the_term_and_other_writes_do_not(
        sub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sent = answering(monkeypatch, 201)
    fc = FencedClient(Recording(), lambda: True, token=lambda: TOKEN)
    body: dict[str, Any] = {"kind": "X", "metadata": {"name": "p", "annotations": {"keep": "me"}}}
    fc.request("POST", f"/api/v1/namespaces/ns/pods/p/{sub}", body=body)
    fc.request("PATCH", "/api/v1/namespaces/ns/pods/p/status", body={"metadata": {}})
    fc.request("POST", "/api/v1/namespaces/ns/events", body={"metadata": {}})
    (_, _, stamped_body), (_, _, status_body), (_, _, event_body) = sent
    assert stamped_body["metadata"]["annotations"] == {
        "keep": "me", LEADER_ANNOTATION: "replica-a", TERM_ANNOTATION: "5",
        LEASE_ANNOTATION: "sched/gang-scheduler"}
    assert body["metadata"]["annotations"] == {"keep": "me"}  # the caller's body untouched
    assert status_body == {"metadata": {}} and event_body == {"metadata": {}}


def test_without_a_term_nothing_is_stamped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leader election off: no stamp, so the admission policy lets the bind through."""
    sent = answering(monkeypatch, 201)
    FencedClient(Recording(), lambda: True).request(
        "POST", "/api/v1/namespaces/ns/pods/p/binding", body={"metadata": {"name": "p"}})
    assert sent[0][2] == {"metadata": {"name": "p"}}


def test_a_write_the_apiserver_fence_refused_is_fenced_counted_and_logged_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    answering(monkeypatch, 403, STALE)
    refused: list[int] = []
    fc = FencedClient(Recording(), lambda: True, on_fenced=lambda: refused.append(1),
                      token=lambda: TOKEN, on_refused_by_apiserver=lambda: refused.append(2))
    with capture_logs() as logs:
        for pod in ("a", "b"):
            with pytest.raises(Fenced) as raised:
                fc.request("POST", f"/api/v1/namespaces/ns/pods/{pod}/binding", body={})
            assert "refused by the apiserver" in str(raised.value)
            assert "term 6" in str(raised.value)
    assert refused == [2, 1, 2, 1]
    assert [e["event"] for e in logs] == ["writes_fenced"] and "term 6" in logs[0]["reason"]


@pytest.mark.parametrize("status, message", [
    (403, 'pods "p" is forbidden: User "x" cannot create resource "pods/binding"'),
    (403, "ValidatingAdmissionPolicy 'other' denied request: no"),
    (422, STALE.replace("gang-scheduler leader fence:", "")),
    (409, "conflict")])
def test_other_refusals_are_answers_not_fences(status: int, message: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    answering(monkeypatch, status, message)
    fc = FencedClient(Recording(), lambda: True, token=lambda: TOKEN)
    resp = fc.request("POST", "/api/v1/namespaces/ns/pods/p/binding", body={})
    assert resp.status == status


def test_a_bind_refused_by_the_apiserver_fence_leaves_the_gang_to_the_leader(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The pause fell between the client-side check and the send of the second member:
    the apiserver refuses it; the first member stays bound (nothing deleted by this
    replica), and the gang is reported fenced, not failed."""
    sent: list[tuple[str, str]] = []

    def request(self: KubeClient, method: str, path: str, **_: Any) -> Response:
        sent.append((method, path))
        if path.endswith("/w1/binding"):
            return Response(403, json.dumps({"message": STALE}).encode())
        return Response(201, b"{}")

    monkeypatch.setattr(KubeClient, "request", request)
    fc = FencedClient(Recording(), lambda: True, token=lambda: TOKEN)
    binder = Binder(fc, concurrency=1)
    refs = [PodRef("ns", n, f"uid-{n}") for n in ("w0", "w1", "w2")]
    out = binder.bind_gang([(r, "n0") for r in refs], "gang-scheduler", "ns/g")
    binder.close()
    assert out.fenced and not out.transient and out.parked == ()
    assert out.bound == ((refs[0], "n0"),)
    assert [f.code for f in out.failed] == [FENCED, SKIPPED]
    assert not any(method == "DELETE" for method, _ in sent)
    assert sent.count(("POST", "/api/v1/namespaces/ns/pods/w1/binding")) == 1  # not retried


def test_an_eviction_refused_by_the_apiserver_fence_is_reported_fenced(
        monkeypatch: pytest.MonkeyPatch) -> None:
    answering(monkeypatch, 403, STALE)
    binder = Binder(FencedClient(Recording(), lambda: True, token=lambda: TOKEN))
    out = binder.evict_pod(PodRef("ns", "p", "uid-p"))
    binder.close()
    assert not out.ok and out.code == FENCED and "term 6" in out.reason


def test_a_pod_delete_is_preceded_by_a_stamp_naming_the_term_and_the_user(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sent = answering(monkeypatch, 200)
    monkeypatch.setattr("scheduler.kube.lead.fence.whoami", lambda _: "system:serviceaccount:gs:gs")
    fc = FencedClient(Recording(), lambda: True, token=lambda: TOKEN)
    body = {"kind": "DeleteOptions", "gracePeriodSeconds": 0, "preconditions": {"uid": "u1"}}
    fc.request("DELETE", "/api/v1/namespaces/ns/pods/p", body=body)
    fc.request("DELETE", "/api/v1/namespaces/ns/persistentvolumeclaims/c", body={})
    (patch, delete, other) = sent
    assert patch[:2] == ("PATCH", "/api/v1/namespaces/ns/pods/p")
    assert patch[2]["metadata"] == {"uid": "u1", "annotations": {
        **TOKEN.annotations(), USER_ANNOTATION: "system:serviceaccount:gs:gs"}}
    assert delete == ("DELETE", "/api/v1/namespaces/ns/pods/p", body)
    assert other[0] == "DELETE" and other[1].endswith("/c")  # not a pod: not stamped


def test_a_refused_stamp_fences_the_delete_and_a_vanished_pod_answers_for_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("scheduler.kube.lead.fence.whoami", lambda _: "u")
    sent = answering(monkeypatch, 403, STALE)
    fc = FencedClient(Recording(), lambda: True, token=lambda: TOKEN)
    with pytest.raises(Fenced, match="stamping refused by the apiserver"):
        fc.request("DELETE", "/api/v1/namespaces/ns/pods/p", body={})
    assert [m for m, _, _ in sent] == ["PATCH"]  # the DELETE never went out
    sent = answering(monkeypatch, 404, 'pods "p" not found')
    assert fc.request("DELETE", "/api/v1/namespaces/ns/pods/p", body={}).status == 404
    assert [m for m, _, _ in sent] == ["PATCH"]


def test_without_a_term_or_a_user_a_delete_is_not_stamped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sent = answering(monkeypatch, 200)
    FencedClient(Recording(), lambda: True).request("DELETE", "/api/v1/namespaces/ns/pods/p")
    monkeypatch.setattr("scheduler.kube.lead.fence.whoami", lambda _: None)
    FencedClient(Recording(), lambda: True, token=lambda: TOKEN).request(
        "DELETE", "/api/v1/namespaces/ns/pods/p")
    assert [m for m, _, _ in sent] == ["DELETE", "DELETE"]
