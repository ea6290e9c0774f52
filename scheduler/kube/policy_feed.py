"""Queue objects from the apiserver into the policies in force, with a status condition.

Every Queue event whose ``metadata.generation`` is new (a spec change) is offered to the
pure ``PolicyStore``: a valid change takes effect at the next cycle; an invalid one is
refused, its errors (field path and reason) are written to the Queue's ``Valid`` condition,
and the last good version stays in force. A bad edit by an
admin therefore never takes the scheduler down, nor silently changes nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from policies.queues import PolicySet
from policies.validation import PolicyStore
from scheduler.kube import informer
from scheduler.kube.client import MERGE_PATCH, KubeClient
from scheduler.kube.status import format_time

log = structlog.get_logger("gang_scheduler.policies")

QUEUE_PATH = "/apis/gangscheduler.io/v1alpha1/queues"


class LivePolicies:
    """The ``PolicySource`` of the live scheduler: thread-safe, last good version wins."""

    def __init__(self, client: KubeClient | None = None, *, initial: PolicyStore | None = None,
                 write_status: Callable[[str, dict[str, Any]], None] | None = None,
                 on_change: Callable[[], None] | None = None) -> None:
        """*on_change*: called after each Queue event that may have changed the policies in
        force (the live loop compares them and runs a cycle if they did)."""
        self._client = client
        self._on_change = on_change
        self._store = initial or PolicyStore()
        self._lock = threading.Lock()
        self._invalid: dict[str, str] = {}  # queue name -> errors, for metrics and status
        self._generation: dict[str, Any] = {}  # queue name -> metadata.generation last seen
        self._write_status = write_status or self._patch_status

    def current(self) -> PolicySet:
        with self._lock:
            return self._store.policies

    @property
    def invalid(self) -> dict[str, str]:
        with self._lock:
            return dict(self._invalid)

    def handle(self, event: informer.EventType, obj: dict[str, Any]) -> None:
        self._handle(event, obj)
        if self._on_change is not None:
            self._on_change()

    def _handle(self, event: informer.EventType, obj: dict[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if event is informer.EventType.DELETED:
            with self._lock:
                self._store = self._store.delete(name)
                self._invalid.pop(name, None)
                self._generation.pop(name, None)
            log.info("queue_deleted", queue=name)
            return
        generation = (obj.get("metadata") or {}).get("generation")
        with self._lock:
            if generation is not None and self._generation.get(name) == generation:
                # A status-only change (the Valid condition or the figures the leader writes):
                # the spec was judged already. Reacting would write status again, forever.
                return
            waiting_before = set(self._store.waiting)
            update = self._store.apply(obj)
            self._generation[name] = generation
            resolved: list[tuple[str, Any]] = []
            # Kept even when refused: a queue whose parent is not known yet waits in the
            # store (the policies in force are unchanged) and applies once the parent does.
            self._store = update.store
            if update.accepted:
                self._invalid.pop(name, None)
                # Queues that waited for a parent (this one, or one it let in) now apply.
                for other in sorted(waiting_before - set(update.store.waiting) - {name}):
                    if other in update.store.policies.queues.queues:
                        self._invalid.pop(other, None)
                        resolved.append((other, self._generation.get(other)))
            else:
                self._invalid[name] = "; ".join(str(e) for e in update.errors)
        for other, gen in resolved:
            log.info("queue_applied", queue=other, generation=gen, reason="parent now known")
            status: dict[str, Any] = {"conditions": [
                _condition("True", "Valid", "queue accepted and in force")]}
            if gen is not None:
                status["observedGeneration"] = gen
            self._write_status(other, status)
        if update.accepted:
            log.info("queue_applied", queue=name, generation=generation)
            condition = _condition("True", "Valid", "queue accepted and in force")
        else:
            errors = "; ".join(str(e) for e in update.errors)
            log.warning("queue_rejected", queue=name, generation=generation, errors=errors)
            condition = _condition("False", "InvalidSpec", f"refused, the last valid version "
                                   f"stays in force: {errors}")
        status = {"conditions": [condition]}
        if generation is not None:
            status["observedGeneration"] = generation
        self._write_status(name, status)

    def _patch_status(self, name: str, status: dict[str, Any]) -> None:
        if self._client is None:
            return
        resp = self._client.request("PATCH", f"{QUEUE_PATH}/{name}/status",
                                    body={"status": status}, content_type=MERGE_PATCH)
        if not resp.ok and resp.status != 404:
            log.warning("queue_status_failed", queue=name, status=resp.status,
                        reason=resp.message())


def _condition(status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": "Valid", "status": status, "reason": reason, "message": message[:32000],
            "lastTransitionTime": format_time(time.time())}
