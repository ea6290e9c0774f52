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

A renewal that is merely late is not a loss of the Lease, so two things are kept apart:
``is_leader`` (may write now: renewed within ``renew_deadline``) and ``term``, the tenure this
replica owns. A term begins each time the Lease is acquired (created, free, expired, or taken
from another holder) and lasts until another holder is seen or the Lease is released; a
renewal after a late one, finding the Lease still as this replica left it (its own
holderIdentity, leaseTransitions unchanged: nobody else held it in between), continues the
term. The scheduling loop treats only a new term as a takeover (``scheduler.kube.runner``): a
replica whose renewals come late under load pauses its writes and resumes where it was,
rather than rolling back what it was binding as if a predecessor had left it.
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
from scheduler.kube.lead.fence import FenceToken

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
        self._leading = threading.Event()  # in a term (renewed in time or not)
        self._terms = 0  # terms begun by this process; the current one while _leading
        self._transitions: int | None = None  # leaseTransitions as this replica last wrote it
        self._late = False  # the current renewal is past renew_deadline (logged once)
        half = max(0.5, renew_deadline / 2)
        self.timeout = (min(5.0, half), half)  # (connect, read): both within the deadline

    @property
    def is_leader(self) -> bool:
        """Owning the Lease, renewed within ``renew_deadline`` (by this process's clock):
        this replica may write now."""
        return self._leading.is_set() and \
            self._monotonic() - self._last_renew <= self.renew_deadline

    @property
    def term(self) -> int | None:
        """The current tenure (see the module docstring): the same number through late
        renewals, a new one after every acquisition; None while another replica owns the
        Lease or none does."""
        return self._terms if self._leading.is_set() else None

    @property
    def fence_token(self) -> FenceToken | None:
        """The term as the Lease records it (holder, leaseTransitions), which the apiserver's
        fence compares the scheduler's Bindings and Evictions with (``scheduler.kube.lead.fence``);
        None while not in a term."""
        transitions = self._transitions
        if not self._leading.is_set() or transitions is None:
            return None
        return FenceToken(self.identity, transitions, f"{self.namespace}/{self.name}")

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        return self.client.request(method, path, body=body, timeout=self.timeout)

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True if this replica owns the Lease afterwards."""
        now = self._monotonic()  # before the read: this replica's renewal is no newer
        resp = self._request("GET", self.path)
        # After the read: another holder's renewal it shows may be that recent, so expiry is
        # counted from here, and the times written are no earlier than what was decided on.
        now_wall, seen_at = time.time(), self._monotonic()
        if resp.status == 404:
            body = self._lease_body(None, now_wall, transitions=0)
            created = self._request("POST", self.create_path, body)
            return self._won(created.ok, now, 0, renewal=False)
        if not resp.ok:
            log.warning("lease_read_failed", status=resp.status, reason=resp.message())
            return self._won(False, now)
        lease = resp.json()
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        seen = (holder, str(spec.get("renewTime") or ""))
        if seen != self._observed:
            self._observed, self._observed_at = seen, seen_at
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder != self.identity and self._leading.is_set():
            # Somebody else wrote the Lease (or released it) since this replica's last
            # renewal: whatever happens next, the term is over.
            log.warning("leader_lost", identity=self.identity, holder=holder)
            self._leading.clear()
        if holder and holder != self.identity and seen_at - self._observed_at < duration:
            return False  # somebody else owns a live lease
        counted = int(spec.get("leaseTransitions") or 0)
        renewal = (self._leading.is_set() and holder == self.identity
                   and counted == self._transitions)
        transitions = counted + (holder != self.identity)
        body = self._lease_body(lease, now_wall, transitions,
                                acquired=None if holder == self.identity else now_wall)
        updated = self._request("PUT", self.path, body)
        return self._won(updated.ok, now, transitions, renewal)

    def _won(self, ok: bool, now: float, transitions: int | None = None,
             renewal: bool = True) -> bool:
        """Record one attempt's result. *transitions*: the leaseTransitions written;
        *renewal*: the Lease was still this term's (else a success begins a new term)."""
        if ok:
            if self._late:
                log.info("lease_renewed_late", identity=self.identity, term=self._terms,
                         late_s=round(now - self._last_renew - self.renew_deadline, 2),
                         new_term=not renewal)
            self._last_renew, self._late = now, False
            if not (renewal and self._leading.is_set()):
                self._terms += 1
                log.info("leader_acquired", identity=self.identity, lease=self.name,
                         term=self._terms)
            self._transitions = transitions
            self._leading.set()
        elif self._leading.is_set() and now - self._last_renew > self.renew_deadline:
            # Not lost yet: writes stop (``is_leader``) but the term lasts until another
            # holder is seen, so a renewal that is only late resumes it.
            if not self._late:
                log.warning("lease_renewal_late", identity=self.identity, term=self._terms,
                            reason="not renewed within renewDeadlineSeconds; writes paused")
            self._late = True
        return self.is_leader

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
