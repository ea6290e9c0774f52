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
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from policies.queues import QueueSet
from scheduler.decide.plan import CyclePlan
from scheduler.model import Gang
from scheduler.report import accounting
from scheduler.run.metrics import SchedulerMetrics
from scheduler.world.snapshot import Snapshot

Allocated = Mapping[tuple[str, str, str], int]  # (queue, namespace, pool) -> GPUs


class Accrual:
    """What is allocated since when; the per-pool gauges at most every *pool_interval* seconds
    (a pass over every node)."""

    def __init__(self, metrics: SchedulerMetrics, pool_interval: float = 0.0) -> None:
        self.metrics, self.pool_interval = metrics, pool_interval
        self._lock = threading.Lock()
        self._accounted: tuple[float, Allocated] | None = None  # since when, what is allocated
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
            if due:
                self.metrics.set_pools(acc.pools)
                self._pools_at, self._skipped = plan.now, None
            else:
                self._skipped = (snapshot, plan, pending, queues)

    def until(self, now: float) -> None:
        """Charge what is allocated up to *now* (no cycle needed: no allocation changed since),
        and set the pool gauges a cycle skipped."""
        with self._lock:
            if self._accounted is not None and now > self._accounted[0]:
                self._charge(now)
                self._accounted = (now, self._accounted[1])
            if self._skipped is not None:
                snapshot, plan, pending, queues = self._skipped
                self.metrics.set_pools(
                    accounting.account(snapshot, plan, pending, queues, with_pools=True).pools)
                self._pools_at, self._skipped = plan.now, None

    def forget(self) -> None:
        """Start afresh: charge no time before the next cycle (after a leadership gap, in
        which another replica charged the GPUs allocated)."""
        with self._lock:
            self._accounted = None

    def _charge(self, now: float) -> None:
        """(Under the lock.)"""
        if self._accounted is not None:
            since, allocated = self._accounted
            self.metrics.accrue(allocated, now - since)
