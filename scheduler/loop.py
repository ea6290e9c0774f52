"""The scheduler: snapshot the cache, decide, apply. Shared by the live scheduler and the simulator.

Both build the same ``Scheduler(cache, policies, clock, actuator, metrics)`` and call the
same ``run_once()``; only the clock (wall or virtual) and the actuator (Kubernetes API or the
simulated cluster) differ. Nothing here knows which one it has.

What the loop adds around the pure ``decide``:

- binds that failed are forgotten by the cache and their gang waits out an exponential
  backoff before it is tried again (a pod deleted under us is not retried every cycle);
- successful binds are assumed in the cache until the watch confirms them;
- the previous plan is handed to the next ``decide`` so nominations and reservations persist;
- metrics and one summary log line per cycle.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from scheduler import cycle
from scheduler.cache import ClusterCache
from scheduler.metrics import SchedulerMetrics
from scheduler.plan import CyclePlan

log = structlog.get_logger("gang_scheduler.loop")


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What the actuator managed to carry out."""

    bound: tuple[str, ...] = ()  # gang ids whose every member is now bound
    failed: Mapping[str, str] = field(default_factory=dict)  # gang id -> why (rolled back)
    evicted: tuple[str, ...] = ()  # victim gang ids whose eviction was issued


class Actuator(Protocol):
    """Carries out a plan: the only side effects of a cycle."""

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult: ...


class PolicySource(Protocol):
    """The queue policies in force (the last good version, when an update was invalid)."""

    def current(self) -> cycle.Policies: ...


@dataclass(slots=True)
class _Backoff:
    until: float
    delay: float


class Scheduler:
    def __init__(
        self,
        cache: ClusterCache,
        policies: PolicySource,
        clock: Callable[[], float],
        actuator: Actuator,
        metrics: SchedulerMetrics | None = None,
        *,
        backoff_initial: float = 5.0,
        backoff_max: float = 300.0,
    ) -> None:
        self.cache = cache
        self.policies = policies
        self.clock = clock
        self.actuator = actuator
        self.metrics = metrics
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._backoff: dict[str, _Backoff] = {}
        self._previous: CyclePlan | None = None
        self.cycles = 0
        self.last_plan: CyclePlan | None = None

    def run_once(self) -> CyclePlan:
        """One cycle: decide on a snapshot, apply the plan, remember what happened."""
        now = self.clock()
        self.cycles += 1
        inp = self.cache.cycle_input(now)
        pending = [g for g in inp.gangs.pending if self._ready(g.id, now)]
        started = time.perf_counter()
        plan = cycle.decide(inp.snapshot, pending, self.policies.current(), now,
                            previous=self._previous)
        decided = time.perf_counter()
        result = self.actuator.apply(plan, now)
        applied = time.perf_counter()

        bound = set(result.bound)
        assumed = [pn for b in plan.binds if b.gang_id in bound for pn in b.pod_nodes]
        if assumed:
            self.cache.assume(assumed, now)
        for b in plan.binds:
            if b.gang_id in result.failed:
                self.cache.forget(ref for ref, _ in b.pod_nodes)
                self._fail(b.gang_id, now)
            elif b.gang_id in bound:
                self._backoff.pop(b.gang_id, None)
        self._previous = plan
        self.last_plan = plan
        self._observe(plan, result, decided - started, applied - decided)
        return plan

    # Backoff --------------------------------------------------------------------------------
    def _ready(self, gang_id: str, now: float) -> bool:
        b = self._backoff.get(gang_id)
        return b is None or b.until <= now

    def _fail(self, gang_id: str, now: float) -> None:
        prev = self._backoff.get(gang_id)
        delay = min(self.backoff_max, prev.delay * 2 if prev else self.backoff_initial)
        self._backoff[gang_id] = _Backoff(until=now + delay, delay=delay)

    def backing_off(self, now: float) -> dict[str, float]:
        """Gang id -> when it may be tried again, for gangs in backoff."""
        return {gid: b.until for gid, b in self._backoff.items() if b.until > now}

    # Observability ----------------------------------------------------------------------------
    def _observe(self, plan: CyclePlan, result: ApplyResult, decide_s: float,
                 apply_s: float) -> None:
        reasons = Counter(r.category.value for r in plan.pending.values())
        log.info("cycle", cycle=self.cycles, binds=len(result.bound), failed=len(result.failed),
                 evictions=len(plan.evictions), pending=len(plan.pending),
                 reasons=dict(sorted(reasons.items())), decide_ms=round(decide_s * 1000, 1),
                 apply_ms=round(apply_s * 1000, 1)) if (plan.binds or plan.evictions) else None
        m = self.metrics
        if m is None:
            return
        m.cycles.inc()
        m.cycle_duration.observe(decide_s)
        m.apply_duration.observe(apply_s)
        if result.bound:
            m.binds.labels("success").inc(len(result.bound))
        if result.failed:
            m.binds.labels("failure").inc(len(result.failed))
            for why in result.failed.values():
                m.rollbacks.labels(why.split(":", 1)[0][:40]).inc()
