"""Fencing: a replica that no longer holds the leader Lease writes nothing.

Leader election alone does not fence writes. A leader paused past its lease (SIGSTOP, a long GC
pause, a frozen VM) resumes in the middle of a cycle with a plan made on a stale view, while a
standby has taken over and may already have placed other gangs on the same GPUs; without a
fence its binds, evictions and status writes go out as if nothing happened. So every mutating
request of the scheduler goes through ``FencedClient``, which asks the elector, at the moment of
the write, whether this process still holds the Lease renewed within its renew deadline (by its
own monotonic clock, which a pause moves forward). A write that fails the check is never sent:
it raises ``Fenced``, a ``TransportError``, so every writer treats it as a write that did not
happen (nothing is assumed bound, nothing is rolled back by a replica that may not act).

Binds additionally carry the pod's uid (``scheduler.kube.binder``), so even a write that passed
the check an instant before the lease expired cannot land on a recreated namesake.

Reads (GET, watches) are never fenced: a standby keeps its caches warm. The Lease itself is
written through the unfenced client by the elector, which must be able to acquire it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from scheduler.kube.client import JSON, WRITES, KubeClient, Response, TransportError

log = structlog.get_logger()


class Fenced(TransportError):
    """A write refused before it was sent: this replica does not hold the leader Lease."""


class FencedClient(KubeClient):
    """``KubeClient`` whose writes go out only while *holds* says this replica leads.

    Shares the connection pool of *inner*. *on_fenced* is called once per refused write
    (a metric); the refusal is logged once per episode, not once per write.
    """

    def __init__(self, inner: KubeClient, holds: Callable[[], bool],
                 on_fenced: Callable[[], None] | None = None) -> None:
        super().__init__(inner.api_client, inner.timeout, inner.outages)
        self._holds, self._on_fenced = holds, on_fenced
        self._lock = threading.Lock()
        self._episode: tuple[float, int] | None = None  # (since, writes refused)

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                body: Any = None, content_type: str = JSON,
                timeout: float | tuple[float, float] | None = None) -> Response:
        if method in WRITES:
            if not self._holds():
                self._refused(method, path)
                raise Fenced(f"{method} {path}: not sent, this replica does not hold the "
                             "leader Lease (fenced)")
            if self._episode is not None:
                self._resumed()
        return super().request(method, path, query=query, body=body,
                               content_type=content_type, timeout=timeout)

    def _refused(self, method: str, path: str) -> None:
        if self._on_fenced is not None:
            self._on_fenced()
        with self._lock:
            first = self._episode is None
            since, count = self._episode or (time.monotonic(), 0)
            self._episode = (since, count + 1)
        if first:
            log.warning("writes_fenced", first=f"{method} {path}",
                        reason="the leader Lease is not held (expired, lost or a pause)")

    def _resumed(self) -> None:
        with self._lock:
            episode, self._episode = self._episode, None
        if episode is not None:
            log.info("writes_unfenced", refused=episode[1],
                     fenced_for_s=round(time.monotonic() - episode[0], 1))
