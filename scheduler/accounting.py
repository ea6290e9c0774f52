"""What the cluster's GPUs are doing after a cycle, for chargeback and capacity alerts.

Worked out by the loop (only when it exports metrics) from the cycle's snapshot and plan, so
the pure ``decide`` knows nothing of it and the live scheduler and a simulation with metrics
count the same way. Pure: no clock, no I/O.

- ``held``: GPUs held by running gangs (this plan's binds included, its evictions too: a
  victim holds its GPUs until its pods are gone) per (queue, namespace, pool). The loop
  integrates it over time into GPU-seconds and, at the configured price, cost.
- per pool, of the GPUs free on ready, schedulable nodes (``idle``):
  ``stranded``: on nodes where no pending gang could place even one pod (the shape of the
  free space, a selector or a taint keeps all waiting work off them), counted only while
  some gang waits, since free GPUs with nothing waiting are just idle;
  ``reserved_idle``: on nodes held for a reserved or nominated gang that has not started.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduler.model import Gang
from scheduler.plan import CyclePlan
from scheduler.resources import Resources
from scheduler.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class PoolGpus:
    pool: str
    total: int  # allocatable GPUs of ready, schedulable nodes
    idle: int  # of those, free
    stranded: int  # free, on nodes no pending gang could use
    reserved_idle: int  # free, on nodes held for a gang that has not started


@dataclass(frozen=True, slots=True)
class Accounting:
    held: Mapping[tuple[str, str, str], int]  # (queue, namespace, pool) -> GPUs
    pools: tuple[PoolGpus, ...]  # sorted by pool


def account(snapshot: Snapshot, plan: CyclePlan, pending: Iterable[Gang]) -> Accounting:
    """The GPUs of the cluster once *plan* is carried out; *pending* are the cycle's gangs."""
    nodes = snapshot.nodes
    free = {name: snapshot.free(name) for name in snapshot.node_names}
    held: dict[tuple[str, str, str], int] = defaultdict(int)
    for rg in snapshot.running.values():
        for where, res in rg.allocations:
            if where in nodes and res.gpus:
                held[(rg.gang.queue, rg.gang.namespace, nodes[where].pool)] += res.gpus
    by_id = {g.id: g for g in pending}
    for bind in plan.binds:
        gang = by_id.get(bind.gang_id)
        requests = {r.name: r.requests for r in gang.roles} if gang is not None else {}
        gang_ns = bind.gang_id.split("/", 1)[0]
        for a in bind.placement.assignments:
            res = requests.get(a.role, Resources()) * a.count
            if a.node in free:
                free[a.node] = free[a.node] - res
            if a.node in nodes and res.gpus:
                held[(bind.queue, gang_ns, nodes[a.node].pool)] += res.gpus
    bound = {b.gang_id for b in plan.binds}
    waiting = [g for g in by_id.values() if g.id not in bound and g.is_complete]
    shapes = {(role.requirements, role.requests) for g in waiting for role in g.roles}
    usable: set[str] = set()
    for requirements, request in shapes:
        usable.update(n for n in snapshot.eligible_nodes(requirements)
                      if request.fits_in(free[n]))
    held_nodes = {n for r in plan.reservations for n in r.nodes}
    held_nodes |= {n for nom in plan.nominations for n in nom.nodes}
    per_pool: dict[str, list[int]] = {}
    for name, node in sorted(nodes.items()):
        if not node.ready or node.unschedulable:
            continue
        cell = per_pool.setdefault(node.pool, [0, 0, 0, 0])
        spare = max(0, free[name].gpus)
        cell[0] += node.allocatable.gpus
        cell[1] += spare
        if waiting and name not in usable:
            cell[2] += spare
        if name in held_nodes:
            cell[3] += spare
    pools = tuple(PoolGpus(p, *c) for p, c in sorted(per_pool.items()))
    return Accounting(dict(sorted(held.items())), pools)

