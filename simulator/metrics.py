"""From what happened in a simulation to the figures a capacity planner compares.

Why apart from the engine: the engine records facts (per job: when it started and ended, what
it lost; per instant: how many GPUs were allocated and busy); this module turns facts into figures.
Every baseline policy is measured by the same code, so a difference in the report is a
difference in scheduling, not in bookkeeping.

Conventions, stated once:

- the utilization timeline is a step function: a `UtilizationSample` lasts until the next one,
  and the last one until *end_time* (or, without it, the timeline ends at the last sample);
- utilization is a ratio of integrals, GPU-seconds busy / GPU-seconds in the cluster, so that
  time with failed nodes counts with the capacity that was really there;
- queueing delay (start - submit) covers every job that started, finished or not (its delay is
  known); JCT (end - submit) covers finished jobs; jobs never started are counted apart;
- the arrival window runs from the first submission to the last; utilization is also given
  over it and over its steady state (the window less its first `WARMUP_SHARE`, when the
  cluster fills up from empty), since the whole horizon includes the drain after the last
  arrival, when the cluster empties and utilization falls whatever the policy;
- fairness comes twice: `jain_index` over mean share / entitlement (the textbook figure, which
  marks a queue unfair merely for being idle), and `jain_index_demand`, the time-weighted Jain
  index of allocation / fair share, where the fair share is the entitlement capped by what the
  queue asked for at that instant (`fairness`). Instants where nobody waits or runs
  are left out of it. Over time, the same fair share per `FAIRNESS_WINDOW` gives the
  fair-share gap (`fairness.share_gaps`);
- figures per class of work (`classes`) use the trace's class, or the gang's size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulator import fairness, stats
from simulator.classes import ClassReport, class_reports
from simulator.stats import Distribution

HOUR = 3600.0
#: The windows of fairness over time (`fairness.share_gaps`): a quarter of a day, short
#: enough to see a day's swing, long enough to hold a few gangs' starts and ends.
FAIRNESS_WINDOW = 6 * HOUR
#: Share of the arrival window counted as warm-up (not steady state).
WARMUP_SHARE = 0.1


@dataclass(frozen=True, slots=True)
class JobOutcome:
    job_id: str
    queue: str
    gpus: int
    submit_time: float
    start_time: float | None  # first time ALL members ran; None: never started by the end
    end_time: float | None  # completion; None: unfinished
    preemptions: int = 0
    gpu_seconds_lost: float = 0.0  # work thrown away by preemption or node failure
    gpu_seconds_idle_partial: float = 0.0  # GPUs allocated to pods of a gang not fully placed
    gpu_seconds_checkpointing: float = 0.0  # GPU time spent writing checkpoints
    stopped: bool = False  # stopped by its queue's maxRuntimeSeconds (end_time stays None)
    #: When a guard stopped it (None: not stopped): its demand ends there, not never.
    stop_time: float | None = None
    #: The trace's class of work (``TraceJob.job_class``); empty when the trace gives none.
    job_class: str = ""


@dataclass(frozen=True, slots=True)
class UtilizationSample:
    time: float
    total_gpus: int
    allocated_gpus: int  # GPUs allocated to bound pods
    busy_gpus: int  # GPUs of gangs that are fully running (doing useful work)
    stranded_gpus: int  # free GPUs on partly used nodes (fragmentation)
    allocated_by_queue: Mapping[str, int] = field(default_factory=dict)
    # queue -> pool -> GPUs; optional, only needed for per-pool prices
    allocated_by_queue_pool: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: GPUs of submitted, unfinished jobs that are not running whole: the backlog.
    pending_gpus: int = 0


@dataclass(frozen=True, slots=True)
class Pricing:
    """Price of one GPU-hour: per pool when known (and recorded), else the default."""

    per_gpu_hour: float = 0.0
    per_pool: Mapping[str, float] = field(default_factory=dict)
    currency: str = "USD"


@dataclass(frozen=True, slots=True)
class QueueReport:
    queue: str
    jobs: int
    finished: int
    never_started: int
    entitlement: float | None  # None: queue not in the entitlement mapping
    mean_share: float | None  # GPU-seconds allocated / cluster GPU-seconds
    mean_fair_share: float | None  # demand-capped entitlement, same units
    gpu_hours: float  # allocated to the queue's pods, partial gangs included
    cost: float
    gpu_hours_idle_partial: float
    preemptions: int
    queueing_delay_p95: float | None


@dataclass(frozen=True, slots=True)
class PolicyReport:
    policy: str
    jobs: int
    started: int
    finished: int
    never_started: int
    horizon_seconds: float
    gpu_utilization: float | None  # busy GPU-seconds / cluster GPU-seconds
    gpu_allocation: float | None  # allocated GPU-seconds / cluster GPU-seconds
    queueing_delay: Distribution  # seconds, started jobs
    jct: Distribution  # seconds, finished jobs
    jain_index: float | None
    jain_index_demand: float | None
    stranded_gpus_mean: float | None
    stranded_fraction: float | None
    preemptions: int
    gpu_hours_lost: float
    gpu_hours_total: float
    gpu_hours_allocated: float
    gpu_hours_busy: float
    gpu_hours_idle_partial: float
    total_cost: float
    queues: tuple[QueueReport, ...]
    #: Useful GPU-seconds (busy minus the work preemption and failures threw away and the time
    #: spent writing checkpoints) / cluster GPU-seconds: what the cluster got done.
    gpu_goodput: float | None = None
    gpu_hours_checkpointing: float = 0.0  # GPU-hours spent writing checkpoints
    arrival_start: float = 0.0  # first submission, seconds
    arrival_end: float = 0.0  # last submission, seconds
    gpu_utilization_arrivals: float | None = None  # busy share over the arrival window
    gpu_utilization_steady: float | None = None  # ... over its steady state (no warm-up)
    #: Mean GPUs of submitted jobs not running (queued, or partly placed), arrival window.
    backlog_gpus_mean: float | None = None
    currency: str = "USD"  # of every cost figure
    #: Jobs stopped for good by a runaway guard (their queue's maxRuntimeSeconds).
    stopped: int = 0
    #: Fairness over time: the largest gap, in any `FAIRNESS_WINDOW`, between a queue's
    #: share of the cluster's GPU-time and what it was owed (demand-capped), as a fraction of
    #: the cluster; and the mean over windows of each window's largest gap.
    fair_share_gap_max: float | None = None
    fair_share_gap_mean: float | None = None
    classes: tuple[ClassReport, ...] = ()  # per class of work (`simulator.classes`)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types only (dicts, lists, str, int, float, None)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PolicyReport:
        values = dict(data)
        values["queueing_delay"] = Distribution(**values["queueing_delay"])
        values["jct"] = Distribution(**values["jct"])
        values["queues"] = tuple(QueueReport(**q) for q in values["queues"])
        values["classes"] = tuple(ClassReport(**c) for c in values.get("classes", ()))
        return cls(**values)


@dataclass(frozen=True, slots=True)
class PolicyRun:
    """One policy's simulation: the facts and the figures, what the report writers need."""

    report: PolicyReport
    outcomes: tuple[JobOutcome, ...]
    samples: tuple[UtilizationSample, ...]


