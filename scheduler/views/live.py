"""A ``ClusterView`` from the running scheduler's last cycle (for the dashboard and
``/api/v1/state``).

The one module that reads the cycle's structures (``CyclePlan``, ``CycleInput``, queue
reports) for the views: when those change, only this adapter does. Pure: *now*, the pods of a
gang and the recent events are parameters.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from policies.queues import PolicySet
from scheduler.decide.plan import CyclePlan
from scheduler.feed.cache_cycle import CycleInput
from scheduler.model.demand import gpus_of
from scheduler.model.durations import format_duration
from scheduler.model.workloads import PodInfo
from scheduler.report import accounting
from scheduler.report.chargeback import Row as ChargebackRow
from scheduler.report.chargeback import day_of, merged
from scheduler.report.queue_report import QueueReport
from scheduler.views import failures as failure_rows
from scheduler.views import gpu_use, marks
from scheduler.views.failures import FailureSource
from scheduler.views.gpu_use import GpuSamples
from scheduler.views.state import (
    ClusterView,
    EventRow,
    GangRow,
    QueuePool,
    QueueRow,
    ranks_of,
    tree_order,
    with_lent,
    workload_of,
)


@dataclass(frozen=True, slots=True)
class Cycle:
    """What the views need of one cycle."""

    input: CycleInput
    plan: CyclePlan
    policies: PolicySet
    reports: tuple[QueueReport, ...]
    #: Queue name -> why its current spec is refused (``LivePolicies.invalid``).
    invalid: Mapping[str, str] = field(default_factory=dict)


class Recent:
    """The last *limit* preemptions and reservations, newest first (a reservation is recorded
    when it first appears, not on every cycle that keeps it)."""

    def __init__(self, limit: int = 50) -> None:
        self._events: deque[EventRow] = deque(maxlen=limit)
        self._reserved: set[str] = set()

    def observe(self, plan: CyclePlan) -> None:
        for ev in plan.evictions:
            self._events.appendleft(EventRow(plan.now, "Preempted", ev.victim,
                                             f"for {ev.preemptor}: {ev.message}"
                                             if ev.preemptor else ev.message))
        now_reserved = {r.gang_id for r in plan.reservations}
        for r in plan.reservations:
            if r.gang_id not in self._reserved:
                self._events.appendleft(EventRow(
                    plan.now, "Reserved", r.gang_id,
                    f"{', '.join(r.nodes)} kept for it; estimated start in "
                    f"{format_duration(max(0.0, r.estimated_start - plan.now))}"))
        self._reserved = now_reserved

    @property
    def events(self) -> tuple[EventRow, ...]:
        return tuple(self._events)


def build(cycle: Cycle, pods_of: Callable[[str], Sequence[PodInfo]],
          events: Iterable[EventRow] = (),
          failures: FailureSource | None = None,
          charged: Iterable[ChargebackRow] = (),
          gpu: GpuSamples | None = None) -> ClusterView:
    """*failures*: where each gang's last failures are kept (the cache; None: none shown).
    *charged*: the chargeback ledger's day rows of this month so far (none: no GPU-hours).
    *gpu*: the GPU metrics to join running gangs with (None: the feature is off)."""
    queues = _queues(cycle)
    acc = accounting.account(cycle.input.snapshot, cycle.plan, cycle.input.gangs.pending,
                             cycle.policies.queues)
    now = cycle.plan.now
    pending = _with_failures(_pending(cycle, pods_of), failures, now)
    running = _with_failures(_running(cycle, pods_of, gpu), failures, now)
    if gpu is not None:
        idle = gpu_use.idle_by_queue(running)
        queues = tuple(dataclasses.replace(q, idle_gpus=idle.get(q.name, 0)) for q in queues)
    shown = {g.id for g in (*pending, *running)}
    return ClusterView(now=now, source="scheduler", queues=queues, pending=pending,
                       running=running, nodes=marks.node_rows(acc.nodes, queues),
                       events=tuple(events),
                       failed=failure_rows.failed_rows(failures, shown, now),
                       gpu_hours=gpu_hours(charged, now))


def gpu_hours(days: Iterable[ChargebackRow], now: float) -> tuple[ChargebackRow, ...]:
    """Today's and this month's GPU-hours per (queue, namespace), pools summed, from day
    rows (UTC days, as the ledger keeps them)."""
    today = day_of(now).isoformat()
    month = [r for r in days if r.period[:7] == today[:7]]
    return (*merged((r for r in month if r.period == today),
                    lambda r: (r.period, r.queue, r.namespace, "")),
            *merged(month, lambda r: (today[:7], r.queue, r.namespace, "")))


def _with_failures(rows: tuple[GangRow, ...], source: FailureSource | None,
                   now: float) -> tuple[GangRow, ...]:
    if source is None:
        return rows
    return tuple(dataclasses.replace(g, failures=failure_rows.of_gang(source, g.id, now))
                 for g in rows)


def _queues(cycle: Cycle) -> tuple[QueueRow, ...]:
    queues = cycle.policies.queues.queues
    terminating = cycle.policies.queues.terminating
    rows = []
    for r in cycle.reports:
        q = queues.get(r.name)
        state, why = (("Terminating", "being deleted: it admits no new gangs, and is kept "
                       "while gangs it admitted run or queues name it as parent")
                      if r.name in terminating else
                      ("Invalid", f"its current spec is refused; the version in force is "
                       f"shown: {cycle.invalid[r.name]}") if r.name in cycle.invalid
                      else ("", ""))
        rows.append(QueueRow(
            name=r.name, parent=r.parent or "", depth=0, weight=q.weight if q else 1.0,
            namespaces=q.namespaces if q else (),
            pools=tuple(QueuePool(p.pool, gpus_of(p.nominal), gpus_of(p.allocated),
                                  gpus_of(p.borrowed), 0, p.held_milli) for p in r.pools),
            fair_share=r.fair_share, usage_share=r.usage_share, running=r.running,
            pending=r.pending, state=state, why=why,
            remembered_gpu_hours=r.remembered_gpu_hours, budget=r.budget))
    return tree_order(with_lent(rows))


def _pending(cycle: Cycle, pods_of: Callable[[str], Sequence[PodInfo]]) -> tuple[GangRow, ...]:
    plan = cycle.plan
    by_id = {g.id: g for g in cycle.input.gangs.pending}
    order = [gid for gid in plan.order if gid in by_id and plan.bind_of(gid) is None]
    order += sorted(gid for gid in by_id if gid not in set(order)
                    and plan.bind_of(gid) is None)
    per_queue: dict[str, int] = {}
    rows = []
    for gid in order:
        g = by_id[gid]
        reason = plan.pending.get(gid)
        ordered = reason is not None and reason.position > 0
        if ordered:
            per_queue[g.queue] = per_queue.get(g.queue, 0) + 1
        reservation = plan.reservation_of(gid)
        rows.append(GangRow(
            id=gid, namespace=g.namespace, queue=g.queue, state="Pending",
            workload=workload_of(g, pods_of(gid)), gpus=g.demand.gpus, pods=g.size,
            priority=g.priority,
            queue_position=per_queue[g.queue] if ordered else None,
            cluster_position=reason.position if ordered and reason else None,
            tier=str(g.tier),
            reason=str(reason.category) if reason else "Backoff",
            message=reason.message if reason else "waiting out a retry after a failed bind",
            eta_seconds=(max(0.0, reservation.estimated_start - plan.now)
                         if reservation is not None else None)))
    return tuple(rows)


def _running(cycle: Cycle, pods_of: Callable[[str], Sequence[PodInfo]],
             gpu: GpuSamples | None) -> tuple[GangRow, ...]:
    now = cycle.plan.now
    rows = []
    for rg in sorted(cycle.input.snapshot.running.values(), key=lambda r: r.id):
        g = rg.gang
        pods = pods_of(rg.id)
        rows.append(GangRow(
            id=rg.id, namespace=g.namespace, queue=g.queue, state="Running",
            workload=workload_of(g, pods), gpus=gpus_of(rg.usage), pods=len(pods) or g.size,
            priority=g.priority,
            age_seconds=max(0.0, now - rg.start_time), nodes=rg.nodes,
            ranks=ranks_of(pods),
            use=gpu_use.use_of(rg, pods, gpu) if gpu is not None else None,
            tier=str(g.tier)))
    return tuple(rows)

