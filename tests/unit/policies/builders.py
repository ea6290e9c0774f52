"""Builders for policy and cycle tests: nodes, queues, pending and running gangs.

``tiny_solve`` is a deterministic first-fit placement used where a test wants to pin the
solver's behaviour; the cycle tests otherwise run the real ``scheduler.placement.solve``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from policies.admission import charge_all, placement_charges
from policies.queues import (
    Limits,
    PolicySet,
    PoolQuota,
    PreemptionPolicy,
    Queue,
    QueueingPolicy,
    QueueingStrategy,
    QueueSet,
    ReclaimPolicy,
    SchedulerPolicy,
    WithinQueuePreemption,
)
from policies.quota import QuotaLedger
from scheduler import placement
from scheduler.model import (
    Gang,
    Node,
    PodRef,
    PodRequirements,
    Role,
    RunningGang,
    TopologyConstraint,
    TopologyMode,
)
from scheduler.model.demand import gpus_of
from scheduler.model.native import NativeGroupInfo
from scheduler.model.release import Release
from scheduler.model.resources import GPU, Resources
from scheduler.placement.types import (
    Assignment,
    Placement,
    PlacementParams,
    PlacementResult,
    Unplaceable,
    UnplaceableReason,
)
from scheduler.world.snapshot import Snapshot

RACK = "topology.gangscheduler.io/rack"
BLOCK = "topology.gangscheduler.io/block"
POOL = "gangscheduler.io/pool"


def nodes(pool: str, count: int, gpus: int = 8, per_rack: int = 2) -> list[Node]:
    return [Node.build(f"{pool}-{i:04d}",
                       Resources({GPU: gpus, "cpu": 64_000, "memory": 512 << 30, "pods": 110}),
                       {POOL: pool, BLOCK: f"{pool}-b0", RACK: f"{pool}-r{i // per_rack}"})
            for i in range(count)]


def queue(name: str, parent: str | None = None, weight: float = 1.0,
          quota: Mapping[str, int] | None = None, *, borrow: Mapping[str, int] | None = None,
          lend: Mapping[str, int] | None = None, within: str = "LowerPriority",
          reclaim: str = "Any", min_runtime: float = 0.0, strategy: str = "BestEffort",
          backfill: bool = True, runtime: float | None = None,
          namespaces: Sequence[str] = ("*",)) -> Queue:
    """A queue with GPU quota per pool (``quota={"a100": 16}``)."""
    quotas = tuple(
        PoolQuota(pool, Resources({GPU: gpus}), frozenset({GPU}),
                  Limits.of({GPU: borrow[pool]} if borrow and pool in borrow else {}),
                  Limits.of({GPU: lend[pool]} if lend and pool in lend else {}))
        for pool, gpus in sorted((quota or {}).items()))
    return Queue(name, parent, weight, tuple(namespaces), quotas,
                 PreemptionPolicy(WithinQueuePreemption(within), ReclaimPolicy(reclaim),
                                  min_runtime),
                 QueueingPolicy(QueueingStrategy(strategy), backfill, runtime))


def policies(*queues: Queue, preset: str = "gang-scheduler", **overrides: Any) -> PolicySet:
    sp = replace(SchedulerPolicy.preset(preset), **overrides)
    sp = replace(sp, placement=replace(sp.placement, use_cpsat=False))
    return PolicySet(QueueSet.of(queues), sp)


def gang(name: str, queue: str = "q", *, gpus: int = 8, pods: int = 1, priority: int = 0,
         created: float = 0.0, runtime: float | None = None, pool: str | None = None,
         rack: bool = False, namespace: str = "ns", present: int | None = None,
         with_pods: bool = False) -> Gang:
    """*pods* identical pods of *gpus* GPUs each."""
    selector = {POOL: pool} if pool else {}
    req = PodRequirements(Resources({GPU: gpus, "cpu": 1000}), selector)
    refs = tuple(PodRef(namespace, f"{name}-{i}", f"uid-{name}-{i}") for i in range(pods)) \
        if with_pods else ()
    return Gang(id=f"{namespace}/{name}", uid=f"uid-{name}", namespace=namespace, name=name,
                queue=queue, roles=(Role("worker", pods, req, pods=refs),), priority=priority,
                creation_time=created, runtime_estimate=runtime,
                topology=TopologyConstraint(RACK, TopologyMode.REQUIRED) if rack else None,
                present_members=present)


def running(g: Gang, placement: Mapping[str, int], *, start: float = 0.0,
            end: float | None = None, checkpoint: float | None = None) -> RunningGang:
    """*g* running with ``{node: pods}``."""
    role = g.roles[0]
    allocs = tuple((n, role.requests * count) for n, count in sorted(placement.items()))
    return RunningGang(g, allocs, start_time=start, last_checkpoint=checkpoint, expected_end=end)


def admit(g: Gang, snapshot: Snapshot, ledger: QuotaLedger,
          params: PlacementParams) -> tuple[Placement, QuotaLedger] | None:
    """Place *g* the way the scheduler would, within its queue's quota: the placement and the
    ledger with it charged, or None where it does not fit or quota refuses it."""
    result = SOLVE(g, snapshot, params)
    if not isinstance(result, Placement):
        return None
    charges = placement_charges(g, result, snapshot)
    if any(ledger.shortfall(g.queue, p, r) for p, r in charges.items()):
        return None
    return result, charge_all(ledger, g.queue, charges)


def _tiny_solve(gang: Gang, snapshot: Snapshot, params: PlacementParams) -> PlacementResult:
    """First-fit by node name; under a required topology, the first domain that fits."""
    usable = {}
    for role in gang.roles:
        names = [n for n in snapshot.eligible_nodes(role.requirements)
                 if n not in params.excluded_nodes
                 and (params.allowed_nodes is None or n in params.allowed_nodes)]
        if not names:
            return Unplaceable(gang.id, UnplaceableReason.NO_ELIGIBLE_NODES, "no eligible nodes")
        usable[role.name] = names
    domains: list[set[str] | None] = [None]
    if gang.topology is not None and gang.topology.mode is TopologyMode.REQUIRED:
        level = gang.topology.level
        names = sorted({snapshot.nodes[n].labels.get(level, n) for ns in usable.values()
                        for n in ns})
        domains = [{n for n in snapshot.node_names
                    if snapshot.nodes[n].labels.get(level, n) == d} for d in names]
    for domain in domains:
        free = dict(snapshot.free_by_node)
        out: list[Assignment] = []
        ok = True
        for role in gang.roles:
            need = role.required
            for n in usable[role.name]:
                if need == 0:
                    break
                if domain is not None and n not in domain:
                    continue
                k = min(need, role.requests.copies_in(free[n]))
                if k > 0:
                    free[n] = free[n] - role.requests * k
                    out.append(Assignment(role.name, n, k))
                    need -= k
            ok = ok and need == 0
        if ok:
            return Placement(gang.id, tuple(sorted(out, key=lambda a: (a.role, a.node))))
    total_alloc = sum(gpus_of(snapshot.nodes[n].allocatable) for ns in usable.values() for n in ns)
    if total_alloc < gang.gpus:
        return Unplaceable(gang.id, UnplaceableReason.NEVER_FITS, "too big for the cluster")
    reason = UnplaceableReason.TOPOLOGY if domains != [None] else \
        UnplaceableReason.INSUFFICIENT_CAPACITY
    return Unplaceable(gang.id, reason, f"needs {gang.gpus} GPUs; not enough free")


#: The solver the cycle tests run.
SOLVE = placement.solve
tiny_solve = _tiny_solve


def victim(gang_id: str, pods: tuple[PodRef, ...], queue: str = "team", *,
           native: NativeGroupInfo | None = None, group_uid: str | None = None) -> Release:
    """The whole-gang release of a running gang *gang_id* of these bound *pods* (what an
    ``Eviction`` names), nothing else about it known."""
    namespace, name = gang_id.split("/", 1)
    req = PodRequirements(Resources({GPU: 1}))
    g = Gang(id=gang_id, uid=f"uid-{name}", namespace=namespace, name=name, queue=queue,
             roles=(Role("worker", len(pods), req, pods=pods),), native=native)
    return Release.whole(RunningGang(g, (), start_time=0.0, group_uid=group_uid))
