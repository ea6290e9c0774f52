"""Status of Kubernetes' own PodGroups, written the way kube-scheduler writes it.

Why kube-scheduler's way: tools written for the upstream API (kubectl wait, dashboards, a
Job controller deciding what to do with a stuck group) read one condition and its reasons;
gang-scheduler's answers must read the same:

* ``PodGroupScheduled`` (v1alpha2) / ``PodGroupInitiallyScheduled`` (v1beta1): ``True`` with
  reason ``Scheduled`` once the gang is bound, ``False`` with reason ``Unschedulable`` and the
  pending reason as message while it waits, ``False`` with ``SchedulerError`` when the group
  cannot even be formed (a field gang-scheduler refuses). Once ``True`` it never goes back to
  ``False`` (kube-scheduler skips such an update; v1beta1 documents it as terminal).
  ``observedGeneration`` is the PodGroup's generation, as on any ``metav1.Condition``.
* ``DisruptionTarget`` with reason ``PreemptionByScheduler`` when the group is preempted.

A strategic merge patch of the one condition leaves the others alone (``conditions`` is a map
keyed by type). Each condition is written only when it changes; a failed write is not
recorded, so the next cycle retries it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from scheduler.kube.client import STRATEGIC_MERGE_PATCH, Requester, TransportError
from scheduler.kube.client import path_segment as seg
from scheduler.kube.read.native_convert import SCHEDULED_CONDITION
from scheduler.model.durations import format_time
from scheduler.model.native import NativeGroupInfo

log = structlog.get_logger()

SCHEDULED, UNSCHEDULABLE, SCHEDULER_ERROR = "Scheduled", "Unschedulable", "SchedulerError"
DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER = "DisruptionTarget", "PreemptionByScheduler"
#: ``metav1.Condition.message`` is at most 32768 characters.
MAX_MESSAGE = 32768


class NativeStatusWriter:
    """The scheduling and disruption conditions of ``scheduling.k8s.io`` PodGroups."""

    def __init__(self, client: Requester, *, clock: Callable[[], float] = time.time,
                 timeout: tuple[float, float] = (5.0, 30.0)) -> None:
        self.client, self.clock, self.timeout = client, clock, timeout
        self._lock = threading.Lock()
        # (PodGroup uid or key, condition type) -> (status, reason, message, since)
        self._written: dict[tuple[str, str], tuple[str, str, str, float]] = {}

    def scheduled(self, group: NativeGroupInfo, message: str) -> bool:
        """The gang is bound: the scheduling condition turns True."""
        return self._set(group, SCHEDULED_CONDITION[group.api_version], True, SCHEDULED, message)

    def unschedulable(self, group: NativeGroupInfo, message: str,
                      reason: str = UNSCHEDULABLE) -> bool:
        """The gang waits (``Unschedulable``) or cannot be formed (``SchedulerError``); never
        written over a True condition."""
        kind = SCHEDULED_CONDITION[group.api_version]
        with self._lock:
            last = self._written.get((_id(group), kind))
        if group.scheduled or (last is not None and last[0] == "True"):
            return False
        return self._set(group, kind, False, reason, message)

    def disrupted(self, group: NativeGroupInfo, message: str) -> bool:
        """The group is being preempted."""
        return self._set(group, DISRUPTION_TARGET, True, PREEMPTION_BY_SCHEDULER, message)

    def condition(self, group: NativeGroupInfo, kind: str) -> tuple[str, str, str] | None:
        """(status, reason, message) this writer last wrote for *kind* (None: nothing)."""
        with self._lock:
            last = self._written.get((_id(group), kind))
        return last[:3] if last is not None else None

    def _set(self, group: NativeGroupInfo, kind: str, value: bool, reason: str,
             message: str) -> bool:
        status = "True" if value else "False"
        message = message[:MAX_MESSAGE]
        key = (_id(group), kind)
        with self._lock:
            last = self._written.get(key)
        if last is not None and last[:3] == (status, reason, message):
            return False
        since = last[3] if last is not None and last[0] == status else self.clock()
        condition: dict[str, Any] = {
            "type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": format_time(since), "observedGeneration": group.generation}
        body: dict[str, Any] = {"status": {"conditions": [condition]}}
        if group.uid:
            body["metadata"] = {"uid": group.uid}  # a recreated namesake rejects the patch
        version = group.api_version.split("/", 1)[1]
        path = (f"/apis/scheduling.k8s.io/{version}/namespaces/{seg(group.namespace)}"
                f"/podgroups/{seg(group.name)}/status")
        try:
            resp = self.client.request("PATCH", path, body=body,
                                       content_type=STRATEGIC_MERGE_PATCH, timeout=self.timeout)
        except TransportError as exc:
            # Debug: the client logs the outage once and the writer retries the write.
            log.debug("status_write_failed", namespace=group.namespace, podgroup=group.name,
                      reason=str(exc))
            return False
        if not resp.ok:
            if resp.status not in (404, 409):  # deleted or replaced meanwhile: nothing to say
                log.warning("status_write_failed", namespace=group.namespace,
                            podgroup=group.name, status=resp.status, reason=resp.message())
            return False
        with self._lock:
            self._written[key] = (status, reason, message, since)
        return True


def _id(group: NativeGroupInfo) -> str:
    return group.uid or group.key