def compute_report(
    policy: str,
    outcomes: Sequence[JobOutcome],
    samples: Sequence[UtilizationSample],
    *,
    entitlements: Mapping[str, float] | None = None,
    pricing: Pricing = Pricing(),
    end_time: float | None = None,
) -> PolicyReport:
    """Compute every figure of the report. *entitlements* maps queue -> fraction of the cluster;
    without it every queue seen is entitled to an equal share."""
    ordered = sorted(samples, key=lambda s: s.time)
    times = np.array([s.time for s in ordered], dtype=np.float64)
    dt = stats.interval_lengths(times, end_time)
    total = np.array([s.total_gpus for s in ordered], dtype=np.float64)
    total_gs = float(total @ dt)

    def integral(values: list[int]) -> float:
        return float(np.asarray(values, dtype=np.float64) @ dt)

    def ratio(part: float) -> float | None:
        return part / total_gs if total_gs > 0 else None

    alloc_gs = integral([s.allocated_gpus for s in ordered])
    busy_gs = integral([s.busy_gpus for s in ordered])
    stranded_gs = integral([s.stranded_gpus for s in ordered])
    horizon = float(dt.sum())

    queues = sorted(
        {o.queue for o in outcomes}
        | set(entitlements or {})
        | {q for s in ordered for q in (*s.allocated_by_queue, *s.allocated_by_queue_pool)}
    )
    if entitlements is None:  # every queue seen is entitled to an equal share
        entitlements = dict.fromkeys(queues, 1 / len(queues)) if queues else {}
    ent = dict(entitlements)
    allocated = _queue_matrix(ordered, queues)
    allocated_gs = allocated.T @ dt  # per queue
    by_queue: dict[str, list[JobOutcome]] = {q: [] for q in queues}
    for outcome in outcomes:
        by_queue[outcome.queue].append(outcome)
    owed = fairness.owed_matrix(by_queue, queues, ent, times, total)
    fair_gs, jain_demand = fairness.fair_shares(owed, dt, allocated, len(queues))
    gaps = fairness.share_gaps(owed, allocated, times, dt, total, FAIRNESS_WINDOW)
    cost_by_queue = _costs(ordered, queues, allocated_gs, dt, pricing)

    delays = _delays(outcomes)
    jcts = [o.end_time - o.submit_time for o in outcomes if o.end_time is not None]
    per_queue = []
    for qi, queue in enumerate(queues):
        mine = by_queue[queue]
        per_queue.append(
            QueueReport(
                queue=queue,
                jobs=len(mine),
                finished=sum(1 for o in mine if o.end_time is not None),
                never_started=sum(1 for o in mine if o.start_time is None),
                entitlement=ent.get(queue),
                mean_share=ratio(float(allocated_gs[qi])),
                mean_fair_share=ratio(float(fair_gs[qi])),
                gpu_hours=float(allocated_gs[qi]) / HOUR,
                cost=cost_by_queue[qi],
                gpu_hours_idle_partial=sum(o.gpu_seconds_idle_partial for o in mine) / HOUR,
                preemptions=sum(o.preemptions for o in mine),
                queueing_delay_p95=stats.describe(_delays(mine)).p95,
            )
        )
    shares_vs_entitlement = [
        q.mean_share / q.entitlement
        for q in per_queue
        if q.entitlement and q.mean_share is not None
    ]
    first = min((o.submit_time for o in outcomes), default=0.0)
    last = max((o.submit_time for o in outcomes), default=0.0)
    steady = first + WARMUP_SHARE * (last - first)
    busy = np.array([s.busy_gpus for s in ordered], dtype=np.float64)

    def window_ratio(start: float) -> float | None:
        capacity = stats.integral_over(times, dt, total, start, last)
        return stats.integral_over(times, dt, busy, start, last) / capacity \
            if capacity > 0 else None

    pending = np.array([s.pending_gpus for s in ordered], dtype=np.float64)
    lost_gs = sum(o.gpu_seconds_lost for o in outcomes)
    writing_gs = sum(o.gpu_seconds_checkpointing for o in outcomes)
    return PolicyReport(
        policy=policy,
        jobs=len(outcomes),
        started=len(delays),
        finished=len(jcts),
        never_started=len(outcomes) - len(delays),
        horizon_seconds=horizon,
        gpu_utilization=ratio(busy_gs),
        gpu_allocation=ratio(alloc_gs),
        queueing_delay=stats.describe(delays),
        jct=stats.describe(jcts),
        jain_index=stats.jain_index(shares_vs_entitlement),
        jain_index_demand=jain_demand,
        stranded_gpus_mean=stranded_gs / horizon if horizon > 0 else None,
        stranded_fraction=ratio(stranded_gs),
        preemptions=sum(o.preemptions for o in outcomes),
        gpu_hours_lost=lost_gs / HOUR,
        gpu_hours_total=total_gs / HOUR,
        gpu_hours_allocated=alloc_gs / HOUR,
        gpu_hours_busy=busy_gs / HOUR,
        gpu_hours_idle_partial=sum(o.gpu_seconds_idle_partial for o in outcomes) / HOUR,
        total_cost=sum(cost_by_queue),
        queues=tuple(per_queue),
        gpu_goodput=ratio(busy_gs - lost_gs - writing_gs),
        gpu_hours_checkpointing=writing_gs / HOUR,
        currency=pricing.currency,
        stopped=sum(1 for o in outcomes if o.stopped),
        fair_share_gap_max=gaps.max,
        fair_share_gap_mean=gaps.mean,
        classes=class_reports(outcomes),
        arrival_start=first,
        arrival_end=last,
        gpu_utilization_arrivals=window_ratio(first),
        gpu_utilization_steady=window_ratio(steady),
        backlog_gpus_mean=(stats.integral_over(times, dt, pending, first, last) / (last - first)
                           if last > first else None),
    )


