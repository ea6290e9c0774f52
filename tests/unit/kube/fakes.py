"""A scripted stand-in for ``KubeClient``: canned replies in, recorded requests out."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from scheduler.kube.client import Response, TransportError
from scheduler.run.inflight import ApplyResult


def pod(name: str, rv: str, uid: str | None = None, ns: str = "default",
        cpu: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-{name}",
                         "resourceVersion": rv},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Pending"}}


def page(items: list[dict[str, Any]], rv: str, cont: str = "") -> Response:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    return Response(200, json.dumps({"items": items, "metadata": meta}).encode())


def event(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


class FakeStream:
    """A watch body: fixed chunks, then either EOF or (``hang``) a block until ``shutdown``."""

    def __init__(self, body: bytes, status: int = 200, chunk: int = 7, hang: bool = False,
                 error: Exception | None = None) -> None:
        self.status, self._body, self._chunk = status, body, chunk
        self._hang, self._error = hang, error
        self._down = threading.Event()
        self.closed = False

    @property
    def data(self) -> bytes:
        return self._body

    def stream(self, amt: int, decode_content: bool = True) -> Iterator[bytes]:
        for i in range(0, len(self._body), self._chunk):
            yield self._body[i:i + self._chunk]
        if self._error is not None:
            raise self._error
        if self._hang:
            self._down.wait(10)

    def shutdown(self) -> None:
        self._down.set()

    def release_conn(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeClient:
    """Replies to GETs (lists) and watch streams from queues; anything else from ``on_request``."""

    lists: deque[Response | Exception] = field(default_factory=deque)
    watches: deque[FakeStream | Exception] = field(default_factory=deque)
    on_request: Callable[[str, str, dict[str, Any], Any], Response] | None = None
    calls: list[tuple[str, str, dict[str, Any], Any]] = field(default_factory=list)
    idle: threading.Event = field(default_factory=threading.Event)  # set when scripts ran out
    lock: threading.Lock = field(default_factory=threading.Lock)

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "application/json", timeout: Any = None) -> Response:
        with self.lock:
            self.calls.append((method, path, dict(query or {}), body))
        if method == "GET" and self.on_request is None:
            if not self.lists:
                raise TransportError("no more scripted lists")
            item = self.lists.popleft()
            if isinstance(item, Exception):
                raise item
            return item
        assert self.on_request is not None, f"unexpected {method} {path}"
        return self.on_request(method, path, dict(query or {}), body)

    def stream(self, path: str, query: Any, timeout: Any) -> FakeStream:
        with self.lock:
            self.calls.append(("WATCH", path, dict(query or {}), None))
        if not self.watches:
            self.idle.set()
            return FakeStream(b"", hang=True)
        item = self.watches.popleft()
        if isinstance(item, Exception):
            raise item
        return item

    def watch_queries(self) -> list[dict[str, Any]]:
        return [q for m, _, q, _ in self.calls if m == "WATCH"]

    def list_queries(self) -> list[dict[str, Any]]:
        return [q for m, _, q, _ in self.calls if m == "GET"]


@dataclass
class RecordingApi:
    """Answers every write (201 to a POST, 200 otherwise) and records PATCHes to a
    ``/status`` subresource and POSTed events: what the actuator's writers send."""

    patches: list[tuple[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        with self.lock:
            if method == "PATCH" and path.endswith("/status"):
                self.patches.append((path, body))
            if method == "POST" and path.endswith("/events"):
                self.events.append(body)
        return Response(201 if method == "POST" else 200, b"{}")


def recording_actuator(pods: Any) -> Iterator[tuple[RecordingApi, Any, Any]]:
    """A ``KubeActuator`` over a ``RecordingApi``, and a cache with *pods* for tests that
    run a cycle (the actuator itself reads only the plan). The body of a fixture: yields,
    then closes the actuator and its binder."""
    from scheduler.feed.cache import ClusterCache
    from scheduler.kube.events import EventRecorder
    from scheduler.kube.write.actuator import KubeActuator
    from scheduler.kube.write.binder import Binder
    from scheduler.kube.write.status import StatusWriter

    api, cache = RecordingApi(), ClusterCache()
    for p in pods:
        cache.upsert_pod(p)
    binder = Binder(api, concurrency=2)  # type: ignore[arg-type]
    actuator = KubeActuator(api, binder, StatusWriter(api),  # type: ignore[arg-type]
                            EventRecorder(api))  # type: ignore[arg-type]
    yield api, cache, actuator
    actuator.close()
    binder.close()


@contextlib.contextmanager
def stalled(writer: Any) -> Iterator[None]:
    """The actuator's background *writer* kept busy by a task of its own for the block: what
    is submitted meanwhile queues behind it. On leaving, the writer runs it all (flushed)."""
    busy, release = threading.Event(), threading.Event()

    def stall() -> None:
        busy.set()
        release.wait(10)
    writer.submit("stall", stall)
    assert busy.wait(10)
    try:
        yield
    finally:
        release.set()
    assert writer.flush()


def landed(result: ApplyResult, timeout: float = 30.0) -> ApplyResult:
    """*result* of ``KubeActuator.apply`` once its binds have landed (the live actuator binds
    outside the cycle): the binding stage's outcome folded in, as the loop takes it."""
    if result.binding is None:
        return result
    done = result.binding.result(timeout=timeout)
    return dataclasses.replace(result, bound=done.bound, failed=done.failed,
                               prebinds=result.prebinds + done.prebinds,
                               unanswered=done.unanswered, fenced=done.fenced,
                               left=done.left, binding=None)
