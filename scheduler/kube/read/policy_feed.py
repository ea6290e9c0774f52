"""Queue objects from the apiserver into the policies in force, with a status condition.

Every Queue event whose ``metadata.generation`` is new (a spec change) is offered to the
pure ``PolicyStore``: a valid change takes effect at the next cycle; an invalid one is
refused, its errors (field path and reason) are written to the Queue's ``Valid`` condition,
and the last good version stays in force (``status.inForce`` carries its spec, so readers can
show the queue as it works; a queue that never had a valid version admits nothing, and its
condition says so). A bad edit by an admin therefore never takes the scheduler down, nor
silently changes nothing. A Queue whose deletion was asked for (its object kept by the
scheduler's finalizer, ``queue_finalizer``) stays in force, terminating, admitting nothing
new; when its object is gone it leaves the policies, unless queues still name it as parent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from policies.errors import FieldError
from policies.queues import PolicySet
from policies.validation import PolicyStore
from scheduler.kube.client import MERGE_PATCH, KubeClient
from scheduler.kube.read import fields, informer
from scheduler.kube.read.remembered_status import saved_usage
from scheduler.model.durations import format_time

log = structlog.get_logger("gang_scheduler.policies")

QUEUE_PATH = "/apis/gangscheduler.io/v1alpha1/queues"


@dataclass(frozen=True, slots=True)
class QueueObject:
    """What the scheduler's finalizer reads of a Queue object (``queue_finalizer``)."""

    name: str
    finalizers: tuple[str, ...]
    deleting: bool  # metadata.deletionTimestamp is set
    resource_version: str