def share_gaps_of(run: PolicyRun) -> fairness.ShareGaps:
    """The per-window fair-share gaps behind ``fair_share_gap_max`` and ``_mean``, worked out
    again from a run's facts and its report's entitlements (for the plot over time)."""
    ordered = sorted(run.samples, key=lambda s: s.time)
    times = np.array([s.time for s in ordered], dtype=np.float64)
    if times.size == 0:
        return fairness.share_gaps(None, np.zeros((0, 0)), times, times, times, FAIRNESS_WINDOW)
    dt = stats.interval_lengths(times, float(times[0]) + run.report.horizon_seconds)
    total = np.array([s.total_gpus for s in ordered], dtype=np.float64)
    queues = [q.queue for q in run.report.queues]
    ent = {q.queue: q.entitlement for q in run.report.queues if q.entitlement is not None}
    by_queue: dict[str, list[JobOutcome]] = {q: [] for q in queues}
    for outcome in run.outcomes:
        by_queue[outcome.queue].append(outcome)
    owed = fairness.owed_matrix(by_queue, queues, ent, times, total)
    return fairness.share_gaps(owed, _queue_matrix(ordered, queues), times, dt, total,
                               FAIRNESS_WINDOW)


def _delays(outcomes: Sequence[JobOutcome]) -> list[float]:
    return [o.start_time - o.submit_time for o in outcomes if o.start_time is not None]


