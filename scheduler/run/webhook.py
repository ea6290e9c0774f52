"""The admission webhook's edge: AdmissionReview in, AdmissionReview out, over HTTPS.

The decisions are ``scheduler.feed.admission``'s (pure); here are only the envelope
(``answer``: which object, which operation, the response the apiserver expects) and the
serving: POST /mutate (the defaults, on CREATE) and POST /validate (the refusals, on CREATE
and UPDATE), GET /healthz. The apiserver speaks to webhooks over TLS only; the certificate
and key are read from files (a Secret volume, written by cert-manager, the Helm chart or an
admin) and read again when either file changes, so a rotated certificate is served without
a restart.

The namespace's queue comes from the Queue objects every replica watches, so a standby
answers as well as the leader: the webhook Service may send a review to any replica.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import structlog

from scheduler.feed.admission import KINDS, Admission, Defaults, mutate, refusal_message, validate

log = structlog.get_logger("gang_scheduler.webhook")

REVIEW_VERSION = "admission.k8s.io/v1"
MUTATE, VALIDATE = "/mutate", "/validate"
#: The apiserver sends at most its own request limit (3 MiB) and a little envelope.
MAX_BODY = 8 << 20
#: A connection that sends nothing for this long is closed (a thread each, they must end).
IDLE_TIMEOUT_S = 30.0


class BadReview(ValueError):
    """The body is not an AdmissionReview this webhook can answer; the message says why."""


def answer(review: Any, endpoint: str, defaults_of: Callable[[str], Defaults],
           now: float) -> dict[str, Any]:
    """The AdmissionReview response to *review* sent to *endpoint* (``MUTATE`` or
    ``VALIDATE``); *defaults_of*: the defaults of a namespace; *now*: the time of the check."""
    request = review.get("request") if isinstance(review, Mapping) else None
    if not isinstance(request, Mapping) or not isinstance(request.get("uid"), str):
        raise BadReview("expected an AdmissionReview with request.uid")
    gvk = request.get("kind")
    gvk = gvk if isinstance(gvk, Mapping) else {}
    kind = KINDS.get((str(gvk.get("group") or ""), str(gvk.get("kind") or "")), "")
    obj = request.get("object")
    old = request.get("oldObject")
    operation = request.get("operation")
    result = Admission()
    if isinstance(obj, Mapping) and kind:
        if endpoint == MUTATE and operation == "CREATE":
            result = mutate(kind, obj, defaults_of(str(request.get("namespace") or "")))
        elif endpoint == VALIDATE and operation in ("CREATE", "UPDATE"):
            result = validate(kind, obj, old if isinstance(old, Mapping) else None, now)
    response: dict[str, Any] = {"uid": request["uid"], "allowed": result.allowed}
    if result.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(list(result.patch)).encode()).decode()
    if result.warnings:
        response["warnings"] = [f"gang-scheduler: {w}" for w in result.warnings]
    if not result.allowed:
        response["status"] = {"code": 400, "reason": "BadRequest",
                              "message": refusal_message(result.refusals)}
        log.info("admission refused", kind=kind, namespace=request.get("namespace"),
                 name=request.get("name"), refusals=list(result.refusals))
    return {"apiVersion": REVIEW_VERSION, "kind": "AdmissionReview", "response": response}


class _Certificate:
    """The serving certificate, read again when its files change (rotation)."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.cert, self.key = cert, key
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._context = self._load()  # an unreadable pair stops the start, naming the file

    def _mtimes(self) -> tuple[int, int]:
        return os.stat(self.cert).st_mtime_ns, os.stat(self.key).st_mtime_ns

    def _load(self) -> ssl.SSLContext:
        stamp = self._mtimes()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert, self.key)
        self._stamp = stamp
        return context

    def context(self) -> ssl.SSLContext:
        with self._lock:
            try:
                if self._mtimes() != self._stamp:
                    self._context = self._load()
                    log.info("webhook certificate reloaded", cert=str(self.cert))
            except (OSError, ssl.SSLError) as exc:  # mid-rotation: keep serving the last one
                log.warning("webhook certificate not reloaded", cert=str(self.cert),
                            error=str(exc))
            return self._context


class _TLSServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 certificate: _Certificate) -> None:
        self.certificate = certificate
        super().__init__(address, handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        sock.settimeout(IDLE_TIMEOUT_S)
        # The handshake runs in the connection's own thread (``setup``), so that a slow
        # client never holds up the accepting loop.
        return self.certificate.context().wrap_socket(
            sock, server_side=True, do_handshake_on_connect=False), address


def outcome(body: Mapping[str, Any]) -> str:
    """What an answer did, for the metrics: ``refused``, ``patched`` or ``unchanged``."""
    response = body["response"]
    if not response["allowed"]:
        return "refused"
    return "patched" if "patch" in response else "unchanged"


def serve_webhook(defaults_of: Callable[[str], Defaults], clock: Callable[[], float],
                  host: str, port: int, cert: Path, key: Path,
                  counted: Callable[[str, str], None] | None = None) -> ThreadingHTTPServer:
    """Serve the webhook from a daemon thread; ``server.server_address`` has the port.
    *counted*: told (webhook, ``outcome``) of every review answered. Raises
    ``OSError``/``ssl.SSLError`` when the address or the certificate is unusable."""

    class Handler(BaseHTTPRequestHandler):
        def setup(self) -> None:
            super().setup()
            assert isinstance(self.request, ssl.SSLSocket)
            self.request.do_handshake()

        def handle(self) -> None:
            try:
                super().handle()
            except (ssl.SSLError, OSError):
                return  # a client that went away or spoke no TLS: nothing to answer

        def do_GET(self) -> None:
            if self.path == "/healthz":
                self._send(200, b"ok\n", "text/plain; charset=utf-8")
            else:
                self._send(404, b"not found: POST /mutate or /validate\n",
                           "text/plain; charset=utf-8")

        def do_POST(self) -> None:
            endpoint = self.path.partition("?")[0]
            if endpoint not in (MUTATE, VALIDATE):
                self._send(404, b"not found: POST /mutate or /validate\n",
                           "text/plain; charset=utf-8")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY:
                self._send(413 if length else 400, b"expected a body of at most 8 MiB\n",
                           "text/plain; charset=utf-8")
                return
            try:
                review = json.loads(self.rfile.read(length))
                body = answer(review, endpoint, defaults_of, clock())
            except (ValueError, BadReview) as exc:
                self._send(400, f"{exc}\n".encode(), "text/plain; charset=utf-8")
                return
            self._send(200, json.dumps(body).encode(), "application/json")
            if counted is not None:
                counted(endpoint.lstrip("/"), outcome(body))

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # one line per review would drown the scheduler's own logs

    server = _TLSServer((host, port), Handler, _Certificate(cert, key))
    threading.Thread(target=server.serve_forever, name="webhook", daemon=True).start()
    return server
