"""Kubernetes events (``events.k8s.io/v1``), rate-limited per (object, reason).

Why rate-limited: a pending gang is re-examined every cycle; one ``FailedScheduling`` event per
cycle would bury ``kubectl describe`` and load etcd. The first occurrence creates an event; the
same message again is only counted, and at most once per ``interval`` the event's ``series``
(count, lastObservedTime) is patched, as client-go's event broadcaster does. A new message for the
same (object, reason) starts a new event. Event objects expire server-side (default 1 h): a
series patch that finds its event gone creates a fresh one.

On top of that, each object gets a token bucket, as client-go's event correlator gives each
(source, object) (``tools/record``: a burst of 25, then one every 5 minutes): an object whose
reasons keep changing (a gang's pods, every cycle) cannot flood the apiserver either; what
the bucket refuses is dropped, and logged at debug level.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import structlog

from scheduler.kube.client import MERGE_PATCH, Requester, TransportError
from scheduler.kube.client import path_segment as seg
from scheduler.model import PodRef

log = structlog.get_logger()

EVENTS_API = "/apis/events.k8s.io/v1"
CONTROLLER = "gangscheduler.io/gang-scheduler"
MAX_NOTE = 1024  # the API rejects longer notes


class EventReason(StrEnum):
    SCHEDULED = "Scheduled"
    FAILED_SCHEDULING = "FailedScheduling"
    PREEMPTED = "Preempted"
    GANG_ROLLED_BACK = "GangRolledBack"
    INVALID_ANNOTATION = "InvalidAnnotation"  # scheduler.kube.read.input_warnings
    INVALID_OBJECT = "InvalidObject"  # (idem)
    BELOW_MINIMUM = "BelowMinimum"  # scheduler.kube.write.shortfalls
    MINIMUM_RESTORED = "MinimumRestored"
    INCONSISTENT_GANG = "InconsistentGang"  # scheduler.kube.write.gang_notices


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object an event is about (``regarding``)."""

    kind: str
    namespace: str
    name: str
    uid: str = ""
    api_version: str = "v1"

    @classmethod
    def pod(cls, ref: PodRef) -> ObjectRef:
        return cls("Pod", ref.namespace, ref.name, ref.uid)

    @classmethod
    def podgroup(cls, namespace: str, name: str, uid: str = "") -> ObjectRef:
        return cls("PodGroup", namespace, name, uid, "scheduling.x-k8s.io/v1alpha1")

    def to_json(self) -> dict[str, str]:
        out = {"kind": self.kind, "name": self.name, "apiVersion": self.api_version}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        return out


