"""Carry out a plan's preemptions: mark, evict through the Eviction API, report, retry.

Each victim pod first gets a ``DisruptionTarget`` condition naming the preemptor (so the
workload and its controller can tell a preemption from a node failure), then an Eviction with
the configured grace period, so a trainer can checkpoint on SIGTERM. The Eviction API writes
its own ``DisruptionTarget`` ("EvictionByEvictionAPI"), so the condition is written again
once the eviction is accepted: who preempted the pod is what its owner needs to know.

Evictions honour PodDisruptionBudgets: one the apiserver refuses (429) is reported on the
pod as an ``EvictionBlocked`` event and in the result, never forced by a delete. Every pod
of a victim is first evicted with ``dryRun``, so a budget that refuses any of them leaves the
whole gang running rather than half of it (a budget allowing fewer disruptions than the
gang has pods can still split it; the rest is then retried).

A refused victim keeps its preemptor's nomination (``decide`` carries it over while the
victim runs), so the eviction of the pods still not evicted is retried here every
``retry_seconds`` for as long as the plan still nominates that preemptor: once the budget
allows it, the preemption completes. Everything comes from the plan (the victim's pods and
queue are in its ``Eviction``); the cluster cache is never read.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import structlog

from scheduler.kube.binder import Binder, EvictOutcome
from scheduler.kube.client import STRATEGIC_MERGE_PATCH, TransportError
from scheduler.kube.client import path_segment as seg
from scheduler.kube.events import EventReason, EventRecorder, EventType, ObjectRef
from scheduler.kube.status import format_time
from scheduler.model import PodRef
from scheduler.plan import CyclePlan, Eviction

log = structlog.get_logger("gang_scheduler.evictor")

EVICTION_BLOCKED = "EvictionBlocked"


class Submitter(Protocol):
    """Where background writes go (the actuator's ``BackgroundWriter``)."""

    def submit(self, key: str, task: Callable[[], None]) -> None: ...


@dataclass(frozen=True, slots=True)
class EvictionReport:
    evicted: tuple[str, ...]  # victim gangs whose every bound pod is now being evicted
    blocked: dict[str, str]  # victim gang -> why not (the apiserver's words)


class Evictor:
    def __init__(self, binder: Binder, events: EventRecorder, writer: Submitter,
                 grace_period_seconds: int, retry_seconds: float = 5.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.binder, self.events = binder, events
        self.writer, self.grace, self.retry_seconds = writer, grace_period_seconds, retry_seconds
        self._monotonic = monotonic
        #: Victim gang -> when its eviction was refused, and its pods not evicted yet.
        self._blocked: dict[str, tuple[float, Eviction]] = {}

    def evict(self, plan: CyclePlan, now: float) -> EvictionReport:
        fresh = {e.victim for e in plan.evictions}
        tick = self._monotonic()
        retries = [dataclasses.replace(self._blocked[v][1], preemptor=n.gang_id,
                                       message="retrying an eviction the apiserver refused")
                   for n in plan.nominations for v in n.victims
                   if v in self._blocked and v not in fresh
                   and tick - self._blocked[v][0] >= self.retry_seconds]
        nominated = {v for n in plan.nominations for v in n.victims}
        self._blocked = {v: b for v, b in self._blocked.items() if v in nominated}
        evicted: list[str] = []
        blocked: dict[str, str] = {}
        todo = [(e, False) for e in plan.evictions] + [(e, True) for e in retries]
        for victim, retry in todo:
            refused, left = self._evict_one(victim, retry)
            if not refused:
                evicted.append(victim.victim)
                self._blocked.pop(victim.victim, None)
            else:
                blocked[victim.victim] = refused[0].reason
                self._blocked[victim.victim] = (tick, dataclasses.replace(victim, pods=left))
        return EvictionReport(tuple(evicted), blocked)

    def _evict_one(self, victim: Eviction,
                   retry: bool) -> tuple[list[EvictOutcome], tuple[PodRef, ...]]:
        """Evict the victim's pods (those bound and not yet terminating when ``decide`` chose
        it): the refusals (none when every pod went) and the pods still to evict."""
        refs = list(victim.pods)
        ns = victim.victim.split("/", 1)[0]
        keys = {"gang": victim.victim, "namespace": ns, "queue": victim.queue}
        message = f"preempted by gang {victim.preemptor}: {victim.message}"
        refused = [o for o in self.binder.executor.map(self._dry_run, refs) if not o.ok]
        left = victim.pods  # a refused dry run evicts nothing
        if not refused:
            if not retry:
                for ref in refs:
                    self._mark(ref, message, keys)
            outcomes = self.binder.evict_pods(refs, self.grace)
            refused = [o for o in outcomes if not o.ok]
            left = tuple(o.pod for o in refused)
        else:
            outcomes = refused
        for o in outcomes:
            if o.ok:
                self.writer.submit(f"mark/{o.pod.uid}", functools.partial(self._mark, o.pod,
                                                                          message, keys))
                self._event(o.pod, EventReason.PREEMPTED, message, "Preempting")
            else:
                self._event(o.pod, EVICTION_BLOCKED, f"eviction for gang {victim.preemptor} "
                            f"refused, will retry: {o.reason}", "Evicting")
        if refused:
            log.warning("eviction_blocked", **keys, preemptor=victim.preemptor,
                        pods=len(refused), status=refused[0].status, reason=refused[0].reason)
            return refused, left
        log.info("gang_preempted", **keys, preemptor=victim.preemptor, pods=len(refs),
                 grace_period_seconds=self.grace, retry=retry)
        return [], ()

    def _mark(self, pod: PodRef, message: str, keys: dict[str, str]) -> None:
        """``DisruptionTarget=True``, reason ``PreemptionByScheduler``, naming the preemptor;
        *keys* (gang, namespace, queue of the victim) go into any log line."""
        condition = {"type": "DisruptionTarget", "status": "True",
                     "reason": "PreemptionByScheduler", "message": message,
                     "lastTransitionTime": format_time(time.time())}
        path = f"/api/v1/namespaces/{seg(pod.namespace)}/pods/{seg(pod.name)}/status"
        try:
            resp = self.binder.client.request(
                "PATCH", path, body={"metadata": {"uid": pod.uid},
                                     "status": {"conditions": [condition]}},
                content_type=STRATEGIC_MERGE_PATCH, timeout=self.binder.timeout)
        except TransportError as exc:
            log.warning("disruption_target_failed", **keys, pod=pod.name, reason=str(exc))
            return
        if not resp.ok and resp.status not in (404, 409):  # gone already: nothing to say
            log.warning("disruption_target_failed", **keys, pod=pod.name, status=resp.status,
                        reason=resp.message())

    def _dry_run(self, pod: PodRef) -> EvictOutcome:
        """Would the apiserver evict *pod* now (PodDisruptionBudgets)? Nothing is changed."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod.name, "namespace": pod.namespace},
                "deleteOptions": {"dryRun": ["All"], "preconditions": {"uid": pod.uid}}}
        path = f"/api/v1/namespaces/{seg(pod.namespace)}/pods/{seg(pod.name)}/eviction"
        try:
            resp = self.binder.client.request("POST", path, query={"dryRun": "All"}, body=body,
                                              timeout=self.binder.timeout)
        except TransportError as exc:
            return EvictOutcome(pod, False, 0, f"no reply from the apiserver: {exc}")
        if resp.ok or resp.status in (404, 409):
            return EvictOutcome(pod, True, resp.status)
        why = "blocked by PodDisruptionBudget: " if resp.status == 429 else ""
        return EvictOutcome(pod, False, resp.status, why + resp.message())

    def _event(self, pod: PodRef, reason: str, message: str, action: str) -> None:
        def task() -> None:
            self.events.emit(ObjectRef.pod(pod), reason, message, EventType.WARNING,
                             action=action)
        self.writer.submit(f"event/{pod.uid}/{reason}", task)
