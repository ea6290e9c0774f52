"""The HTTP endpoints an operator and the kubelet probe: /metrics, /healthz, /readyz; and,
when given a view, the read-only dashboard (/ and /dashboard) and its data (/api/v1/state);
when given a chargeback source, GPU-hours and cost per team (/api/v1/chargeback?period=day or
month: the accrual's in-memory ledger, lost on restart; Prometheus keeps the durable history).

Every endpoint answers GET only and changes nothing; the state shows what ``gang-scheduler
queues``/``gangs`` show (no Secrets, no config). Exposure is that of the metrics port: keep
the Service ClusterIP and reach it with ``kubectl port-forward`` or through an authenticating
proxy, as for /metrics.

/healthz answers while the process and its scheduling loop are alive (the loop reports a
heartbeat; a loop stuck for longer than ``stall_after`` seconds fails the probe so the pod
is restarted). /readyz answers once the caches have synced; a standby replica that is not
the leader is ready too (it is healthy, merely waiting).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from scheduler.report.chargeback import PERIODS, Period, Row
from scheduler.views import html
from scheduler.views.state import ClusterView

#: The dashboard's data, or None while this replica has run no cycle (a standby).
ViewSource = Callable[[], ClusterView | None]
NO_VIEW = b"no scheduling cycle yet: this replica is a standby or still starting\n"
#: The chargeback rows of a period, or None while this replica has charged nothing (a standby).
ChargebackSource = Callable[[Period], tuple[Row, ...] | None]


class Health:
    """Liveness and readiness state shared between the loop and the HTTP server."""

    def __init__(self, stall_after: float = 120.0, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.stall_after = stall_after
        self._beat = clock()
        self._ready = False

    def heartbeat(self) -> None:
        self._beat = self._clock()

    def set_ready(self, ready: bool) -> None:
        self._ready = ready

    @property
    def alive(self) -> bool:
        return self._clock() - self._beat < self.stall_after

    @property
    def ready(self) -> bool:
        return self._ready


def serve(registry: CollectorRegistry, health: Health, host: str = "0.0.0.0",
          port: int = 8080, view: ViewSource | None = None,
          chargeback: ChargebackSource | None = None) -> ThreadingHTTPServer:
    """Serve the endpoints from a daemon thread; ``server.server_address`` has the port.
    Without *view* there is no dashboard and no /api/v1/state; without *chargeback*, no
    /api/v1/chargeback."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            if view is not None and path in ("/", "/dashboard", "/api/v1/state"):
                self._view(path, parse_qs(query))
            elif chargeback is not None and path == "/api/v1/chargeback":
                self._chargeback(parse_qs(query))
            elif path == "/metrics":
                self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                ok = health.alive
                self._send(200 if ok else 503, b"ok\n" if ok else b"scheduling loop stalled\n")
            elif path == "/readyz":
                ok = health.ready
                self._send(200 if ok else 503, b"ok\n" if ok else b"caches not synced\n")
            else:
                self._send(404, b"not found: try /metrics, /healthz or /readyz"
                           + (b", /dashboard or /api/v1/state\n" if view else b"\n"))

        def _view(self, path: str, query: dict[str, list[str]]) -> None:
            assert view is not None
            current = view()
            if current is None:
                self._send(503, NO_VIEW)
                return
            wanted = [n for item in query.get("namespace", []) for n in item.split(",") if n]
            current = current.for_namespaces(wanted or None)
            if path == "/api/v1/state":
                self._send(200, json.dumps(current.to_dict()).encode(), "application/json")
            else:
                self._send(200, html.render(current).encode(), "text/html; charset=utf-8")

        def _chargeback(self, query: dict[str, list[str]]) -> None:
            assert chargeback is not None
            period = query.get("period", ["day"])[-1]
            if period not in PERIODS:
                self._send(400, f"period: must be one of {', '.join(PERIODS)}, got {period!r}\n"
                           .encode())
                return
            rows = chargeback(period)  # type: ignore[arg-type]  # checked just above
            if rows is None:
                self._send(503, NO_VIEW)
                return
            wanted = {n for item in query.get("namespace", []) for n in item.split(",") if n}
            shown = [r.to_dict() for r in rows if not wanted or r.namespace in wanted]
            body = {"period": period, "rows": shown,
                    "note": "in memory since this process started: a restart loses it; "
                            "Prometheus keeps the durable history"}
            self._send(200, json.dumps(body).encode(), "application/json")

        def _send(self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            # Read-only pages: never framed by another site, never sniffed into something else.
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("X-Frame-Options", "DENY")
            self.send_header("Content-Security-Policy",
                             "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # probes every few seconds would drown the scheduler's own logs

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
