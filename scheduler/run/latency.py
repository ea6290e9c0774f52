"""Since when each pending gang has been complete: where its scheduling latency starts.

Gang scheduling latency runs from the first cycle that saw a gang complete (all required
members present) to when all of it was bound (its outcome landed); a gang that stops being
complete or pending (a member deleted, the gang withdrawn) starts over. ``SchedulingLatency``
is the loop's one door: ``track`` each cycle, ``take`` when a gang's binds are handed over,
``landed`` when their outcome is in (a failed gang is pending again, its latency runs on; a
bound one is logged and observed). Apart from the loop because the loop's job is the cycle;
this is what a cycle's input and a bind's outcome tell about waiting.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from scheduler.decide.plan import Bind
from scheduler.model import Gang
from scheduler.run.inflight import ApplyResult
from scheduler.run.metrics import SchedulerMetrics

log = structlog.get_logger("gang_scheduler.loop")


class CompleteSince:
    """Gang id -> the time of the first cycle that saw it complete."""

    def __init__(self) -> None:
        self.since: dict[str, float] = {}
        self._tracked: tuple[Gang, ...] | None = None  # the pending gangs last tracked
        self._complete_of: dict[str, tuple[Gang, bool]] = {}  # gang id -> (gang, complete?)

    def track(self, pending: tuple[Gang, ...], now: float) -> None:
        """Remember when each pending gang was first seen complete; forget the others."""
        if pending is self._tracked:
            return  # the same gangs as last cycle: nothing to add or forget
        self._tracked = pending
        # Completeness of a gang object never changes: reuse last cycle's for the same objects.
        before, since = self._complete_of, self.since
        known: dict[str, tuple[Gang, bool]] = {}
        kept: dict[str, float] = {}  # the complete ones' first times: all others forgotten
        for g in pending:  # every pending gang, every cycle: the hit is read inline
            gid = g.id
            hit = before.get(gid)
            done = hit[1] if hit is not None and hit[0] is g else g.is_complete
            known[gid] = (g, done)
            if done:
                kept[gid] = since.get(gid, now)
        self._complete_of, self.since = known, kept

    def take(self, gang_ids: list[str]) -> dict[str, float]:
        """The start of each of *gang_ids* known (no longer kept: their binds are out)."""
        return {gid: self.since.pop(gid) for gid in gang_ids if gid in self.since}

    def restore(self, gang_id: str, since: float) -> None:
        """The gang's bind failed: it is pending again, its latency runs on from *since*."""
        self.since.setdefault(gang_id, since)


class SchedulingLatency:
    """Where each gang's latency starts (``CompleteSince``), and the bound gangs' latency
    logged (``gang_bound``) and observed in *metrics* (when there are metrics)."""

    def __init__(self, metrics: SchedulerMetrics | None) -> None:
        self.metrics = metrics
        self.complete = CompleteSince()

    def track(self, pending: tuple[Gang, ...], now: float) -> None:
        """A cycle's pending gangs (``CompleteSince.track``)."""
        self.complete.track(pending, now)

    def take(self, gang_ids: list[str]) -> dict[str, float]:
        """The binds of *gang_ids* are handed over: when each was first complete."""
        return self.complete.take(gang_ids)

    def landed(self, bind: Bind, result: ApplyResult, since: Mapping[str, float],
               at: float) -> None:
        """The outcome of *bind* landed at *at*: a failed gang's latency runs on from
        *since*; a bound gang's ends: logged with its size and observed per queue."""
        gid = bind.gang_id
        if gid in result.failed:
            if gid in since:  # it is pending again: its latency runs on
                self.complete.restore(gid, since[gid])
            return
        if gid not in result.bound:
            return
        latency = max(0.0, at - since[gid]) if gid in since else 0.0
        log.info("gang_bound", gang=gid, namespace=gid.split("/", 1)[0], queue=bind.queue,
                 pods=len(bind.pod_nodes), nodes=len(bind.placement.nodes),
                 latency_s=round(latency, 3))
        if self.metrics is not None:
            self.metrics.scheduling_latency.labels(bind.queue).observe(latency)
