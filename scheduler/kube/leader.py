"""Leader election on a ``coordination.k8s.io/v1`` Lease, so only one replica ever writes.

The algorithm is the usual one: a candidate takes the Lease when it is free or its holder
has not renewed it for ``lease_duration``; the leader renews every ``retry_period`` and
steps down if it could not renew within ``renew_deadline``. Expiry is judged by when *this*
process last saw the Lease change (its own monotonic clock), not by the timestamp written
by the other replica, so clock skew between nodes cannot make two leaders. Updates carry the
Lease's resourceVersion: two candidates racing for it cannot both win.

Why ``is_leader`` also checks the clock: a renewal that hangs on a slow apiserver must not leave
a replica believing it leads after ``renew_deadline``, by which time a standby (which waits the
longer ``lease_duration``) may be about to take over. Requests time out within the deadline too.
On shutdown the Lease is released only after ``quiesce`` returns (the scheduling loop has
finished its cycle), so a standby that takes over at once never overlaps a last write.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import structlog

from scheduler.kube.client import Requester

log = structlog.get_logger("gang_scheduler.leader")


def _micro_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, client: Requester, namespace: str, name: str, identity: str, *,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0,
                 retry_period: float = 2.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("leaderElection: need leaseDuration > renewDeadline > retryPeriod")
        self.client, self.identity = client, identity
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self.create_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.namespace, self.name = namespace, name
        self.lease_duration, self.renew_deadline = lease_duration, renew_deadline
        self.retry_period, self._monotonic = retry_period, monotonic
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._last_renew = 0.0
        self._leading = threading.Event()
        half = max(0.5, renew_deadline / 2)
        self.timeout = (min(5.0, half), half)  # (connect, read): both within the deadline

    @property
    def is_leader(self) -> bool:
        """Holding the Lease, renewed within ``renew_deadline`` (by this process's clock)."""
        return self._leading.is_set() and \
            self._monotonic() - self._last_renew <= self.renew_deadline

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        return self.client.request(method, path, body=body, timeout=self.timeout)

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True if this replica holds the Lease afterwards."""
        now_wall, now = time.time(), self._monotonic()
        resp = self._request("GET", self.path)
        if resp.status == 404:
            body = self._lease_body(None, now_wall, transitions=0)
            created = self._request("POST", self.create_path, body)
            return self._won(created.ok, now)
        if not resp.ok:
            log.warning("lease_read_failed", status=resp.status, reason=resp.message())
            return self._won(False, now)
        lease = resp.json()
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        seen = (holder, str(spec.get("renewTime") or ""))
        if seen != self._observed:
            self._observed, self._observed_at = seen, now
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and now - self._observed_at < duration:
            if self._leading.is_set():
                log.warning("leader_lost", identity=self.identity, holder=holder)
                self._leading.clear()
            return False  # somebody else holds a live lease
        transitions = int(spec.get("leaseTransitions") or 0) + (holder != self.identity)
        body = self._lease_body(lease, now_wall, transitions,
                                acquired=None if holder == self.identity else now_wall)
        updated = self._request("PUT", self.path, body)
        return self._won(updated.ok, now)

    def _won(self, ok: bool, now: float) -> bool:
        if ok:
            self._last_renew = now
            if not self._leading.is_set():
                log.info("leader_acquired", identity=self.identity, lease=self.name)
            self._leading.set()
        elif self._leading.is_set() and now - self._last_renew > self.renew_deadline:
            log.warning("leader_lost", identity=self.identity, lease=self.name)
            self._leading.clear()
        return self._leading.is_set()

    def _lease_body(self, current: dict[str, Any] | None, now: float, transitions: int,
                    acquired: float | None = None) -> dict[str, Any]:
        spec = dict((current or {}).get("spec") or {})
        spec.update({"holderIdentity": self.identity,
                     "leaseDurationSeconds": math.ceil(self.lease_duration),
                     "renewTime": _micro_time(now), "leaseTransitions": transitions})
        if acquired is not None or "acquireTime" not in spec:
            spec["acquireTime"] = _micro_time(acquired if acquired is not None else now)
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if current is not None:
            metadata["resourceVersion"] = current["metadata"]["resourceVersion"]
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": metadata, "spec": spec}

    def run(self, stop: threading.Event, quiesce: Callable[[], object] | None = None) -> None:
        """Keep trying / renewing until *stop* is set (run it in a thread), then release.

        ``quiesce`` is called after this replica stopped calling itself leader and before
        the Lease is given up: the caller waits there for its last cycle to finish.
        """
        while not stop.is_set():
            try:
                self.try_acquire_or_renew()
            except Exception as exc:  # transport errors: keep trying until the deadline
                log.warning("lease_error", identity=self.identity, error=str(exc))
                self._won(False, self._monotonic())
            stop.wait(self.retry_period)
        if self._leading.is_set():
            self._leading.clear()
            if quiesce is not None:
                quiesce()
            try:
                self.release()
            except Exception as exc:  # the Lease then simply expires
                log.warning("lease_release_failed", identity=self.identity, error=str(exc))

    def release(self) -> None:
        """Give the Lease up on shutdown so a standby takes over at once."""
        self._leading.clear()
        resp = self._request("GET", self.path)
        if not resp.ok:
            return
        lease = resp.json()
        if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        lease["spec"]["holderIdentity"] = ""
        lease["spec"]["leaseDurationSeconds"] = 1
        if self._request("PUT", self.path, lease).ok:
            log.info("leader_released", identity=self.identity, lease=self.name)
