"""The HTTP endpoints an operator and the kubelet probe: /metrics, /healthz, /readyz.

/healthz answers while the process and its scheduling loop are alive (the loop reports a
heartbeat; a loop stuck for longer than ``stall_after`` seconds fails the probe so the pod
is restarted). /readyz answers once the caches have synced; a standby replica that is not
the leader is ready too (it is healthy, merely waiting).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


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
          port: int = 8080) -> ThreadingHTTPServer:
    """Serve the endpoints from a daemon thread; ``server.server_address`` has the port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                ok = health.alive
                self._send(200 if ok else 503, b"ok\n" if ok else b"scheduling loop stalled\n")
            elif path == "/readyz":
                ok = health.ready
                self._send(200 if ok else 503, b"ok\n" if ok else b"caches not synced\n")
            else:
                self._send(404, b"not found: try /metrics, /healthz or /readyz\n")

        def _send(self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # probes every few seconds would drown the scheduler's own logs

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
