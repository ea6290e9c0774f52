"""The HTTP endpoints answer as a kubelet probe and Prometheus expect."""

from __future__ import annotations

import urllib.error
import urllib.request

from scheduler.run.metrics import SchedulerMetrics
from scheduler.run.serve import Health, serve


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_endpoints() -> None:
    now = [0.0]
    health = Health(stall_after=10, clock=lambda: now[0])
    metrics = SchedulerMetrics()
    metrics.binds.labels("success").inc(3)
    server = serve(metrics.registry, health, host="127.0.0.1", port=0)
    port = server.server_address[1]
    try:
        assert _get(port, "/readyz")[0] == 503
        health.set_ready(True)
        assert _get(port, "/readyz") == (200, "ok\n")
        assert _get(port, "/healthz")[0] == 200
        now[0] = 11.0  # loop stopped beating
        assert _get(port, "/healthz")[0] == 503
        code, body = _get(port, "/metrics")
        assert code == 200
        assert 'gang_scheduler_binds_total{result="success"} 3.0' in body
        assert _get(port, "/nope")[0] == 404
    finally:
        server.shutdown()
