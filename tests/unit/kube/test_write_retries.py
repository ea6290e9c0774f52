"""Status writes that failed for want of an answer are retried once the apiserver answers,
and counted; writes that were answered (even with an error, a 404, a 422) are not retried.

The writes go through a real ``KubeClient`` (so its count of unanswered writes is the one the
writer reads) over a scripted transport: the apiserver is "down" (no reply), returns 503, or
answers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s_client

from scheduler.kube.client import KubeClient, TransportError
from scheduler.kube.events import EventReason, EventRecorder, ObjectRef
from scheduler.kube.write.status import StatusWriter
from scheduler.kube.write.writer import BackgroundWriter, Retry
from scheduler.model import PodRef
from tests.e2e.cluster_api import wait_for


class Apiserver:
    """Replies with ``status`` (0: no reply at all) and records what was written."""

    def __init__(self) -> None:
        self.status = 0
        self.written: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def call_api(self, url: str, method: str, **_: Any) -> Any:
        with self.lock:
            status = self.status
        if status == 0:
            raise urllib3.exceptions.ProtocolError("connection refused")
        if 200 <= status < 300 and method != "GET":
            with self.lock:
                self.written.append((method, url.split("/api", 1)[-1]))

        class Reply:
            data = b'{"message": "etcd restarting"}' if status >= 500 else b"{}"

            def release_conn(self) -> None: ...

        Reply.status = status  # type: ignore[attr-defined]
        return type("R", (), {"response": Reply()})()


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> tuple[Apiserver, KubeClient, dict[str, int]]:
    configuration = k8s_client.Configuration()
    configuration.host = "https://127.0.0.1:1"
    kube = KubeClient(k8s_client.ApiClient(configuration))
    server = Apiserver()
    monkeypatch.setattr(kube.api_client, "call_api",
                        lambda method, url, **_: server.call_api(url, method))
    return server, kube, {"failed": 0, "retried": 0}


def writer_for(kube: KubeClient, counts: dict[str, int],
               answering: Callable[[], bool] | None = None) -> BackgroundWriter:
    def bump(name: str) -> Callable[[], None]:
        def inc() -> None:
            counts[name] += 1
        return inc
    return BackgroundWriter("test-writer", Retry(
        answering or (lambda: not kube.outages.down), bump("failed"), bump("retried"),
        interval=0.05, max_interval=0.2))


POD = PodRef("ns", "p-0", "uid-0")


def test_a_condition_written_during_an_outage_lands_once_the_apiserver_answers(
        world: tuple[Apiserver, KubeClient, dict[str, int]]) -> None:
    server, kube, counts = world
    statuses = StatusWriter(kube)
    writer = writer_for(kube, counts)
    writer.submit("pending/ns/g", lambda: statuses.set_unschedulable(POD, "Quota: full"))
    assert writer.flush()
    assert counts == {"failed": 1, "retried": 0} and writer.kept == 1
    # Postponed while down: a second task does not go out to fail.
    writer.submit("event/ns/g", lambda: None)
    assert writer.flush() and server.written == []
    with pytest.raises(TransportError):  # a read fails too, and is not a write to retry
        kube.request("GET", "/version")
    server.status = 200
    assert kube.request("GET", "/version").ok  # the informers get an answer: not down
    wait_for(lambda: server.written, 5, 0.01, what="the kept write retried")
    assert server.written == [("PATCH", "/v1/namespaces/ns/pods/p-0/status")]
    assert counts["retried"] >= 1 and writer.kept == 0
    writer.stop()


def test_a_5xx_is_retried_with_backoff_but_a_refusal_is_not(
        world: tuple[Apiserver, KubeClient, dict[str, int]]) -> None:
    server, kube, counts = world
    events = EventRecorder(kube)
    writer = writer_for(kube, counts)
    server.status = 503  # answered, so not "down": retried after the interval
    writer.submit("event/ns/g", lambda: events.emit(ObjectRef.pod(POD),
                                                    EventReason.SCHEDULED, "bound"))
    wait_for(lambda: counts["retried"] >= 2, 5, 0.01, what="retried while 503")
    server.status = 201
    wait_for(lambda: server.written, 5, 0.01, what="the event created once etcd is back")
    assert [m for m, _ in server.written] == ["POST"] and writer.kept == 0
    server.status, server.written = 422, []
    before = dict(counts)
    writer.submit("pending/ns/h", lambda: StatusWriter(kube).set_unschedulable(POD, "x"))
    assert writer.flush()
    # Answered: a refusal is counted as failed, but not retried (it would be refused again).
    assert counts == {**before, "failed": before["failed"] + 1} and writer.kept == 0
    writer.stop()


def test_a_newer_task_for_the_key_replaces_the_kept_one(
        world: tuple[Apiserver, KubeClient, dict[str, int]]) -> None:
    server, kube, counts = world
    statuses = StatusWriter(kube)
    writer = writer_for(kube, counts)
    writer.submit("pending/ns/g", lambda: statuses.set_unschedulable(POD, "old"))
    assert writer.flush() and writer.kept == 1
    writer.submit("pending/ns/g", lambda: statuses.set_unschedulable(POD, "new"))
    server.status = 200
    assert kube.request("GET", "/version").ok
    wait_for(lambda: server.written, 5, 0.01, what="the newer write made")
    assert writer.flush() and writer.kept == 0
    assert server.written == [("PATCH", "/v1/namespaces/ns/pods/p-0/status")]  # one: the newer
    assert statuses._pod_messages["uid-0"][0] == "new"
    writer.stop()
