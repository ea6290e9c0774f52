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
    """Gang id -> the time of the first cycle that saw it complete.

    Kept incrementally: a cycle's pending tuple is rebuilt whenever any pending gang changes
    (nearly every cycle of a long backlog), but most of its gang objects are last cycle's, and
    a gang object's completeness never changes. So ``track`` looks only at the gang objects
    that came or went since the last cycle, and at the gangs ``take`` or ``restore`` touched
    in between; the result equals working ``since`` out afresh from every pending gang (the
    complete ones keep their first time, all others are forgotten), which
    ``test_latency``'s property checks."""

    def __init__(self) -> None:
        self.since: dict[str, float] = {}
        self._tracked: tuple[Gang, ...] | None = None  # the pending gangs last tracked
        #: id(gang) -> gang, of the pending gangs last tracked (held, so no id is reused).
        self._objects: dict[int, Gang] = {}
        self._complete: set[str] = set()  # the ids of the complete ones among them
        self._touched: set[str] = set()  # gang ids taken or restored since the last track

    def track(self, pending: tuple[Gang, ...], now: float) -> None:
        """Remember when each pending gang was first seen complete; forget the others.
        *pending* names each gang once (the cache's pending gangs, by id)."""
        if pending is self._tracked:
            return  # the same gangs as last cycle: nothing to add or forget
        self._tracked = pending
        before, since, complete = self._objects, self.since, self._complete
        now_objects = dict(zip(map(id, pending), pending, strict=True))
        came = [now_objects[k] for k in now_objects.keys() - before.keys()]
        still = {g.id for g in came}
        for key in before.keys() - now_objects.keys():
            gid = before[key].id
            complete.discard(gid)
            if gid not in still:  # no longer pending (a gang replaced is judged below)
                since.pop(gid, None)
        for g in came:
            if g.is_complete:
                complete.add(g.id)
                since.setdefault(g.id, now)
            else:
                since.pop(g.id, None)
        for gid in self._touched:
            if gid in complete:
                since.setdefault(gid, now)
            else:
                since.pop(gid, None)
        self._objects, self._touched = now_objects, set()

    def take(self, gang_ids: list[str]) -> dict[str, float]:
        """The start of each of *gang_ids* known (no longer kept: their binds are out)."""
        self._touched.update(gang_ids)
        return {gid: self.since.pop(gid) for gid in gang_ids if gid in self.since}

    def restore(self, gang_id: str, since: float) -> None:
        """The gang's bind failed: it is pending again, its latency runs on from *since*."""
        self._touched.add(gang_id)
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
