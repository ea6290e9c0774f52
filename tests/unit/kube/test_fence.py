"""Fencing: writes go out only while the replica holds the Lease; reads always do; a refusal
is a TransportError subclass (the write did not happen), counted, and logged once."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s_client

from scheduler.kube.client import KubeClient, Response, TransportError
from scheduler.kube.fence import Fenced, FencedClient


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
    holds, refused = [False], []
    fc = FencedClient(Recording(), lambda: holds[0], on_fenced=lambda: refused.append(1))
    with pytest.raises(Fenced) as raised:
        fc.request(method, "/api/v1/namespaces/ns/pods/p/binding", body={})
    assert isinstance(raised.value, TransportError)  # callers treat it as "not written"
    assert "does not hold the leader Lease" in str(raised.value)
    assert no_network == [] and refused == [1]


def test_reads_always_go_out_and_writes_resume_once_the_lease_is_held_again(
        no_network: list[tuple[str, str]]) -> None:
    holds = [False]
    fc = FencedClient(Recording(), lambda: holds[0])
    fc.request("GET", "/api/v1/pods")
    fc.get_json("/api/v1/nodes")
    with pytest.raises(Fenced):
        fc.request("PATCH", "/api/v1/namespaces/ns/pods/p/status", body={})
    holds[0] = True
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
