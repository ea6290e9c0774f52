"""The scheduler's finalizer on Queues: a Queue is not deleted while it is in use.

Why: deleting a Queue with running gangs was accepted at once; its gangs vanished from the
queue figures and from ``gang_scheduler_allocated_gpus``, and their GPU-hours went uncharged.
Kueue keeps a ClusterQueue with admitted workloads behind its ``resource-in-use`` finalizer
(``pkg/controller/core/clusterqueue_controller.go``); so does this, for the same reason and
one more: a parent Queue with children (deleting it would leave them without the quota tree
they were validated in).

The leader adds ``FINALIZER`` to every Queue object it sees without it (not being deleted).
A Queue whose deletion was asked for stays in force, terminating (``LivePolicies``): it
admits no new gangs, its pending gangs are told why, its running gangs keep their quota and
are charged and accounted as before. After each cycle the leader removes the finalizer from
a terminating Queue no running gang was admitted under and no queue names as its parent;
the apiserver then deletes it. Writes go through the fence (leader only) in the background,
each a merge patch with the object's resourceVersion, so one that crossed another change
(another controller's finalizer, a status write) is refused (409) and tried again on the
newer object, which the watch reports (the loop syncs on every pass, cycle or not).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import structlog

from scheduler.kube.client import MERGE_PATCH, Requester, TransportError
from scheduler.kube.client import path_segment as seg
from scheduler.kube.read.policy_feed import QUEUE_PATH, QueueObject
from scheduler.kube.write.writer import BackgroundWriter, Retry

log = structlog.get_logger("gang_scheduler.queue_finalizer")

FINALIZER = "gangscheduler.io/queue-in-use"


class QueueFinalizers:
    """Adds and removes ``FINALIZER`` on Queue objects (the leader's loop calls ``sync``)."""

    def __init__(self, client: Requester, objects: Callable[[], Iterable[QueueObject]], *,
                 retry: Retry | None = None, timeout: tuple[float, float] = (5.0, 30.0)) -> None:
        self.client, self.objects, self.timeout = client, objects, timeout
        self.writer = BackgroundWriter("queue-finalizers", retry)
        #: The object version each write was submitted for: not submitted again until the
        #: object changes (the watch reports the write, or another change).
        self._submitted: dict[str, str] = {}

    def sync(self, in_use: set[str]) -> int:
        """Add the finalizer where it is missing; remove it from Queues being deleted that
        are not *in_use* (a running gang admitted under them, or a child queue). The number
        of writes submitted."""
        submitted = 0
        seen = set()
        for obj in self.objects():
            seen.add(obj.name)
            has = FINALIZER in obj.finalizers
            if not obj.deleting and not has:
                wanted = (*obj.finalizers, FINALIZER)
            elif obj.deleting and has and obj.name not in in_use:
                wanted = tuple(f for f in obj.finalizers if f != FINALIZER)
            else:
                continue
            if self._submitted.get(obj.name) == obj.resource_version:
                continue
            self._submitted[obj.name] = obj.resource_version
            self.writer.submit(f"finalizer/{obj.name}", partial(self._patch, obj, wanted))
            submitted += 1
        for gone in set(self._submitted) - seen:
            del self._submitted[gone]
        return submitted

    def _patch(self, obj: QueueObject, finalizers: tuple[str, ...]) -> None:
        """One write (on the writer's thread). Not submitted again for the same object
        version: a write that crossed a change (409) is tried again once the watch reports
        the newer object; one without an answer is run again by the writer once the
        apiserver answers."""
        body: dict[str, Any] = {"metadata": {"finalizers": list(finalizers) or None,
                                             "resourceVersion": obj.resource_version}}
        try:
            resp = self.client.request("PATCH", f"{QUEUE_PATH}/{seg(obj.name)}", body=body,
                                       content_type=MERGE_PATCH, timeout=self.timeout)
        except TransportError as exc:
            log.debug("queue_finalizer_failed", queue=obj.name, reason=str(exc))
            return
        if resp.ok:
            log.info("queue_finalizer_added" if FINALIZER in finalizers
                     else "queue_finalizer_removed", queue=obj.name)
        elif resp.status != 404:  # 404: gone already, nothing left to do
            (log.info if resp.status == 409 else log.warning)(
                "queue_finalizer_failed", queue=obj.name, status=resp.status,
                reason=resp.message())

    def close(self) -> None:
        self.writer.flush()
        self.writer.stop()
