"""Prometheus metrics on an injected registry.

The registry is a parameter, never the process-global default, so that tests, the simulator
and two schedulers in one process (leader election tests) each count only their own work.
Names follow Prometheus conventions: ``gang_scheduler_`` prefix, base units, ``_total``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric

from scheduler.model import RunningGang
from scheduler.model.demand import gpus_of
from scheduler.report.accounting import PoolGpus
from scheduler.report.chargeback import Interval
from scheduler.report.queue_report import QueueReport
from scheduler.run.config import PricingConfig

_LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
_CYCLE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10)


class _BeforeScrape:
    """A collector of no metrics of its own: registered before the others, it runs its
    hooks each time the registry is read, so they may bring counters up to date first."""

    def __init__(self) -> None:
        self.hooks: list[Callable[[], None]] = []

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> list[Metric]:
        for hook in self.hooks:
            hook()
        return []


class SchedulerMetrics:
    """Every metric the scheduler exports; one instance per scheduler."""

    def __init__(self, registry: CollectorRegistry | None = None,
                 pricing: PricingConfig | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.pricing = pricing if pricing is not None else PricingConfig()
        #: The label sets each `_replace`d gauge shows, so the next update can drop the stale ones.
        self._series: dict[Gauge, set[tuple[str, ...]]] = {}
        r = self.registry
        self._before_scrape = _BeforeScrape()
        r.register(self._before_scrape)  # type: ignore[arg-type]
        self.pending_gangs = Gauge(
            "gang_scheduler_pending_gangs", "Gangs waiting, by queue and reason category.",
            ["queue", "reason"], registry=r)
        self.gangs = Gauge(
            "gang_scheduler_gangs",
            "Gangs by queue, tier (interactive or batch: the gangscheduler.io/tier label) and "
            "state (pending or running); pending_gangs says why they wait.",
            ["queue", "tier", "state"], registry=r)
        self.scheduling_latency = Histogram(
            "gang_scheduler_gang_scheduling_latency_seconds",
            "From all required members present to all members bound.",
            ["queue"], buckets=_LATENCY_BUCKETS, registry=r)
        self.cycle_duration = Histogram(
            "gang_scheduler_cycle_duration_seconds", "Time to decide one scheduling cycle.",
            buckets=_CYCLE_BUCKETS, registry=r)
        self.apply_duration = Histogram(
            "gang_scheduler_apply_duration_seconds",
            "Time to carry out one cycle's plan, up to handing its binds to the binding stage.",
            buckets=_CYCLE_BUCKETS, registry=r)
        self.bind_duration = Histogram(
            "gang_scheduler_bind_duration_seconds",
            "Time from handing one cycle's binds over to their outcome (outside the cycle).",
            buckets=_CYCLE_BUCKETS, registry=r)
        self.solver_duration = Histogram(
            "gang_scheduler_solver_duration_seconds", "Placement solve time by solver.",
            ["solver"], buckets=_CYCLE_BUCKETS, registry=r)
        self.binds = Counter(
            "gang_scheduler_binds_total", "Gang bind attempts by result.", ["result"], registry=r)
        self.pods_bound = Counter(
            "gang_scheduler_pods_bound_total", "Pods bound.", registry=r)
        self.rollbacks = Counter(
            "gang_scheduler_rollbacks_total",
            "Partly bound gangs rolled back because completing them had become impossible, by "
            "cause (scheduler.decide.plan.RollbackCause); decided again while the deletes fail.",
            ["reason"], registry=r)
        self.pods_deleted = Counter(
            "gang_scheduler_pods_deleted_total",
            "Pods the scheduler deleted to roll back a partly bound gang, by cause (NoRoom, "
            "MemberGone, BindRefused, NotAdmitted). Never for a transient fault: a bind that "
            "failed for want of an answer parks its gang until the apiserver answers.",
            ["cause"], registry=r)
        self.evictions = Counter(
            "gang_scheduler_evictions_total", "Pods evicted to make room for a preemptor.",
            registry=r)
        self.evictions_blocked = Counter(
            "gang_scheduler_evictions_blocked_total",
            "Victim gangs whose eviction the apiserver refused (a PodDisruptionBudget, mostly).",
            registry=r)
        self.fenced_writes = Counter(
            "gang_scheduler_fenced_writes_total",
            "Writes not sent because this replica did not own the leader Lease at the moment "
            "of the write (a paused or deposed leader; scheduler.kube.lead.fence), or refused by "
            "the apiserver's leader fence.", registry=r)
        self.fenced_by_apiserver = Counter(
            "gang_scheduler_fenced_by_apiserver_total",
            "Of the fenced writes, those the apiserver's leader fence refused: Bindings and "
            "Evictions sent in a term the Lease had moved past (a leader paused between its "
            "own check and the send; scheduler.kube.lead.fence_policy).", registry=r)
        self.status_writes_failed = Counter(
            "gang_scheduler_status_writes_failed_total",
            "Status writes (pod conditions, PodGroup and Queue status, events) that got no "
            "answer or a 429/5xx, or were postponed while the apiserver did not answer (each "
            "is retried once it answers), or that the apiserver refused (another 4xx) or that "
            "failed before they were sent (scheduler.kube.write.writer).", registry=r)
        self.status_write_retries = Counter(
            "gang_scheduler_status_write_retries_total",
            "Status writes run again after they failed or were postponed.", registry=r)
        self.admission_reviews = Counter(
            "gang_scheduler_admission_reviews_total",
            "Admission reviews the webhook answered (webhook: mutate or validate; result: "
            "patched, unchanged or refused; scheduler.run.webhook).", ["webhook", "result"],
            registry=r)
        self.preemptions = Counter(
            "gang_scheduler_preemptions_total", "Victim gangs preempted, by queue.",
            ["queue"], registry=r)
        self.allocated_gpus = Gauge(
            "gang_scheduler_allocated_gpus", "GPUs allocated to running gangs.", ["queue", "pool"],
            registry=r)
        self.nominal_gpus = Gauge(
            "gang_scheduler_nominal_gpus", "Nominal GPU quota.", ["queue", "pool"], registry=r)
        self.fair_share = Gauge(
            "gang_scheduler_fair_share", "Queue's weighted fair share of its parent (0..1).",
            ["queue"], registry=r)
        self.usage_share = Gauge(
            "gang_scheduler_usage_share",
            "Queue's dominant-resource share (0..1) of what it shares with its siblings: every "
            "quota under its parent in full, lending limits aside (a root: its own subtree's).",
            ["queue"], registry=r)
        self.remembered_gpu_hours = Gauge(
            "gang_scheduler_remembered_gpu_hours",
            "Fair share with memory: GPU-hours the queue's subtree borrowed beyond its quota, "
            "each decayed by the scheduler policy's usage half-life since (absent when off).",
            ["queue"], registry=r)
        self.remembered_share = Gauge(
            "gang_scheduler_remembered_share",
            "Fair share with memory: what the remembered GPU-hours add to the queue's "
            "fair-share rank while it borrows (the past's share of its parent, per weight).",
            ["queue"], registry=r)
        self.budget_used_gpu_hours = Gauge(
            "gang_scheduler_budget_used_gpu_hours",
            "GPU-hours the queue's subtree used in its budget's current period "
            "(spec.guards.budget; absent without a budget).", ["queue", "period"], registry=r)
        self.budget_gpu_hours = Gauge(
            "gang_scheduler_budget_gpu_hours",
            "The queue's GPU-hour budget per period (spec.guards.budget).",
            ["queue", "period"], registry=r)
        self.cycles = Counter("gang_scheduler_cycles_total", "Scheduling cycles run.", registry=r)
        self.loop_passes = Counter(
            "gang_scheduler_loop_passes_total",
            "Passes of the leader's scheduling loop: each runs a cycle if anything changed or "
            "came due, else none (a cycle would repeat the last plan).", registry=r)
        self.is_leader = Gauge(
            "gang_scheduler_is_leader", "1 while this replica owns the leader lease.", registry=r)
        self.invalid_queues = Gauge(
            "gang_scheduler_invalid_queues", "Queue objects refused by validation.", registry=r)
        # Accounting (scheduler/report/accounting.py): chargeback and where GPUs sit unused.
        self.allocated_gpu_seconds = Counter(
            "gang_scheduler_allocated_gpu_seconds_total",
            "GPU-seconds allocated to running gangs, by queue, namespace and node pool.",
            ["queue", "namespace", "pool"], registry=r)
        self.idle_gpu_seconds = Counter(
            "gang_scheduler_idle_gpu_seconds_total",
            "Of the GPU-seconds allocated, those a GPU utilisation source saw idle, by queue, "
            "namespace and node pool; no series while no source tells (used is then unknown, "
            "not allocated): used = allocated - idle.",
            ["queue", "namespace", "pool"], registry=r)
        self.gpu_cost = Counter(
            "gang_scheduler_gpu_cost_total",
            "Cost of the GPU-seconds allocated, at the configured price per pool GPU-hour.",
            ["queue", "namespace", "pool", "currency"], registry=r)
        self.gpu_hour_price = Gauge(
            "gang_scheduler_gpu_hour_price", "Configured price of one GPU-hour, by pool.",
            ["pool", "currency"], registry=r)
        self.schedulable_gpus = Gauge(
            "gang_scheduler_schedulable_gpus", "GPUs of ready, schedulable nodes, by pool.",
            ["pool"], registry=r)
        self.idle_gpus = Gauge(
            "gang_scheduler_idle_gpus", "Free GPUs on ready, schedulable nodes, by pool.",
            ["pool"], registry=r)
        self.stranded_gpus = Gauge(
            "gang_scheduler_stranded_gpus",
            "Free GPUs on nodes where no waiting gang could place a pod, while a gang that "
            "could use the pool (its pods may run there, its queue has GPU quota there) waits.",
            ["pool"], registry=r)
        self.short_gangs = Gauge(
            "gang_scheduler_gangs_below_minimum",
            "Running gangs with fewer members than their minimum (a node lost, a member "
            "evicted or failed); explain names the missing ranks.",
            ["queue"], registry=r)
        self.reserved_idle_gpus = Gauge(
            "gang_scheduler_reserved_idle_gpus",
            "Free GPUs on nodes kept for a reserved or nominated gang that has not started.",
            ["pool"], registry=r)

        # GPU use joined with gangs (``gpuMetrics``: scheduler.run.gpu_metrics); absent when off.
        self.idle_allocated_gpus = Gauge(
            "gang_scheduler_idle_allocated_gpus",
            "GPUs allocated to running gangs that the GPU metrics show idle over the window, "
            "by queue, namespace and pool.", ["queue", "namespace", "pool"], registry=r)
        self.gang_idle_gpus = Gauge(
            "gang_scheduler_gang_idle_gpus",
            "A running gang's allocated GPUs idle over the window (flagged gangs only).",
            ["queue", "namespace", "gang"], registry=r)
        self.gang_straggler_ranks = Gauge(
            "gang_scheduler_gang_straggler_ranks",
            "A running gang's ranks whose GPU utilisation lags the gang's median (flagged "
            "gangs only).", ["queue", "namespace", "gang"], registry=r)
        self.gang_missing_ranks = Gauge(
            "gang_scheduler_gang_missing_ranks",
            "A running gang's ranks 0..size-1 with no running pod (flagged gangs only).",
            ["queue", "namespace", "gang"], registry=r)
        self.gpu_metrics_age = Gauge(
            "gang_scheduler_gpu_metrics_age_seconds",
            "Age of the GPU samples last read from Prometheus (NaN: never read).", registry=r)
        self.gpu_metrics_age.set(math.nan)
        self.gpu_metrics_read_failures = Counter(
            "gang_scheduler_gpu_metrics_read_failures_total",
            "Reads of the GPU metrics from Prometheus that failed, by reason (unreachable, "
            "status, format); the last good samples are kept.", ["reason"], registry=r)

    def before_scrape(self, hook: Callable[[], None]) -> None:
        """Run *hook* whenever the metrics are read, before any is collected (to charge
        GPU-seconds up to the moment of the scrape: ``scheduler.run.accrual``)."""
        self._before_scrape.hooks.append(hook)

    def _replace(self, gauge: Gauge, values: Mapping[tuple[str, ...], float]) -> None:
        """Set a labelled gauge to exactly *values*, dropping label sets that disappeared.

        New values first, stale label sets removed after: a scrape runs on the HTTP server's
        thread while the loop updates, and clearing before refilling let one scrape see a
        queue's series missing (a gap on a dashboard, a false ``absent()`` alert; the flake
        check at da5d3d5 caught ``gang_scheduler_fair_share`` read as absent this way).
        """
        for labels, value in values.items():
            gauge.labels(*labels).set(value)
        shown = self._series.get(gauge, set())
        for labels in shown - values.keys():
            gauge.remove(*labels)
        self._series[gauge] = set(values)

    def set_short(self, counts: Mapping[str, int]) -> None:
        self._replace(self.short_gangs, {(q,): float(v) for q, v in counts.items()})

    def set_pending(self, counts: Mapping[tuple[str, str], int]) -> None:
        self._replace(self.pending_gangs, {k: float(v) for k, v in counts.items()})

    def set_tiers(self, counts: Mapping[tuple[str, str, str], int]) -> None:
        """Gangs by (queue, tier, state) (``LastCycle.tiers``)."""
        self._replace(self.gangs, {k: float(v) for k, v in counts.items()})

    def set_allocation(self, allocated: Mapping[tuple[str, str], int],
                       nominal: Mapping[tuple[str, str], int]) -> None:
        self._replace(self.allocated_gpus, {k: float(v) for k, v in allocated.items()})
        self._replace(self.nominal_gpus, {k: float(v) for k, v in nominal.items()})

    def set_shares(self, fair: Mapping[str, float], usage: Mapping[str, float]) -> None:
        self._replace(self.fair_share, {(q,): v for q, v in fair.items()})
        self._replace(self.usage_share, {(q,): v for q, v in usage.items()})

    def set_queues(self, reports: Iterable[QueueReport]) -> None:
        """Allocated and nominal GPUs per (queue, pool), shares per queue, from one cycle."""
        reports = list(reports)
        self.set_allocation(
            {(q.name, p.pool): gpus_of(p.allocated) for q in reports for p in q.pools},
            {(q.name, p.pool): gpus_of(p.nominal) for q in reports for p in q.pools})
        self.set_shares({q.name: q.fair_share for q in reports},
                        {q.name: q.usage_share for q in reports})
        remembered = [q for q in reports if q.remembered_gpu_hours is not None]
        self._replace(self.remembered_gpu_hours,
                      {(q.name,): q.remembered_gpu_hours or 0.0 for q in remembered})
        self._replace(self.remembered_share,
                      {(q.name,): q.remembered_share for q in remembered})
        budgeted = [(q.name, q.budget) for q in reports if q.budget is not None]
        self._replace(self.budget_used_gpu_hours,
                      {(n, str(b.period)): b.used_gpu_hours for n, b in budgeted})
        self._replace(self.budget_gpu_hours,
                      {(n, str(b.period)): b.gpu_hours for n, b in budgeted})

    def charge(self, intervals: Iterable[Interval]) -> None:
        """Count the GPU-seconds, idle GPU-seconds (when known) and cost of *intervals*, the
        figures ``Interval`` computes (the chargeback ledger takes the same)."""
        currency = self.pricing.currency
        for interval in intervals:
            if interval.seconds <= 0:
                continue
            queue, namespace, pool = interval.key
            self.allocated_gpu_seconds.labels(queue, namespace, pool).inc(interval.gpu_seconds)
            self.gpu_cost.labels(queue, namespace, pool, currency).inc(interval.cost)
            idle = interval.idle_gpu_seconds
            if idle is not None:
                self.idle_gpu_seconds.labels(queue, namespace, pool).inc(idle)

    def set_pools(self, pools: Iterable[PoolGpus]) -> None:
        """Per-pool GPU gauges of one cycle, and the price of every pool seen."""
        pools = list(pools)
        self._replace(self.schedulable_gpus, {(p.pool,): p.total for p in pools})
        self._replace(self.idle_gpus, {(p.pool,): p.idle for p in pools})
        self._replace(self.stranded_gpus, {(p.pool,): p.stranded for p in pools})
        self._replace(self.reserved_idle_gpus, {(p.pool,): p.reserved_idle for p in pools})
        currency = self.pricing.currency
        names = {p.pool for p in pools} | set(self.pricing.gpu_hour)
        self._replace(self.gpu_hour_price,
                      {(pool, currency): self.pricing.price(pool) for pool in names})

    def set_gpu_use(self, idle: Mapping[tuple[str, str, str], int],
                    gangs: Mapping[tuple[str, str, str], tuple[int, int, int]]) -> None:
        """Idle allocated GPUs per (queue, namespace, pool), and per flagged gang
        ((queue, namespace, gang name) -> idle GPUs, straggler ranks, missing ranks): a
        gang no longer flagged or running loses its series."""
        self._replace(self.idle_allocated_gpus, {k: float(v) for k, v in idle.items()})
        for i, gauge in enumerate((self.gang_idle_gpus, self.gang_straggler_ranks,
                                   self.gang_missing_ranks)):
            self._replace(gauge, {k: float(v[i]) for k, v in gangs.items()})

    def count_evictions(self, victims: Iterable[RunningGang | None]) -> None:
        """Victim gangs whose eviction was issued (None: gone from the snapshot already)."""
        for rg in victims:
            self.preemptions.labels(rg.gang.queue if rg is not None else "").inc()
            self.evictions.inc(rg.gang.size if rg is not None else 0)
