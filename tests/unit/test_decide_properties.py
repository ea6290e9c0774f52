"""Properties of ``decide`` over random clusters, queues and workloads."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import fit
from policies.admission import charge_all, pool_bounds
from policies.queues import PolicySet, Queue
from policies.quota import QuotaLedger, QuotaTree
from policies.reservation import reserve
from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan
from scheduler.model import Gang, RunningGang
from scheduler.model.demand import gpus_of
from scheduler.model.resources import GPU
from scheduler.placement.types import PlacementParams
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, admit, gang, nodes, policies, queue

NOW = 10_000.0
PARAMS = PlacementParams(use_cpsat=False)


@dataclass(frozen=True)
class World:
    snapshot: Snapshot
    policies: PolicySet
    pending: tuple[Gang, ...]


@st.composite
def worlds(draw: st.DrawFn, pools: tuple[str, ...] = ("a100", "h100"),
           preemption: bool = True, any_pool: bool = False) -> World:
    """*any_pool*: some pending gangs have no pool selector (they may use every pool)."""
    ns = [n for p in pools for n in nodes(p, draw(st.integers(2, 5)))]
    names = ["a", "b", "c"][: draw(st.integers(2, 3))]
    queues: list[Queue] = [queue("p")]
    for name in names:
        quota = {p: draw(st.sampled_from([0, 8, 16, 24, 32])) for p in pools}
        borrow = {p: draw(st.sampled_from([0, 8, 64])) for p in pools} \
            if draw(st.booleans()) else None
        lend = {p: min(quota[p], draw(st.sampled_from([0, 8, 64]))) for p in pools} \
            if draw(st.booleans()) else None
        queues.append(queue(name, "p", weight=draw(st.sampled_from([1.0, 2.0, 3.0])),
                            quota=quota, borrow=borrow, lend=lend,
                            reclaim=draw(st.sampled_from(["Never", "LowerPriority", "Any"])),
                            min_runtime=draw(st.sampled_from([0.0, 5_000.0])),
                            runtime=draw(st.sampled_from([600.0, 3600.0]))))
    # Pending gangs are 9,900 to 10,000 s old: a threshold of 9,950 s lets only some reserve.
    pol = policies(*queues, preemption=preemption,
                   reserve_after_seconds=draw(st.sampled_from([0.0, 0.0, 9_950.0, 1e9])))
    # Running gangs admitted the way the scheduler would: within quota, where they fit.
    snap = Snapshot(ns)
    ledger = QuotaLedger.empty(QuotaTree.build(pol.queues))
    for i in range(draw(st.integers(0, 8))):
        g = gang(f"r{i}", draw(st.sampled_from(names)), gpus=draw(st.sampled_from([4, 8])),
                 pods=draw(st.integers(1, 3)), priority=draw(st.integers(0, 2)),
                 pool=draw(st.sampled_from(pools)))
        admitted = admit(g, snap, ledger, PARAMS)
        if admitted is None:
            continue
        result, ledger = admitted
        start = draw(st.sampled_from([0.0, 8_000.0, 9_900.0]))
        snap = snap.with_running(RunningGang(
            g, result.allocations(g), start_time=start,
            last_checkpoint=draw(st.sampled_from([None, 9_000.0])),
            expected_end=start + draw(st.sampled_from([1_000.0, 5_000.0, 20_000.0]))))
    pending = tuple(
        gang(f"g{i}", draw(st.sampled_from(names)), gpus=draw(st.sampled_from([2, 4, 8])),
             pods=draw(st.integers(1, 4)), priority=draw(st.integers(0, 3)),
             created=float(draw(st.integers(0, 100))),
             pool=draw(st.sampled_from((*pools, None) if any_pool else pools)),
             runtime=draw(st.sampled_from([None, 300.0, 30_000.0])))
        for i in range(draw(st.integers(1, 10))))
    return World(snap, pol, pending)


def run(world: World) -> CyclePlan:
    return decide(world.snapshot, world.pending, world.policies, NOW, solver=SOLVE)


def applied(world: World, plan: CyclePlan) -> Snapshot:
    snap = world.snapshot
    by_id = {g.id: g for g in world.pending}
    for b in plan.binds:
        snap = snap.with_running(b.placement.as_running(by_id[b.gang_id], NOW))
    return snap


def ledger_of(world: World, snap: Snapshot) -> QuotaLedger:
    ledger = QuotaLedger.empty(QuotaTree.build(world.policies.queues))
    for rg in snap.running.values():
        ledger = charge_all(ledger, rg.gang.queue, snap.pool_usage(rg))
    return ledger


PROPERTY = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPERTY
@given(worlds())
def test_no_queue_goes_above_nominal_plus_borrowable(world: World) -> None:
    plan = run(world)
    ledger = ledger_of(world, applied(world, plan))
    tree = ledger.tree
    for q in world.policies.queues:
        for pool in tree.pools_of(q.name):
            assert all(v >= 0 for v in ledger.available(q.name, pool).values()), (q.name, pool)
            quota = q.quota(pool)
            limit = quota.borrowing_limit.limit(GPU) if quota else None
            if limit is not None:
                assert ledger.usage(q.name, pool)[GPU] <= tree.subtree_quota[(q.name, pool)][GPU] \
                    + limit


@PROPERTY
@given(worlds())
def test_victims_are_whole_running_gangs_and_the_preemptor_is_proven(world: World) -> None:
    plan = run(world)
    bound = {b.gang_id for b in plan.binds}
    by_id = {g.id: g for g in world.pending}
    for nom in plan.nominations:
        evicted = sorted(e.victim for e in plan.evictions if e.preemptor == nom.gang_id)
        assert evicted == sorted(nom.victims)
        assert all(v in world.snapshot.running for v in nom.victims)
        assert nom.gang_id not in bound
        # The proof: the nominated placement fits once the whole victims are gone.
        freed = world.snapshot.without_gangs(nom.victims)
        assert nom.placement is not None
        for node, res in nom.placement.allocations(by_id[nom.gang_id]):
            assert res.fits_in(freed.free(node))
    for e in plan.evictions:
        assert e.victim not in bound


@PROPERTY
@given(st.one_of(worlds(pools=("a100",), preemption=False),
                 worlds(preemption=False, any_pool=True)))
def test_backfill_never_delays_a_reservation(world: World) -> None:
    plan = run(world)
    pools = [p for r in plan.reservations for p in r.pools]
    assert len(pools) == len(set(pools)), plan.reservations  # one reservation per pool
    after = applied(world, plan)
    threshold = world.policies.scheduler.reserve_after_seconds
    for res in plan.reservations:
        g = next(x for x in world.pending if x.id == res.gang_id)
        assert NOW - g.creation_time >= threshold  # only a starving gang reserves
        # The reserved gang's start, recomputed with every gang bound this cycle running.
        applicant = fit.Applicant(g, world.policies.queues.queues[g.queue], pool_bounds(g, after))
        again = reserve(applicant, fit.World(after, ledger_of(world, after), PARAMS, SOLVE),
                        world.policies.queues, NOW)
        assert again is not None
        assert again.estimated_start <= res.estimated_start


@PROPERTY
@given(worlds())
def test_same_input_same_plan(world: World) -> None:
    first = run(world)
    shuffled = replace(world, pending=tuple(reversed(world.pending)))
    assert run(shuffled) == first
    assert run(world) == first


def test_pool_bounds_charge_every_pool_a_role_may_use() -> None:
    g = gang("x", gpus=4, pods=2)
    snap = Snapshot(nodes("a100", 1) + nodes("h100", 1))
    assert {p: gpus_of(r) for p, r in pool_bounds(g, snap).items()} == {"a100": 8, "h100": 8}
