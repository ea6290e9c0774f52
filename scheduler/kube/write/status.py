"""Status writers: why a pod is pending, where a preemptor will go, and how a PodGroup is doing.

Why a last-written cache: a pending gang is re-examined every cycle, and rewriting the same
condition every second would flood etcd and every watcher with no-op updates. Each writer keeps
what it last wrote per object and writes only on change; a failed write is not cached, so the
next cycle retries it. ``forget_*`` drops an entry when its object is bound or deleted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import structlog

from scheduler.kube.client import MERGE_PATCH, STRATEGIC_MERGE_PATCH, Requester, TransportError
from scheduler.kube.client import path_segment as seg
from scheduler.kube.write.writer import Once
from scheduler.model import PodRef
from scheduler.model.durations import format_time
from scheduler.model.workloads import (
    ESTIMATE_TIME_ANNOTATION,
    ESTIMATED_START_ANNOTATION,
    JOBSET_API_VERSION,
    RUNTIME_SECONDS_ANNOTATION,
    OwnerRef,
)

log = structlog.get_logger()

PODGROUP_API = "/apis/scheduling.x-k8s.io/v1alpha1"


class PodGroupPhase(StrEnum):
    PENDING = "Pending"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    FINISHED = "Finished"
    FAILED = "Failed"


#: Phases that say the group's members were placed, whatever the counts say.
_PLACED_PHASES = (PodGroupPhase.SCHEDULED, PodGroupPhase.RUNNING, PodGroupPhase.FINISHED)


@dataclass(frozen=True, slots=True)
class PodGroupStatus:
    """What the scheduler reports on a PodGroup (scheduler-plugins' status fields + a condition)."""

    phase: PodGroupPhase
    scheduled: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    schedule_start_time: float | None = None
    #: Condition reason: a pending gang's reason category ("Quota", "Placement", "Reserved",
    #: "Queued", ...: the REASON column of ``kubectl get podgroups``),
    #: "Scheduled", "Running", ... (pods keep kube-scheduler's "Unschedulable").
    reason: str = ""
    message: str = ""
    #: When the gang is expected to start (epoch seconds), None: no estimate. Written as
    #: ``status.estimatedStart`` with ``status.estimateTime`` (when it was worked out).
    estimated_start: float | None = None
    estimate_time: float | None = None
    #: 1-based position in the cycle's order (``status.queuePosition``), 0: none.
    position: int = 0

    def to_json(self, transition_time: float) -> dict[str, Any]:
        status: dict[str, Any] = {"phase": str(self.phase), "scheduled": self.scheduled,
                                  "running": self.running, "succeeded": self.succeeded,
                                  "failed": self.failed}
        # A merge patch: null removes an estimate that no longer stands.
        status["estimatedStart"] = (None if self.estimated_start is None
                                    else format_time(self.estimated_start))
        status["estimateTime"] = (None if self.estimated_start is None or
                                  self.estimate_time is None else format_time(self.estimate_time))
        status["queuePosition"] = self.position or None
        if self.schedule_start_time is not None:
            status["scheduleStartTime"] = format_time(self.schedule_start_time)
        if self.reason:
            # Members on nodes, not the phase: a group Failed while none was ever placed
            # must not read Scheduled=True.
            placed = self.scheduled > 0 or self.phase in _PLACED_PHASES
            # Kept only where the CRD's schema has ``status.conditions``; pruned otherwise.
            status["conditions"] = [{
                "type": "Scheduled", "status": "True" if placed else "False",
                "reason": self.reason, "message": self.message,
                "lastTransitionTime": format_time(transition_time)}]
        return status


#: An estimated start that moved less than this (or than a tenth of the time still to wait,
#: if more) is the same estimate: a gang whose running gangs overrun their estimates gets a
#: new one every cycle, which must not cost a write each time.
ESTIMATE_SLACK_SECONDS = 60.0

#: Where each kind of workload owner lives (``set_runtime_seconds``).
OWNER_PATHS = {"Job": "/apis/batch/v1", "JobSet": f"/apis/{JOBSET_API_VERSION}",
               "PodGroup": "/apis/scheduling.x-k8s.io/v1alpha1"}
OWNER_RESOURCES = {"Job": "jobs", "JobSet": "jobsets", "PodGroup": "podgroups"}


def same_estimate(old: float | None, new: float | None, now: float) -> bool:
    """Is *new* the estimate *old* already says, as far as a reader can tell?"""
    if old is None or new is None:
        return old is new
    return abs(new - old) <= max(ESTIMATE_SLACK_SECONDS, 0.1 * max(0.0, old - now))


def settled(last: PodGroupStatus | None, status: PodGroupStatus, now: float) -> PodGroupStatus:
    """*status*, keeping *last*'s estimate (and when it was made) if the estimate did not
    really move: then a status equal to the one written is not written again."""
    if last is not None and same_estimate(last.estimated_start, status.estimated_start, now):
        return replace(status, estimated_start=last.estimated_start,
                       estimate_time=last.estimate_time)
    return status


class StatusWriter:
    """Pod conditions, nominated nodes and PodGroup status, each written only when changed."""

    def __init__(self, client: Requester, *, clock: Callable[[], float] = time.time,
                 timeout: tuple[float, float] = (5.0, 30.0)) -> None:
        self.client, self.clock, self.timeout = client, clock, timeout
        self._lock = threading.Lock()
        self._pod_messages: dict[str, tuple[str, float]] = {}  # uid -> (message, since)
        self._nominated: dict[str, str] = {}  # uid -> node
        self._groups: dict[str, tuple[PodGroupStatus, float]] = {}  # ns/name -> (status, since)
        self._estimates: dict[str, float] = {}  # pod uid, job/uid -> estimated start written
        self.status_subresource = True  # flips off if the PodGroup CRD lacks it
        self._failures = Once()

    # Pods ---------------------------------------------------------------------------------
    def set_unschedulable(self, pod: PodRef, message: str) -> bool:
        """``PodScheduled=False`` reason ``Unschedulable`` with *message*; True if written."""
        with self._lock:
            last = self._pod_messages.get(pod.uid)
        if last is not None and last[0] == message:
            return False
        since = last[1] if last is not None else self.clock()  # status unchanged: keep its time
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": message, "lastProbeTime": None,
                     "lastTransitionTime": format_time(since)}
        if self._patch_pod(pod, {"conditions": [condition]}):
            with self._lock:
                self._pod_messages[pod.uid] = (message, since)
            return True
        return False

    def set_nominated_node(self, pod: PodRef, node: str) -> bool:
        """``status.nominatedNodeName`` for a preemptor (``""`` clears it); True if written."""
        with self._lock:
            if self._nominated.get(pod.uid, "") == node:
                return False
        if self._patch_pod(pod, {"nominatedNodeName": node or None}):
            with self._lock:
                self._nominated[pod.uid] = node
            return True
        return False

    def set_disruption_target(self, pod: PodRef, reason: str, message: str) -> int:
        """``DisruptionTarget=True`` with *reason* on a pod about to be deleted, so its
        controller tells the disruption from a failure of its own (a Job's podFailurePolicy
        can ignore it); the reply's status (0: no reply, 404: the pod is gone)."""
        condition = {"type": "DisruptionTarget", "status": "True", "reason": reason,
                     "message": message, "lastTransitionTime": format_time(self.clock())}
        return self._patch_pod_code(pod, {"conditions": [condition]})

    def set_estimate(self, pod: PodRef, start: float | None, made: float) -> bool:
        """The ``gangscheduler.io/estimated-start`` and ``-time`` annotations on a pending
        pod (None removes them); True if written (see ``_set_estimate``)."""
        return self._set_estimate(
            pod.uid, f"/api/v1/namespaces/{seg(pod.namespace)}/pods/{seg(pod.name)}", pod.uid,
            start, made, namespace=pod.namespace, pod=pod.name)

    def set_job_estimate(self, namespace: str, name: str, uid: str, start: float | None,
                         made: float) -> bool:
        """The same annotations on the Job that owns a pending gang's pods."""
        return self._set_estimate(
            f"job/{uid}", f"/apis/batch/v1/namespaces/{seg(namespace)}/jobs/{seg(name)}", uid,
            start, made, namespace=namespace, job=name)

    def _set_estimate(self, key: str, path: str, uid: str, start: float | None, made: float,
                      **keys: str) -> bool:
        """Only an estimate that moved beyond ``same_estimate``'s slack is written, so a
        pending gang costs a write per object per material move, not per cycle; an object
        never given an estimate is not written to remove one; a failed write is retried."""
        with self._lock:
            last = self._estimates.get(key)
        if same_estimate(last, start, made):  # also: none written, none to write
            return False
        body: dict[str, Any] = {"metadata": {"annotations": {
            ESTIMATED_START_ANNOTATION: None if start is None else format_time(start),
            ESTIMATE_TIME_ANNOTATION: None if start is None else format_time(made)}}}
        if uid:
            body["metadata"]["uid"] = uid  # a recreated namesake rejects the patch
        if not self._patch(path, body, MERGE_PATCH, gone_ok=True, **keys):
            return False
        with self._lock:
            if start is None:
                self._estimates.pop(key, None)
            else:
                self._estimates[key] = start
        return True

    def set_runtime_seconds(self, namespace: str, owner: OwnerRef, seconds: float) -> bool:
        """``gangscheduler.io/runtime-seconds`` on a workload's owner (a Job, JobSet or
        scheduler-plugins PodGroup): the runtime of its runs so far. Guarded by the owner's
        uid, so a recreated namesake is not charged with its predecessor's runs."""
        base = OWNER_PATHS.get(owner.kind)
        if base is None:
            return False
        body = {"metadata": {"uid": owner.uid, "annotations": {
            RUNTIME_SECONDS_ANNOTATION: f"{seconds:.0f}"}}}
        return self._patch(f"{base}/namespaces/{seg(namespace)}/{OWNER_RESOURCES[owner.kind]}/"
                           f"{seg(owner.name)}", body, MERGE_PATCH, gone_ok=True,
                           namespace=namespace, owner=f"{owner.kind}/{owner.name}")

    def forget_pod(self, uid: str) -> None:
        """The pod was bound or deleted: its next pending spell starts fresh."""
        with self._lock:
            self._pod_messages.pop(uid, None)
            self._nominated.pop(uid, None)
            self._estimates.pop(uid, None)

    def _patch_pod(self, pod: PodRef, status: dict[str, Any]) -> bool:
        return 200 <= self._patch_pod_code(pod, status) < 300

    def _patch_pod_code(self, pod: PodRef, status: dict[str, Any]) -> int:
        body: dict[str, Any] = {"status": status}
        if pod.uid:
            body["metadata"] = {"uid": pod.uid}  # a recreated namesake rejects the patch
        path = f"/api/v1/namespaces/{seg(pod.namespace)}/pods/{seg(pod.name)}/status"
        # A pod deleted since the plan was made has nothing left to report on.
        return self._patch_code(path, body, STRATEGIC_MERGE_PATCH, gone_ok=True,
                                namespace=pod.namespace, pod=pod.name)

    # PodGroups ----------------------------------------------------------------------------
    def set_podgroup_status(self, namespace: str, name: str, status: PodGroupStatus) -> bool:
        """Merge-patch the PodGroup's status; True if written (False: unchanged or failed)."""
        key = f"{namespace}/{name}"
        with self._lock:
            last = self._groups.get(key)
        status = settled(last[0] if last is not None else None, status, self.clock())
        if last is not None and last[0] == status:
            return False
        same_condition = last is not None and (last[0].reason, last[0].phase) == (
            status.reason, status.phase)
        since = last[1] if last is not None and same_condition else self.clock()
        body = {"status": status.to_json(since)}
        base = f"{PODGROUP_API}/namespaces/{seg(namespace)}/podgroups/{seg(name)}"
        written = False
        if self.status_subresource:
            code = self._patch_code(base + "/status", body, MERGE_PATCH, gone_ok=True,
                                    namespace=namespace, podgroup=name)
            written = 200 <= code < 300
            # Only a 404 can mean a missing subresource; a transient 5xx must not flip it.
            if code == 404 and self._missing_status_subresource(base):
                log.warning("podgroup_status_subresource_missing", reason="patching the object")
                self.status_subresource = False
        if not self.status_subresource:
            written = self._patch(base, body, MERGE_PATCH, namespace=namespace, podgroup=name)
        if written:
            with self._lock:
                self._groups[key] = (status, since)
        return written

    def podgroup_status(self, namespace: str, name: str) -> PodGroupStatus | None:
        """What this writer last wrote on the PodGroup (None: nothing yet, or forgotten)."""
        with self._lock:
            last = self._groups.get(f"{namespace}/{name}")
        return last[0] if last is not None else None

    def forget_podgroup(self, namespace: str, name: str) -> None:
        with self._lock:
            self._groups.pop(f"{namespace}/{name}", None)

    def _missing_status_subresource(self, base: str) -> bool:
        """After a 404 on ``/status``: the object exists, so the subresource is what is missing."""
        try:
            return self.client.request("GET", base, timeout=self.timeout).ok
        except TransportError:
            return False

    # Shared -------------------------------------------------------------------------------
    def _patch(self, path: str, body: dict[str, Any], content_type: str, gone_ok: bool = False,
               **keys: str) -> bool:
        code = self._patch_code(path, body, content_type, gone_ok, **keys)
        return 200 <= code < 300

    def _patch_code(self, path: str, body: dict[str, Any], content_type: str,
                    gone_ok: bool = False, **keys: str) -> int:
        """The reply's HTTP status (0: no reply); failures other than an expected 404 logged."""
        try:
            resp = self.client.request("PATCH", path, body=body, content_type=content_type,
                                       timeout=self.timeout)
        except TransportError as exc:
            # Debug: the client logs the outage once and the writer retries the write.
            log.debug("status_write_failed", reason=str(exc), **keys)
            return 0
        if resp.ok or (gone_ok and resp.status == 404):
            self._failures.succeeded(path)
        else:  # once per write and reason: a refused write is made again every cycle
            self._failures.failed("status_write_failed", path,
                                  f"HTTP {resp.status}: {resp.message()}", **keys)
        return resp.status
