"""A ``ClusterView`` from the running scheduler's last cycle (for the dashboard and
``/api/v1/state``).

The one module that reads the cycle's structures (``CyclePlan``, ``CycleInput``, queue
reports) for the views: when those change, only this adapter does. Pure: *now*, the pods of a
gang and the recent events are parameters.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from policies.queues import PolicySet
from scheduler import accounting
from scheduler.cache import CycleInput
from scheduler.model.workloads import PodInfo
from scheduler.plan import CyclePlan
from scheduler.queue_report import QueueReport
from scheduler.views.state import (
    ClusterView,
    EventRow,
    GangRow,
    NodeRow,
    QueuePool,
    QueueRow,
    ranks_of,
    tree_order,
    with_lent,
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
                                             f"for {ev.preemptor}: {ev.message}"))
        now_reserved = {r.gang_id for r in plan.reservations}
        for r in plan.reservations:
            if r.gang_id not in self._reserved:
                self._events.appendleft(EventRow(
                    plan.now, "Reserved", r.gang_id,
                    f"{', '.join(r.nodes)} held; estimated start in "
                    f"{max(0.0, r.estimated_start - plan.now):.0f}s"))
        self._reserved = now_reserved

    @property
    def events(self) -> tuple[EventRow, ...]:
        return tuple(self._events)


def build(cycle: Cycle, pods_of: Callable[[str], Sequence[PodInfo]],
          events: Iterable[EventRow] = ()) -> ClusterView:
    return ClusterView(now=cycle.plan.now, source="scheduler", queues=_queues(cycle),
                       pending=_pending(cycle), running=_running(cycle, pods_of),
                       nodes=_nodes(cycle), events=tuple(events))


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
            pools=tuple(QueuePool(p.pool, p.nominal.gpus, p.allocated.gpus, p.borrowed.gpus, 0)
                        for p in r.pools),
            fair_share=r.fair_share, usage_share=r.usage_share, running=r.running,
            pending=r.pending, state=state, why=why))
    return tree_order(with_lent(rows))


def _pending(cycle: Cycle) -> tuple[GangRow, ...]:
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
            gpus=g.min_requests.gpus, pods=g.size, priority=g.priority,
            queue_position=per_queue[g.queue] if ordered else None,
            cluster_position=reason.position if ordered and reason else None,
            reason=str(reason.category) if reason else "Backoff",
            message=reason.message if reason else "waiting out a retry after a failed bind",
            eta_seconds=(max(0.0, reservation.estimated_start - plan.now)
                         if reservation is not None else None)))
    return tuple(rows)


def _running(cycle: Cycle, pods_of: Callable[[str], Sequence[PodInfo]]) -> tuple[GangRow, ...]:
    now = cycle.plan.now
    rows = []
    for rg in sorted(cycle.input.snapshot.running.values(), key=lambda r: r.id):
        g = rg.gang
        pods = pods_of(rg.id)
        rows.append(GangRow(
            id=rg.id, namespace=g.namespace, queue=g.queue, state="Running",
            gpus=rg.usage.gpus, pods=len(pods) or g.size, priority=g.priority,
            age_seconds=max(0.0, now - rg.start_time), nodes=rg.nodes,
            ranks=ranks_of(pods)))
    return tuple(rows)


def _nodes(cycle: Cycle) -> tuple[NodeRow, ...]:
    snapshot, plan = cycle.input.snapshot, cycle.plan
    acc = accounting.account(snapshot, plan, cycle.input.gangs.pending)
    # A queue's GPUs above its quota in a pool, marked on its nodes in name order.
    left = {(r.name, p.pool): p.borrowed.gpus for r in cycle.reports for p in r.pools
            if p.borrowed.gpus > 0 and cycle.policies.queues.is_leaf(r.name)}
    rows = []
    for n in acc.nodes:
        borrowed = 0
        for queue, gpus in n.held:
            take = min(gpus, left.get((queue, n.pool), 0))
            if take:
                left[(queue, n.pool)] -= take
                borrowed += take
        rows.append(NodeRow(
            name=n.name, pool=n.pool, gpus=n.total, used=n.held,
            other=max(0, n.total - n.free - sum(v for _, v in n.held)), free=n.free,
            reserved=n.reserved, stranded=n.stranded, borrowed=borrowed))
    return tuple(sorted(rows, key=lambda r: (r.pool, r.name)))
