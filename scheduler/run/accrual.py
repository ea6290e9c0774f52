"""GPU-seconds and cost charged to whoever is allocated GPUs, kept current between cycles.

Why apart from the loop: a cycle runs only when something changed (``scheduler.decide.due``), so
an idle cluster with gangs running may go minutes without one, while chargeback must not lag
that long. Each cycle says what is allocated from then on (``scheduler.report.accounting``);
what was allocated is charged for the time since, at each cycle and, between cycles, whenever
the metrics are read (``until``, hooked to the scrape): the counters are exact at every scrape,
and no cycle runs for them. The per-pool gauges (a pass over every node) are set at most every
``pool_interval`` seconds of cycles; a cycle that skipped them leaves its figures to the next
scrape, which sets them (the last cycle's, never older). Thread-safe: the loop and the scrape
both write.

One place computes each charge (``chargeback.Interval``) and two sinks take it: the counters
(durable in Prometheus) and the in-memory chargeback ledger (``/api/v1/chargeback``), so the
two never disagree. Idle GPUs (``set_idle``, from a GPU utilisation source) are charged the
same way into their own counter; until a source tells, idleness is unknown, not zero.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Mapping

from policies.queues import QueueSet
from scheduler.decide.plan import CyclePlan
from scheduler.model import Gang
from scheduler.report import accounting
from scheduler.report.chargeback import Interval, Ledger, Period, Row
from scheduler.run.metrics import SchedulerMetrics
from scheduler.world.snapshot import Snapshot

Key = tuple[str, str, str]  # (queue, namespace, pool)
Allocated = Mapping[Key, float]  # -> GPU-equivalents (0.5: half a GPU)


class Accrual:
    """What is allocated since when; the per-pool gauges at most every *pool_interval* seconds
    (a pass over every node). *clock*: the time ``set_idle`` and ``rows`` charge up to;
    *ledger*: where the chargeback rows are summed (default: a new one in the pricing's
    currency)."""

    def __init__(self, metrics: SchedulerMetrics, pool_interval: float = 0.0,
                 clock: Callable[[], float] | None = None, ledger: Ledger | None = None) -> None:
        self.metrics, self.pool_interval, self.clock = metrics, pool_interval, clock
        self.ledger = ledger if ledger is not None else Ledger(metrics.pricing.currency)
        self._lock = threading.Lock()
        self._accounted: tuple[float, Allocated] | None = None  # since when, what is allocated
        #: Idle GPUs of each key allocated (absent: none idle); None while no source told.
        self._idle: dict[Key, float] | None = None
        self._pools_at: float | None = None  # when the pool gauges were last set
        #: The last cycle, when it skipped the pool gauges (the next scrape sets them).
        self._skipped: tuple[Snapshot, CyclePlan, tuple[Gang, ...], QueueSet | None] | None = None

    def cycle(self, snapshot: Snapshot, plan: CyclePlan, pending: tuple[Gang, ...],
              queues: QueueSet | None) -> None:
        """Charge what was allocated up to the plan's time; from then on, what it leaves allocated
        (*queues*: those in force, which say whose pool an idle GPU is stranded in)."""
        due = self._pools_at is None or plan.now - self._pools_at >= self.pool_interval
        acc = accounting.account(snapshot, plan, pending, queues, with_pools=due)
        with self._lock:
            self._charge(plan.now)
            self._accounted = (plan.now, acc.allocated)
            if self._idle is not None:  # an allocation that ended takes its idle GPUs along
                self._idle = {k: n for k, n in self._idle.items() if acc.allocated.get(k, 0)}
            if due:
                self.metrics.set_pools(acc.pools)
                self._pools_at, self._skipped = plan.now, None
            else:
                self._skipped = (snapshot, plan, pending, queues)

    def until(self, now: float) -> None:
        """Charge what is allocated up to *now* (no cycle needed: no allocation changed since),
        and set the pool gauges a cycle skipped."""
        with self._lock:
            self._charge(now)
            if self._skipped is not None:
                snapshot, plan, pending, queues = self._skipped
                self.metrics.set_pools(
                    accounting.account(snapshot, plan, pending, queues, with_pools=True).pools)
                self._pools_at, self._skipped = plan.now, None

    def set_idle(self, idle: Mapping[Key, int], now: float | None = None) -> None:
        """From *now* (default: the clock's time) on, *idle* of each key's allocated GPUs are
        idle (a key absent: none). What was allocated up to then is charged with the idleness
        known before. Never more than allocated; keys not allocated are ignored."""
        with self._lock:
            self._charge_until(now)
            allocated = self._accounted[1] if self._accounted is not None else {}
            self._idle = {k: min(n, allocated[k]) for k, n in idle.items()
                          if n > 0 and allocated.get(k, 0) > 0}

    def rows(self, period: Period = "day", now: float | None = None,
             since: dt.date | None = None) -> tuple[Row, ...]:
        """The chargeback rows (of the days from *since* on), charged up to *now* (default:
        the clock's time)."""
        with self._lock:
            self._charge_until(now)
            return self.ledger.rows(period, since=since)

    def forget(self) -> None:
        """Start afresh: charge no time before the next cycle (after a leadership gap, in
        which another replica charged the GPUs allocated)."""
        with self._lock:
            self._accounted = None

    def _charge_until(self, now: float | None) -> None:
        """Charge up to *now*, or the clock's time, or (neither) not at all (under the lock)."""
        at = now if now is not None else self.clock() if self.clock is not None else None
        if at is not None:
            self._charge(at)

    def _charge(self, now: float) -> None:
        """Charge what is allocated from the last charge up to *now*, to the counters and the
        ledger alike (under the lock)."""
        if self._accounted is None or now <= self._accounted[0]:
            return
        since, allocated = self._accounted
        idle, price = self._idle, self.metrics.pricing.price
        charged = [Interval(since, now, key, gpus, None if idle is None else idle.get(key, 0),
                            price(key[2]))
                   for key, gpus in allocated.items()]
        self.metrics.charge(charged)
        self.ledger.add(charged)
        self._accounted = (now, allocated)
