"""What the cluster's GPUs are doing after a cycle, for chargeback and capacity alerts.

Worked out by the loop (only when it exports metrics) from the cycle's snapshot and plan, so
the pure ``decide`` knows nothing of it and the live scheduler and a simulation with metrics
count the same way. Pure: no clock, no I/O.

- ``allocated``: GPUs allocated to running gangs (this plan's binds included, its evictions too: a
  victim keeps its GPUs until its pods are gone) per (queue, namespace, pool), in
  GPU-equivalents (``Demand.milli``): a member holding half a GPU's memory counts 0.5, so a
  share is charged what it holds, not a whole GPU. Summed in exact thousandths, then made
  GPUs. The loop integrates it over time into GPU-seconds and, at the configured price, cost.
- per pool, of the GPUs free on ready, schedulable nodes (``idle``):
  ``stranded``: idle while a gang that could use the pool waits, on nodes where no waiting
  gang could place even one pod (the shape of the free space, a selector or a taint keeps
  that work off them). A gang *could use* a pool when one of its roles may run on a node
  there and its queue's tree has GPU quota there (``open_pools``): free GPUs of a pool
  nobody waits for are just idle, and an alert on them would fire on an idle pool.
  Nodes kept for a gang are reserved, never stranded;
  ``reserved_idle``: on nodes kept for a reserved or nominated gang that has not started.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from policies.queues import QueueSet
from scheduler.decide.plan import CyclePlan
from scheduler.model import Gang
from scheduler.model.demand import MILLI, gpus_of
from scheduler.model.resources import GPU
from scheduler.world.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class PoolGpus:
    pool: str
    total: int  # allocatable GPUs of ready, schedulable nodes
    idle: int  # of those, free
    stranded: int  # free, on nodes no waiting gang could use, while one waits for the pool
    reserved_idle: int  # free, on nodes kept for a gang that has not started


@dataclass(frozen=True, slots=True)
class NodeGpus:
    """One ready, schedulable node's GPUs once the plan is carried out."""

    name: str
    pool: str
    total: int
    free: int
    stranded: bool  # free GPUs no pod of a waiting gang fits, while one waits for its pool
    reserved: bool  # kept for a reserved or nominated gang that has not started
    allocated: tuple[tuple[str, int], ...] = ()  # (queue, GPUs) of running gangs, by queue


@dataclass(frozen=True, slots=True)
class Accounting:
    #: (queue, namespace, pool) -> GPU-equivalents (2.5: two GPUs and half of one)
    allocated: Mapping[tuple[str, str, str], float]
    pools: tuple[PoolGpus, ...]  # sorted by pool
    nodes: tuple[NodeGpus, ...] = ()  # sorted by name


def account(snapshot: Snapshot, plan: CyclePlan, pending: Iterable[Gang],
            queues: QueueSet | None, with_pools: bool = True) -> Accounting:
    """The GPUs of the cluster once *plan* is carried out; *pending* are the cycle's gangs,
    *queues* the queues in force (None: no quota closes a pool to anyone).
    Without *with_pools*, only ``allocated`` (the per-node pass is most of the cost on a big
    cluster, and the loop needs ``allocated`` every cycle but the pool gauges less often)."""
    nodes = snapshot.nodes
    free = {name: snapshot.free(name) for name in snapshot.node_names}
    allocated: dict[tuple[str, str, str], int] = defaultdict(int)  # in thousandths
    on_node: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for rg in snapshot.running.values():
        equivalents = rg.held_milli
        for where, res in rg.charges:
            gpus = gpus_of(res)
            if where in nodes and gpus:
                allocated[(rg.gang.queue, rg.gang.namespace, nodes[where].pool)] += (
                    equivalents.get(where, gpus * MILLI))
                on_node[where][rg.gang.queue] += gpus
    by_id = {g.id: g for g in pending}
    for bind in plan.binds:
        gang = by_id.get(bind.gang_id)
        roles = {r.name: r for r in gang.roles} if gang is not None else {}
        gang_ns = bind.gang_id.split("/", 1)[0]
        for a in bind.placement.assignments:
            role = roles.get(a.role)
            if a.node in free and role is not None:
                free[a.node] = free[a.node] - role.requests * a.count
            demand = role.demand.times(a.count) if role is not None else None
            if a.node in nodes and demand is not None and demand.gpus:
                allocated[(bind.queue, gang_ns, nodes[a.node].pool)] += demand.milli
                on_node[a.node][bind.queue] += demand.gpus
    in_gpus = {key: milli / MILLI for key, milli in sorted(allocated.items())}
    if not with_pools:
        return Accounting(in_gpus, ())
    bound = {b.gang_id for b in plan.binds}
    waiting = [g for g in by_id.values() if g.id not in bound and g.is_complete]
    opened = None if queues is None else open_pools(queues)
    shapes = {(role.requirements, role.requests,
               None if opened is None else opened.get(g.queue, frozenset()))
              for g in waiting for role in g.roles}
    wanted: set[str] = set()  # pools a waiting gang could use
    usable: set[str] = set()  # nodes where a pod of one could start now
    for requirements, request, allowed in shapes:
        eligible = [n for n in snapshot.eligible_nodes(requirements)
                    if allowed is None or nodes[n].pool in allowed]
        wanted.update(nodes[n].pool for n in eligible)
        usable.update(n for n in eligible if request.fits_in(free[n]))
    kept_nodes = {n for r in plan.reservations for n in r.nodes}
    kept_nodes |= {n for nom in plan.nominations for n in nom.nodes}
    states = tuple(NodeGpus(name, node.pool, gpus_of(node.allocatable), max(0, gpus_of(free[name])),
                            node.pool in wanted and name not in usable
                            and name not in kept_nodes and gpus_of(free[name]) > 0,
                            name in kept_nodes,
                            tuple(sorted(on_node.get(name, {}).items())))
                   for name, node in sorted(nodes.items())
                   if node.ready and not node.unschedulable)
    per_pool: dict[str, list[int]] = {}
    for n in states:
        cell = per_pool.setdefault(n.pool, [0, 0, 0, 0])
        cell[0] += n.total
        cell[1] += n.free
        cell[2] += n.free if n.stranded else 0
        cell[3] += n.free if n.reserved else 0
    pools = tuple(PoolGpus(p, *c) for p, c in sorted(per_pool.items()))
    return Accounting(in_gpus, pools, states)


def open_pools(queues: QueueSet) -> dict[str, frozenset[str]]:
    """Per queue, the pools its gangs may take GPUs in: those where its tree (the queue's root
    and everything under it, which lend to each other) has quota, and either some queue of
    the tree has a positive GPU quota or GPUs are not under quota there. A pool named with a
    GPU quota of 0 (deploy/queues' ``default`` in ``h100``) is closed to the tree."""
    covered: dict[tuple[str, str], bool] = {}  # (root, pool) -> GPUs are under quota
    positive: set[tuple[str, str]] = set()  # (root, pool) with a positive GPU quota
    for q in queues:
        root = queues.root_of(q.name)
        for quota in q.quotas:
            key = (root, quota.pool)
            covered[key] = covered.get(key, False) or GPU in quota.covered
            if gpus_of(quota.nominal) > 0:
                positive.add(key)
    by_root: dict[str, set[str]] = {}
    for (root, pool), governed in covered.items():
        if not governed or (root, pool) in positive:
            by_root.setdefault(root, set()).add(pool)
    return {q.name: frozenset(by_root.get(queues.root_of(q.name), ())) for q in queues}
