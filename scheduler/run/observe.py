"""What a cycle and a bind's outcome tell the operator: the summary log line and the metrics.

Why apart from the loop: the loop's job is the cycle; this only watches it, fed by the same
values (the cycle's plan, the actuator's result, the last cycle's figures) and never by the
cache. It keeps what observation needs between cycles: the time placement took within the
current ``decide`` (``timed_solve``, the same ``placement.solve``, so plans are unchanged) and
the GPU-seconds accrual (``scheduler.run.accrual``), made on first use and charged up to
every scrape. Without metrics it still logs.
"""

from __future__ import annotations

import operator
import time
from collections import Counter
from collections.abc import Callable, Mapping

import structlog

from scheduler import placement
from scheduler.decide.housekeeping import PartlyBound
from scheduler.decide.plan import Bind
from scheduler.model import Gang
from scheduler.placement.types import Placement, PlacementParams, PlacementResult
from scheduler.report.chargeback import Ledger
from scheduler.run.accrual import Accrual
from scheduler.run.inflight import ApplyResult, Flight
from scheduler.run.last_cycle import LastCycle
from scheduler.run.metrics import SchedulerMetrics
from scheduler.world.snapshot import Snapshot

log = structlog.get_logger("gang_scheduler.loop")

Solver = Callable[[Gang, Snapshot, PlacementParams], PlacementResult]
_CATEGORY = operator.attrgetter("category")


class CycleObserver:
    """Logs and metrics of each cycle and bind outcome; *pool_gauge_interval*: seconds
    between updates of the per-pool GPU gauges (``Accrual``); *ledger*: the chargeback ledger
    the accrual sums into (default: its own)."""

    def __init__(self, metrics: SchedulerMetrics | None, clock: Callable[[], float],
                 pool_gauge_interval: float = 0.0, ledger: Ledger | None = None) -> None:
        self.metrics, self.clock, self.ledger = metrics, clock, ledger
        self.pool_gauge_interval = pool_gauge_interval
        self.accrual: Accrual | None = None  # for ``metrics``, made on first use
        self.solve_s = 0.0  # placement time within the current decide

    def solver(self) -> Solver | None:
        """The solver ``decide`` gets for the next cycle: timed with metrics, else the
        default (None)."""
        self.solve_s = 0.0
        return self._timed_solve if self.metrics is not None else None

    def _timed_solve(self, gang: Gang, snapshot: Snapshot,
                     params: PlacementParams) -> PlacementResult:
        started = time.perf_counter()
        result = placement.solve(gang, snapshot, params)
        elapsed = time.perf_counter() - started
        self.solve_s += elapsed
        if self.metrics is not None:
            solver = result.solved_by if isinstance(result, Placement) else "unplaceable"
            self.metrics.solver_duration.labels(solver).observe(elapsed)
        return result

    def cycle(self, last: LastCycle, result: ApplyResult, decide_s: float, apply_s: float,
              in_flight: int) -> None:
        """The cycle summary (info when the cycle did something, debug when idle) and the
        cycle's metrics; GPU-seconds allocated are accrued."""
        plan, inp = last.plan, last.inp
        categories = Counter(map(_CATEGORY, plan.pending.values()))  # (hundreds a cycle)
        reasons = {c.value: n for c, n in categories.items()}
        busy = plan.binds or plan.evictions or result.failed or result.blocked
        (log.info if busy else log.debug)(
            "cycle_summary", binds=len(plan.binds), failed=len(result.failed),
            in_flight=in_flight, evictions=len(result.evicted),
            blocked=len(result.blocked), nominations=len(plan.nominations),
            pending=len(plan.pending), reasons=dict(sorted(reasons.items())),
            decide_ms=round(decide_s * 1000, 1), solve_ms=round(self.solve_s * 1000, 1),
            apply_ms=round(apply_s * 1000, 1))
        m = self.metrics
        if m is None:
            return
        m.cycles.inc()
        m.cycle_duration.observe(decide_s)
        m.apply_duration.observe(apply_s)
        m.set_pending(last.waiting())
        m.set_tiers(last.tiers())
        m.set_queues(last.queues())
        self._accrual_of(m).cycle(inp.snapshot, plan, inp.gangs.pending, last.policies.queues)
        for r in plan.rollbacks:
            m.rollbacks.labels(str(r.cause)).inc()
        if result.blocked:
            m.evictions_blocked.inc(len(result.blocked))
        m.count_evictions(inp.snapshot.running.get(v) for v in result.evicted)

    def partial_completed(self, bind: Bind, partial: Mapping[str, PartlyBound]) -> None:
        """*bind* completed a gang that was partly bound when decided: logged."""
        gid = bind.gang_id
        if gid in partial:
            log.info("partial_gang_completed", gang=gid, bound=len(partial[gid].pods),
                     namespace=gid.split("/", 1)[0], queue=bind.queue)

    def binds_taken(self, result: ApplyResult) -> None:
        """Binds counted by outcome, once an outcome is taken in."""
        m = self.metrics
        if m is None:
            return
        if result.bound:
            m.binds.labels("success").inc(len(result.bound))
        if result.failed:
            m.binds.labels("failure").inc(len(result.failed))

    def landed(self, flight: Flight, result: ApplyResult, landed: float) -> None:
        """A flight's outcome was taken in at *landed*: logged, its duration observed."""
        log.debug("binds_landed", bound=len(result.bound), failed=len(result.failed),
                  bind_ms=round((landed - flight.launched) * 1000, 1))
        if self.metrics is not None:
            self.metrics.bind_duration.observe(max(0.0, landed - flight.launched))

    def forget_accounting(self) -> None:
        """Start accounting afresh: the next cycle charges no time (after a leadership gap,
        in which another replica charged the GPUs allocated)."""
        if self.accrual is not None:
            self.accrual.forget()

    def _accrual_of(self, m: SchedulerMetrics) -> Accrual:
        """The accrual of metrics *m*, charged up to the moment whenever they are read."""
        if self.accrual is None or self.accrual.metrics is not m:
            accrual = self.accrual = Accrual(m, self.pool_gauge_interval, self.clock,
                                              self.ledger)
            m.before_scrape(lambda: accrual.until(self.clock()))
        return self.accrual
