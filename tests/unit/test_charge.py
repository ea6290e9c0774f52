"""Quota charges a member's demand (``scheduler.model.demand.charge_of``), not its request
vector: a GPU a role's demand carries beyond its ``nvidia.com/gpu`` request (one a device claim
will bring) is charged by the quota bounds, the exact check, the running gangs' usage, and
counted by accounting, victim gain and the views. With today's inputs the charge is the very
request object, so nothing changes.

No input gives a role such a GPU yet, so ``ClaimedRole`` (a test-only ``Role`` whose demand
adds ``claimed`` GPUs) stands in for one; nothing here is a product feature.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from policies.admission import check_charges, placement_charges, pool_bounds
from policies.fit import Applicant, Misfit, World, fit
from policies.victims import Room
from scheduler.decide.cycle import decide
from scheduler.decide.plan import ReasonCategory
from scheduler.decide.recall import Recall
from scheduler.model import Gang, PodRequirements, Resources, Role, RunningGang
from scheduler.model.demand import Demand, charge_of, gpus_of, node_charges, role_demand
from scheduler.model.release import Release
from scheduler.model.resources import GPU
from scheduler.placement.types import Assignment, Placement, PlacementParams
from scheduler.report.accounting import account
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, nodes, policies, queue

A100 = nodes("a100", 2)  # two nodes of 8 GPUs


@dataclass(frozen=True, slots=True)
class ClaimedRole(Role):
    """A role whose members are also given ``claimed`` GPUs by a device claim (test only)."""

    claimed: int = 0

    @property
    def demand(self) -> Demand:
        return role_demand(self) + Demand(self.claimed, ("ns/gpu-claim",))


def _gang(name: str, requested: int, claimed: int = 0, pods: int = 1, q: str = "a") -> Gang:
    req = PodRequirements(Resources({GPU: requested, "cpu": 1000}))
    role = ClaimedRole("worker", pods, req, claimed=claimed) if claimed else Role(
        "worker", pods, req)
    return Gang(id=f"ns/{name}", uid=f"uid-{name}", namespace="ns", name=name, queue=q,
                roles=(role,))


def _plan_reason(pending: Gang, quota: int, running: tuple[RunningGang, ...] = ()) -> str | None:
    """Decide on the two nodes with queue ``a`` given *quota* GPUs: None if *pending* binds,
    else its pending reason's category."""
    pol = policies(queue("a", quota={"a100": quota}))
    plan = decide(Snapshot(A100, running), [pending], pol, 0.0, solver=SOLVE)
    if plan.bind_of(pending.id) is not None:
        return None
    return plan.pending[pending.id].category


def test_a_claimed_gpu_is_charged() -> None:
    role = _gang("g", 4, claimed=4).roles[0]
    assert role.demand.gpus == 8 and gpus_of(role.requests) == 4
    assert charge_of(role) == role.requests + {GPU: 4}
    assert gpus_of(charge_of(role)) == 8
    assert role.charge == charge_of(role) and role.charge is role.charge  # kept once worked out


def test_quota_refuses_a_gang_over_quota_by_its_claimed_gpus() -> None:
    # 4 GPUs requested fit a quota of 4; with 4 more claimed the gang is charged 8.
    assert _plan_reason(_gang("plain", 4), quota=4) is None
    assert _plan_reason(_gang("claimed", 4, claimed=4), quota=4) == ReasonCategory.QUOTA
    assert _plan_reason(_gang("claimed", 4, claimed=4), quota=8) is None


def test_the_bound_and_the_exact_check_agree() -> None:
    gang = _gang("g", 4, claimed=4, pods=2)
    snapshot = Snapshot(A100, ())
    bounds = pool_bounds(gang, snapshot)
    assert {p: gpus_of(r) for p, r in bounds.items()} == {"a100": 16}
    placement = Placement(gang.id, (Assignment("worker", "a100-0000", 1),
                                    Assignment("worker", "a100-0001", 1)))
    charges = placement_charges(gang, placement, snapshot)
    assert charges == bounds
    assert [gpus_of(r) for _, r in placement.charges(gang)] == [8, 8]
    assert [gpus_of(r) for _, r in placement.allocations(gang)] == [4, 4]  # the nodes': requests
    q = queue("a", quota={"a100": 12})
    recall = Recall(snapshot.index)
    ledger = recall.ledger(recall.tree(policies(q).queues), snapshot)
    assert check_charges(q, ledger, charges) is not None
    world = World(snapshot, ledger, PlacementParams(), SOLVE)
    out = fit(Applicant(gang, q, bounds), world)
    assert isinstance(out, Misfit) and out.quota and "needs 16 nvidia.com/gpu" in out.message


