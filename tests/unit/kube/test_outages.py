"""An apiserver outage is two log lines (down, back with its duration and failed requests),
not one per failed request; the client's transport failures feed it."""

from __future__ import annotations

from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s_client
from structlog.testing import capture_logs

from scheduler.kube.client import KubeClient, Outages, TransportError


def test_an_outage_is_one_warning_down_and_one_back_with_its_duration() -> None:
    now = [100.0]
    outages = Outages("https://api", clock=lambda: now[0])
    with capture_logs() as logs:
        outages.answered()  # nothing to say while all is well
        for i in range(50):
            outages.failed(f"GET /api/v1/pods/{i}", "connection refused")
        now[0] = 112.5
        outages.answered()
        outages.answered()
    assert [(e["event"], e["log_level"]) for e in logs] == [
        ("apiserver_unreachable", "warning"), ("apiserver_reachable_again", "warning")]
    assert logs[0]["first"] == "GET /api/v1/pods/0"
    assert (logs[1]["unreachable_s"], logs[1]["failed_requests"]) == (12.5, 50)
    assert not outages.down


def test_the_client_reports_transport_failures_and_recoveries(
        monkeypatch: pytest.MonkeyPatch) -> None:
    configuration = k8s_client.Configuration()
    configuration.host = "https://127.0.0.1:1"
    kube = KubeClient(k8s_client.ApiClient(configuration))
    replies: list[Any] = [urllib3.exceptions.ProtocolError("connection refused")] * 3

    class Reply:
        status, data = 200, b"{}"

        def release_conn(self) -> None: ...

    def call_api(*_: Any, **__: Any) -> Any:
        if replies:
            raise replies.pop()
        return type("R", (), {"response": Reply()})()

    monkeypatch.setattr(kube.api_client, "call_api", call_api)
    with capture_logs() as logs:
        for _ in range(3):
            with pytest.raises(TransportError):
                kube.request("GET", "/api/v1/nodes")
        assert kube.outages.down
        assert kube.request("GET", "/api/v1/nodes").ok
    assert [e["event"] for e in logs] == ["apiserver_unreachable", "apiserver_reachable_again"]
    assert logs[1]["failed_requests"] == 3
