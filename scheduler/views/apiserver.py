"""A ``ClusterView`` from what the caller may read through the apiserver.

Nothing is decided here: the running scheduler already wrote what it knows where Kubernetes
keeps it (Queue status: usage, quota, shares, gang counts; each pending pod's
``PodScheduled=False`` message: reason category, position in the cycle's order; each
PodGroup's ``status.estimatedStart``). So a tenant whose RBAC covers a few namespaces (and, through
the view ClusterRole, Queues) sees exactly their gangs and the queues that admit them. Gangs
are formed by the scheduler's own grouping (``ClusterCache``) from the pods read; nodes, for a
caller who may read them, are accounted and marked as the scheduler's own view does it
(``scheduler.report.accounting``, ``marks``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from policies.guards import BudgetUse, Period
from policies.validation import parse_documents
from scheduler.decide.plan import CyclePlan
from scheduler.feed.grouping import GangSet
from scheduler.model.demand import gpus_of, quantity_gpus
from scheduler.model.durations import parse_time
from scheduler.model.workloads import PodInfo
from scheduler.report import accounting
from scheduler.views import failures as failure_rows
from scheduler.views import marks
from scheduler.views.failures import FailureSource
from scheduler.views.state import (
    ClusterView,
    GangRow,
    QueuePool,
    QueueRow,
    ranks_of,
    tree_order,
    with_lent,
    workload_of,
)
from scheduler.world.snapshot import Snapshot

#: str(PendingReason): "Quota: team-a needs ..." (before issue 16: "Quota (#3 in queue
#: order): ...", still read, from a scheduler not yet upgraded).
_REASON = re.compile(r"^(?P<category>[A-Za-z]+)(?: \(#(?P<position>\d+) in queue order\))?: "
                     r"(?P<message>.*)$", re.S)


def parse_reason(text: str) -> tuple[str, int | None, str]:
    """(category, position or None, message) of a ``PodScheduled=False`` message."""
    m = _REASON.match(text or "")
    if m is None:
        return "", None, text or ""
    position = m.group("position")
    return m.group("category"), int(position) if position else None, m.group("message")


def _gpus(quantities: Any) -> int:
    if not isinstance(quantities, Mapping):
        return 0
    try:
        return quantity_gpus(quantities)
    except ValueError:  # a refused spec may say anything: shown as none
        return 0


def queue_rows(items: Iterable[Mapping[str, Any]]) -> tuple[QueueRow, ...]:
    """One row per Queue object. A Queue whose current spec the scheduler refused is shown
    as it works, from the spec in force (``status.inForce``), marked invalid; one being
    deleted is marked terminating (its figures still count: it is kept while in use)."""
    rows = []
    for q in items:
        spec, status = q.get("spec") or {}, q.get("status") or {}
        state, why = _state(q.get("metadata") or {}, status)
        if state == "Invalid" and isinstance(status.get("inForce"), Mapping):
            spec = status["inForce"]
        own = {str(p.get("pool", "")): _gpus(p.get("nominal"))
               for p in _list(spec, "quotas", Mapping)}
        reported = {str(p.get("pool", "")): p for p in _list(status, "pools", Mapping)}
        pools = []
        for pool in sorted(set(own) | set(reported)):
            p = reported.get(pool, {})
            nominal = _gpus(p.get("nominal")) if "nominal" in p else own.get(pool, 0)
            pools.append(QueuePool(pool, nominal, _gpus(p.get("allocated")),
                                   _gpus(p.get("borrowed")), 0))
        rows.append(QueueRow(
            name=str(q["metadata"]["name"]), parent=str(spec.get("parent") or ""), depth=0,
            weight=_number(spec.get("weight"), 1.0),
            namespaces=tuple(_list(spec, "namespaces", str)),
            pools=tuple(pools), fair_share=_number(status.get("fairShare"), 0.0),
            usage_share=_number(status.get("usageShare"), 0.0),
            running=int(_number(status.get("admittedGangs"), 0)),
            pending=int(_number(status.get("pendingGangs"), 0)), state=state, why=why,
            remembered_gpu_hours=(_number(status["rememberedGPUHours"], 0.0)
                                  if "rememberedGPUHours" in status else None),
            budget=_budget(status.get("budget"))))
    return tree_order(with_lent(rows))


def _budget(found: Any) -> BudgetUse | None:
    """``status.budget`` as the scheduler wrote it (None: absent, or not what it writes: a
    status is the scheduler's, but a view must not fail on one it cannot read)."""
    if not isinstance(found, Mapping):
        return None
    try:
        return BudgetUse(_number(found.get("usedGPUHours"), 0.0),
                         _number(found.get("gpuHours"), 0.0), Period(str(found.get("period"))),
                         parse_time(str(found.get("resetsAt"))))
    except ValueError:
        return None


def _state(meta: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[str, str]:
    """A Queue's ``QueueRow.state`` and why, from its deletion mark and Valid condition."""
    if meta.get("deletionTimestamp"):
        return "Terminating", ("being deleted: it admits no new gangs, and is kept while "
                               "gangs it admitted run or queues name it as parent")
    for c in _list(status, "conditions", Mapping):
        if c.get("type") == "Valid" and c.get("status") == "False":
            return "Invalid", str(c.get("message") or "refused by the scheduler")
    return "", ""


def _list(obj: Mapping[str, Any], key: str, kind: type) -> list[Any]:
    """The items of list *obj[key]* that are of *kind* (a spec the scheduler refused may
    contain anything)."""
    value = obj.get(key)
    return [v for v in value if isinstance(v, kind)] if isinstance(value, list) else []


def _number(value: Any, default: float) -> float:
    try:
        return float(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def build(gangs: GangSet, pods_of: Callable[[str], Sequence[PodInfo]],
          conditions: Mapping[str, str], queues: Sequence[Mapping[str, Any]],
          snapshot: Snapshot | None, now: float,
          estimates: Mapping[str, float] | None = None,
          pod_estimates: Mapping[str, float] | None = None,
          positions: Mapping[str, int] | None = None,
          failures: FailureSource | None = None) -> ClusterView:
    """*snapshot*: the nodes and what runs on them as read (None: the caller may not read
    nodes); *conditions*: pod uid -> its ``PodScheduled=False`` message (pending pods only);
    *estimates*: gang id -> its PodGroup's ``status.estimatedStart`` (epoch seconds), else
    *pod_estimates*: pod uid -> its ``gangscheduler.io/estimated-start``; *positions*: gang
    id -> its PodGroup's ``status.queuePosition`` (a message of an older scheduler may
    still carry the position); *failures*: where the failed pods read were recorded, each as
    its gang's failure (the cache they were read into; None: no failures shown)."""
    estimates, pod_estimates, positions = estimates or {}, pod_estimates or {}, positions or {}
    pending = []
    for g in gangs.pending:
        pods = pods_of(g.id)
        message = next((conditions[p.uid] for p in pods if p.uid in conditions), "")
        category, position, text = parse_reason(message)
        position = positions.get(g.id, position)
        estimate = estimates.get(g.id, next((pod_estimates[p.uid] for p in pods
                                             if p.uid in pod_estimates), None))
        pending.append(GangRow(
            id=g.id, namespace=g.namespace, queue=g.queue, state="Pending",
            workload=workload_of(g, pods), gpus=g.demand.gpus, pods=g.size,
            priority=g.priority, cluster_position=position, reason=category or "Unknown",
            message=text or "not considered by the scheduler yet",
            eta_seconds=None if estimate is None else max(0.0, estimate - now),
            failures=failure_rows.of_gang(failures, g.id, now), tier=str(g.tier)))
    pending.sort(key=lambda r: (r.cluster_position is None, r.cluster_position or 0, r.id))
    counted: dict[str, int] = {}
    ranked = []
    for r in pending:  # position among the gangs of its queue that the caller can see
        if r.cluster_position is not None:
            counted[r.queue] = counted.get(r.queue, 0) + 1
        ranked.append(dataclasses.replace(r, queue_position=counted.get(r.queue)
                                          if r.cluster_position is not None else None))
    running = []
    for gid, rg in sorted(gangs.running_by_id.items()):
        pods = pods_of(gid)
        running.append(GangRow(
            id=gid, namespace=rg.gang.namespace, queue=rg.gang.queue, state="Running",
            workload=workload_of(rg.gang, pods), gpus=gpus_of(rg.usage), pods=len(pods),
            priority=rg.gang.priority, age_seconds=max(0.0, now - rg.start_time),
            nodes=rg.nodes, ranks=ranks_of(pods),
            failures=failure_rows.of_gang(failures, gid, now), tier=str(rg.gang.tier)))
    rows = queue_rows(queues)
    nodes = None
    if snapshot is not None:
        # Queues as the scheduler reads them (an invalid one is left out here, as there).
        valid = parse_documents(("apiserver", q) for q in queues).policies.queues
        nodes = marks.node_rows(accounting.account(snapshot, CyclePlan(now), gangs.pending,
                                                   valid).nodes, rows)
    shown = {g.id for g in (*ranked, *running)}
    return ClusterView(now=now, source="apiserver", queues=rows, pending=tuple(ranked),
                       running=tuple(running), nodes=nodes,
                       failed=failure_rows.failed_rows(failures, shown, now))