def test_a_running_gang_is_charged_its_claimed_gpus() -> None:
    gang = _gang("r", 4, claimed=4)
    placement = Placement(gang.id, (Assignment("worker", "a100-0000", 1),))
    rg = placement.as_running(gang, 0.0)
    assert [gpus_of(r) for _, r in rg.charges] == [8]
    assert gpus_of(rg.usage) == 8
    snapshot = Snapshot(A100, (rg,))
    assert gpus_of(snapshot.queue_usage[("a", "a100")]) == 8
    assert gpus_of(snapshot.free("a100-0000")) == 4  # the node: what its pods request
    # Another 4 GPUs fit a quota of 10 beside 4 requested, not beside 8 charged.
    assert _plan_reason(_gang("next", 4), quota=10, running=(rg,)) == ReasonCategory.QUOTA
    assert _plan_reason(_gang("next", 4), quota=12, running=(rg,)) is None
    # What its release gives back, the GPUs accounting allocates to it, a victim's gain.
    release = Release.whole(rg)
    assert gpus_of(snapshot.pool_release(release)["a100"]) == 8 and release.gpus == 8
    assert Room(frozenset({"a100-0000"}), 0).gain(release) == 8
    pol = policies(queue("a", quota={"a100": 16}))
    plan = decide(snapshot, [], pol, 0.0, solver=SOLVE)
    assert account(snapshot, plan, [], pol.queues).allocated[("a", "ns", "a100")] == 8


# Today's inputs: any requests, any roles. -------------------------------------------------

_REQUESTS = st.builds(lambda gpus, cpu, mem: Resources({GPU: gpus, "cpu": cpu, "memory": mem}),
                      st.integers(0, 16), st.integers(0, 64_000), st.integers(0, 1 << 40))
_ROLE = st.tuples(_REQUESTS, st.integers(1, 8), st.none() | st.integers(0, 8))


@given(st.lists(_ROLE, min_size=1, max_size=4), st.data())
def test_today_the_charge_is_the_request_vector_itself(
        roles: list[tuple[Resources, int, int | None]], data: st.DataObject) -> None:
    gang = Gang(id="ns/g", uid="u", namespace="ns", name="g", queue="a", roles=tuple(
        Role(f"r{i}", count, PodRequirements(req), None if m is None else min(m, count))
        for i, (req, count, m) in enumerate(roles)))
    for role in gang.roles:
        assert charge_of(role) is role.requests
        assert role.charge is role.requests
    node_names = [n.name for n in A100]
    assignments = tuple(sorted(
        (Assignment(r.name, n, data.draw(st.integers(1, 3), label=f"{r.name}@{n}"))
         for r in gang.roles
         for n in data.draw(st.sets(st.sampled_from(node_names), min_size=1), label=r.name)),
        key=lambda a: (a.role, a.node)))
    placement = Placement(gang.id, assignments)
    allocations = placement.allocations(gang)
    assert placement.charges(gang, allocations) is allocations
    assert placement.charges(gang) == allocations
    assert node_charges(allocations, gang.roles, placement.members) is allocations
    rg = placement.as_running(gang, 0.0)
    assert rg.charges is rg.allocations
    snapshot = Snapshot(A100, ())
    before: dict[str, Resources] = {}  # pool_bounds as it was: requests times required
    for r in gang.roles:
        for pool in snapshot.eligible_pools(r.requirements) if r.required > 0 else ():
            before[pool] = before.get(pool, Resources()) + r.requests * r.required
    assert pool_bounds(gang, snapshot) == before