class LivePolicies:
    """The ``PolicySource`` of the live scheduler: thread-safe, last good version wins."""

    def __init__(self, client: KubeClient | None = None, *, initial: PolicyStore | None = None,
                 write_status: Callable[[str, dict[str, Any]], None] | None = None,
                 on_change: Callable[[], None] | None = None,
                 overlay: Callable[[PolicySet], PolicySet] | None = None) -> None:
        """*on_change*: called after each Queue event that may have changed the policies in
        force (the live loop compares them and runs a cycle if they did). *overlay*: applied
        to the policies in force as read (the Kueue mode's built-in queue,
        ``scheduler.run.kueue_mode``); one result per version, so unchanged policies stay
        the same object."""
        self._overlay = overlay
        self._overlaid: tuple[PolicySet, PolicySet] | None = None
        self._client = client
        self._on_change = on_change
        self._store = initial or PolicyStore()
        self._lock = threading.Lock()
        self._invalid: dict[str, str] = {}  # queue name -> errors, for metrics and status
        self._generation: dict[str, Any] = {}  # queue name -> metadata.generation last seen
        self._objects: dict[str, QueueObject] = {}
        self._specs: dict[str, Any] = {}  # queue name -> the spec last judged
        self._in_force: dict[str, Any] = {}  # queue name -> the spec of its version in force
        self._write_status = write_status or self._patch_status
        #: queue -> (GPU-seconds, as of when) its status says it is remembered for.
        self._remembered: dict[str, tuple[float, float]] = {}

    def current(self) -> PolicySet:
        with self._lock:
            policies = self._store.policies
            if self._overlay is None:
                return policies
            if self._overlaid is None or self._overlaid[0] is not policies:
                self._overlaid = (policies, self._overlay(policies))
            return self._overlaid[1]

    @property
    def invalid(self) -> dict[str, str]:
        with self._lock:
            return dict(self._invalid)

    def objects(self) -> list[QueueObject]:
        """Every Queue object seen, as last seen."""
        with self._lock:
            return list(self._objects.values())

    def remembered(self) -> dict[str, tuple[float, float]]:
        """Queue -> (GPU-seconds, as of when) from the Queue statuses (fair share with
        memory: what a new leader starts from, ``scheduler.run.remembered``)."""
        with self._lock:
            return dict(self._remembered)

    def waiting_parents(self) -> set[str]:
        """The parents named by queues that wait for them (not in force yet)."""
        with self._lock:
            return {q.parent for q in self._store.waiting.values() if q.parent}

    def handle(self, event: informer.EventType, obj: dict[str, Any]) -> None:
        self._handle(event, obj)
        if self._on_change is not None:
            self._on_change()

    def _handle(self, event: informer.EventType, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if event is informer.EventType.DELETED:
            with self._lock:
                self._store = self._store.delete(name)
                kept = name in self._store.policies.queues.queues
                for table in (self._invalid, self._generation, self._objects, self._specs,
                              self._remembered):
                    table.pop(name, None)
                if not kept:
                    self._in_force.pop(name, None)
            log.info("queue_deleted", queue=name, kept_for_children=kept)
            return
        self._remember(name, obj.get("status"))
        generation = meta.get("generation")
        deleting = bool(meta.get("deletionTimestamp"))
        writes: list[tuple[str, dict[str, Any]]] = []
        with self._lock:
            self._objects[name] = QueueObject(name, tuple(meta.get("finalizers") or ()),
                                              deleting, str(meta.get("resourceVersion") or ""))
            # Only a spec change is judged: the Valid condition, the figures the leader writes
            # and the finalizer it adds change the object too, and reacting to them would write
            # status again, forever.
            if generation is None or self._generation.get(name) != generation:
                self._generation[name] = generation
                writes = self._judge(name, obj, generation)
            before = self._store
            if deleting and (store := before.terminate(name)) is not before:
                self._store = store
                log.info("queue_terminating", queue=name,
                         in_force=name in store.policies.queues.queues)
        for target, status in writes:
            self._write_status(target, status)

    def _remember(self, name: str, status: Any) -> None:
        """Keep what the queue's status says it is remembered for (a malformed one is told,
        and not used)."""
        try:
            saved = saved_usage(status) if isinstance(status, dict) else None
        except fields.FieldError as exc:
            log.warning("queue_status_malformed", queue=name, field=exc.path, reason=exc.reason)
            saved = None
        with self._lock:
            if saved is None:
                self._remembered.pop(name, None)
            else:
                self._remembered[name] = saved

    def _judge(self, name: str, obj: dict[str, Any],
               generation: Any) -> list[tuple[str, dict[str, Any]]]:
        """Offer the spec to the store (under the lock); the status writes it calls for."""
        waiting_before = set(self._store.waiting)
        update = self._store.apply(obj)
        self._specs[name] = obj.get("spec")
        # Kept even when refused: a queue whose parent is not known yet waits in the store
        # (the policies in force are unchanged) and applies once the parent does.
        self._store = update.store
        verdicts: dict[str, tuple[Any, tuple[FieldError, ...]]] = {
            name: (generation, update.errors)}
        # Queues that waited for a parent (this one, or one it let in) now apply.
        for other in sorted(waiting_before - set(update.store.waiting) - {name}):
            if other in update.store.policies.queues.queues:
                verdicts[other] = (self._generation.get(other), ())
        for other, errors in update.others.items():  # e.g. the rest of a cycle it closed
            verdicts[other] = (self._generation.get(other), errors)
        return [(queue, self._verdict(queue, gen, errors, queue == name))
                for queue, (gen, errors) in verdicts.items()]

    def _verdict(self, name: str, generation: Any, errors: tuple[FieldError, ...],
                 offered: bool) -> dict[str, Any]:
        """Record the verdict on *name* (under the lock); its status: the ``Valid``
        condition, the generation judged and, when refused, the spec still in force."""
        if not errors:
            self._invalid.pop(name, None)
            self._in_force[name] = self._specs.get(name)
            log.info("queue_applied", queue=name, generation=generation,
                     **({} if offered else {"reason": "parent now known"}))
            condition = _condition("True", "Valid", "queue accepted and in force")
        else:
            text = "; ".join(str(e) for e in errors)
            self._invalid[name] = text
            log.warning("queue_rejected", queue=name, generation=generation, errors=text)
            kept = ("the last valid version stays in force"
                    if name in self._store.policies.queues.queues
                    else "no valid version yet: the queue admits nothing")
            condition = _condition("False", "InvalidSpec", f"refused, {kept}: {text}")
        status: dict[str, Any] = {"conditions": [condition],
                                  "inForce": self._in_force.get(name) if errors else None}
        if generation is not None:
            status["observedGeneration"] = generation
        return status

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