def format_micro_time(ts: float) -> str:
    """Epoch seconds -> ``metav1.MicroTime`` (RFC 3339 with microseconds)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: Per object: writes allowed at once, and one more every this many seconds.
SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0


@dataclass(slots=True)
class _Bucket:
    """A token bucket: *tokens* left at *at*."""

    tokens: float
    at: float

    def take(self, now: float, burst: int, refill: float) -> bool:
        self.tokens = min(float(burst), self.tokens + max(0.0, now - self.at) / refill)
        self.at = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


@dataclass(slots=True)
class _Series:
    name: str
    namespace: str
    message: str
    count: int  # occurrences seen
    written_count: int  # what the server knows
    written_at: float


class EventRecorder:
    """Creates events and folds repeats into a series; thread-safe, bounded memory."""

    def __init__(self, client: Requester, *, interval: float = 60.0,
                 instance: str | None = None, clock: Callable[[], float] = time.time,
                 max_tracked: int = 20000, timeout: tuple[float, float] = (5.0, 30.0),
                 burst: int = SPAM_BURST, refill_seconds: float = SPAM_REFILL_SECONDS) -> None:
        self.client, self.interval, self.clock = client, interval, clock
        self.burst, self.refill_seconds = burst, refill_seconds
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self.instance = (instance or f"gang-scheduler-{socket.gethostname()}-{os.getpid()}")[:128]
        self.max_tracked, self.timeout = max_tracked, timeout
        self._lock = threading.Lock()
        self._series: OrderedDict[tuple[str, str], _Series] = OrderedDict()

    def emit(self, regarding: ObjectRef, reason: str, message: str,
             type_: EventType = EventType.NORMAL, action: str = "Scheduling") -> bool:
        """Record one occurrence; True if the apiserver was written to."""
        key = (regarding.uid or f"{regarding.kind}/{regarding.namespace}/{regarding.name}",
               str(reason))
        now = self.clock()
        with self._lock:
            series = self._series.get(key)
            if series is not None and series.message == message:
                series.count += 1
                self._series.move_to_end(key)
                if now - series.written_at < self.interval:
                    return False
                count = series.count
            else:
                count = 0
            if not self._allowed(key[0], now):
                log.debug("event_rate_limited", event_reason=str(reason),
                          object=f"{regarding.kind}/{regarding.namespace}/{regarding.name}")
                return False
        if count and series is not None:
            status = self._patch_series(series, count, now)
            if status == "ok":
                return True
            if status == "failed":
                return False
        return self._create(key, regarding, str(reason), message, type_, action, now)

    def forget(self, uid: str) -> None:
        """The object is gone: drop its series."""
        with self._lock:
            for key in [k for k in self._series if k[0] == uid]:
                del self._series[key]
            self._buckets.pop(uid, None)

    def _allowed(self, obj: str, now: float) -> bool:
        """Take a token from the object's bucket (under the lock)."""
        bucket = self._buckets.get(obj)
        if bucket is None:
            bucket = self._buckets[obj] = _Bucket(float(self.burst), now)
            while len(self._buckets) > self.max_tracked:
                self._buckets.popitem(last=False)
        self._buckets.move_to_end(obj)
        return bucket.take(now, self.burst, self.refill_seconds)

    def _create(self, key: tuple[str, str], regarding: ObjectRef, reason: str, message: str,
                type_: EventType, action: str, now: float) -> bool:
        namespace = regarding.namespace or "default"
        name = f"{regarding.name}.{time.time_ns():x}"
        body = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "eventTime": format_micro_time(now), "type": str(type_), "reason": reason,
                "action": action, "note": message[:MAX_NOTE], "regarding": regarding.to_json(),
                "reportingController": CONTROLLER, "reportingInstance": self.instance}
        if not self._send("POST", f"{EVENTS_API}/namespaces/{seg(namespace)}/events",
                          body, reason):
            return False
        with self._lock:
            self._series[key] = _Series(name, namespace, message, 1, 1, now)
            self._series.move_to_end(key)
            while len(self._series) > self.max_tracked:
                self._series.popitem(last=False)
        return True

    def _patch_series(self, series: _Series, count: int, now: float) -> str:
        """``ok``, ``gone`` (event expired: create anew) or ``failed``."""
        path = f"{EVENTS_API}/namespaces/{seg(series.namespace)}/events/{seg(series.name)}"
        body = {"series": {"count": count, "lastObservedTime": format_micro_time(now)}}
        try:
            resp = self.client.request("PATCH", path, body=body, content_type=MERGE_PATCH,
                                       timeout=self.timeout)
        except TransportError as exc:
            log.debug("event_write_failed", reason=str(exc))  # outage: logged by the client
            return "failed"
        if resp.status == 404:
            return "gone"
        if not resp.ok:
            log.warning("event_write_failed", status=resp.status, reason=resp.message())
            return "failed"
        with self._lock:
            series.written_count, series.written_at = count, now
        return "ok"

    def _send(self, method: str, path: str, body: dict[str, Any], reason: str) -> bool:
        try:
            resp = self.client.request(method, path, body=body, timeout=self.timeout)
        except TransportError as exc:
            log.debug("event_write_failed", event_reason=reason, reason=str(exc))  # (idem)
            return False
        if not resp.ok:
            log.warning("event_write_failed", event_reason=reason, status=resp.status,
                        reason=resp.message())
        return resp.ok