def _queue_matrix(samples: Sequence[UtilizationSample], queues: list[str]) -> np.ndarray:
    """GPUs allocated per (sample, queue)."""
    column = {q: i for i, q in enumerate(queues)}
    allocated = np.zeros((len(samples), len(queues)))
    for row, sample in enumerate(samples):
        for queue, gpus in sample.allocated_by_queue.items():
            allocated[row, column[queue]] = gpus
    return allocated


def _costs(
    samples: Sequence[UtilizationSample],
    queues: list[str],
    allocated_gs: np.ndarray,
    dt: np.ndarray,
    pricing: Pricing,
) -> list[float]:
    """Cost per queue: per-pool prices for the samples that say which pool, else one price."""
    if not pricing.per_pool:
        return [float(allocated_gs[i]) / HOUR * pricing.per_gpu_hour for i in range(len(queues))]
    column = {q: i for i, q in enumerate(queues)}
    costs = [0.0] * len(queues)
    for sample, length in zip(samples, dt, strict=True):
        hours = float(length) / HOUR
        if sample.allocated_by_queue_pool:
            for queue, pools in sample.allocated_by_queue_pool.items():
                for pool, gpus in pools.items():
                    price = pricing.per_pool.get(pool, pricing.per_gpu_hour)
                    costs[column[queue]] += gpus * hours * price
        else:
            for queue, gpus in sample.allocated_by_queue.items():
                costs[column[queue]] += gpus * hours * pricing.per_gpu_hour
    return costs
