"""A plan's ``due``: the earliest time the same input may give another plan.

The live loop runs no cycle until then unless its input changes, so ``due`` must never be
late: table-driven, each instant ``decide`` compares ``now`` with, where the plan changes at
``due`` and not a moment before; and a property over random worlds, settled (their plans
carried out until a cycle changes nothing): at any time before ``due`` the same input gives
the same decisions. (Each rule of ``next_due`` left out fails the property within 3,000
examples; the test runs 300.)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from policies.queues import PolicySet
from scheduler.decide.cycle import decide
from scheduler.decide.due import SLACK_SECONDS
from scheduler.decide.housekeeping import Housekeeping, PartlyBound
from scheduler.decide.plan import NOMINATION_TIMEOUT_SECONDS, CyclePlan, Nomination
from scheduler.model import Gang, PodRef
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running
from tests.unit.test_decide_properties import World, worlds

NOW = 10_000.0
NODES = nodes("a100", 2)
Q = policies(queue("q", quota={"a100": 64}))


def full(priority: int = 9, start: float = 0.0, end: float | None = None) -> Snapshot:
    """Both nodes taken by running gangs of *priority*."""
    return Snapshot(NODES, [running(gang(f"r{i}", "q", priority=priority),
                                    {f"a100-000{i}": 1}, start=start, end=end)
                            for i in range(2)])


def decisions(plan: CyclePlan) -> tuple[object, ...]:
    """What a plan decides, without the fields that merely carry the time (an estimate made
    at ``now``, when a nomination was made)."""
    return (tuple((b.gang_id, b.placement.nodes) for b in plan.binds),
            tuple(e.victim for e in plan.evictions),
            tuple(r.gang_id for r in plan.rollbacks),
            tuple((n.gang_id, n.nodes, n.victims) for n in plan.nominations),
            tuple((r.gang_id, r.nodes) for r in plan.reservations),
            tuple((g, str(r)) for g, r in plan.pending.items()))


@dataclass(frozen=True)
class Case:
    name: str
    snapshot: Snapshot
    gangs: tuple[Gang, ...]
    policies: PolicySet = Q
    house: Housekeeping = field(default_factory=Housekeeping)
    previous: CyclePlan | None = None
    #: Seconds after NOW when the plan changes (None: it never does with time alone).
    due_in: float | None = None


G = gang("g", "q", pool="a100")
BOUND = (PodRef("ns", "half-0", "uid-half-0"),)
CASES = [
    Case("nothing pending", Snapshot(NODES), ()),
    Case("a gang waits for capacity nobody will free", full(), (G,)),
    Case("a backoff after a failed bind ends", Snapshot(NODES), (G,),
         house=Housekeeping(backoff={"ns/g": NOW + 30}), due_in=30),
    Case("a partly bound PodGroup's scheduleTimeoutSeconds runs out", full(),
         (gang("half", "q", pool="a100"),),
         house=Housekeeping(partly_bound={"ns/half": PartlyBound(BOUND, True, NOW - 50,
                                                                 timeout=110)},
                            repair_grace=60), due_in=60),
    Case("a gang has waited long enough for a reservation",
         full(end=NOW + 5_000), (replace(G, creation_time=NOW - 100),),
         policies(queue("q", quota={"a100": 64}), reserve_after_seconds=600), due_in=500),
    Case("a victim's minRuntimeSeconds protection ends",
         full(priority=0, start=NOW - 100), (replace(G, priority=5),),
         policies(queue("q", quota={"a100": 64}, min_runtime=300), reservation=False),
         due_in=200),
    Case("a partly bound gang's repair grace runs out", full(),
         (gang("half", "q", pool="a100"),),
         house=Housekeeping(partly_bound={"ns/half": PartlyBound(BOUND, True, NOW - 50)},
                            repair_grace=60), due_in=10),
    Case("a nomination whose victims do not go times out", full(priority=0), (G,),
         policies(queue("q", quota={"a100": 64}, within="Never"), reservation=False),
         previous=CyclePlan(NOW - 1, nominations=(Nomination(
             "ns/g", ("a100-0000",), ("ns/r0",), NOW - NOMINATION_TIMEOUT_SECONDS + 100),)),
         due_in=100),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_plan_changes_at_its_due_time_and_not_before(case: Case) -> None:
    def at(t: float) -> CyclePlan:
        return decide(case.snapshot, case.gangs, case.policies, t, case.previous,
                      solver=SOLVE, house=case.house)

    plan = at(NOW)
    if case.due_in is None:
        assert plan.due is None
        assert decisions(at(NOW + 1e6)) == decisions(plan)
        return
    due = plan.due
    assert due is not None and due == pytest.approx(NOW + case.due_in + SLACK_SECONDS, abs=1e-6)
    assert decisions(at(NOW + case.due_in - 1)) == decisions(plan)
    assert decisions(at(due)) != decisions(plan)


def test_a_gang_that_would_no_longer_end_before_a_reservation_is_due() -> None:
    # g waits for both nodes, which free at NOW + 400: it is reserved for then; h (runtime
    # 100) could start before the reservation only until NOW + 300. The estimated start
    # itself is not due: it changes no decision (see the property below).
    h = replace(gang("h", "q", pool="a100", created=1), runtime_estimate=100.0)
    plan = decide(full(end=NOW + 400), [replace(G, roles=(replace(G.roles[0], count=2),)), h],
                  Q, NOW, solver=SOLVE)
    assert [r.gang_id for r in plan.reservations] == ["ns/g"]
    assert plan.due == pytest.approx(NOW + 300 + SLACK_SECONDS, abs=1e-6)


def settled(world: World) -> tuple[Snapshot, tuple[Gang, ...], CyclePlan] | None:
    """The world once its plans are carried out at NOW (binds running, victims gone) and the
    plan no longer changes from one cycle to the next (a reservation or nomination carried
    over goes first): the input a live scheduler then keeps while nothing changes. None if
    it does not settle in a few cycles."""
    snapshot, pending, previous = world.snapshot, world.pending, None
    for _ in range(8):
        plan = decide(snapshot, pending, world.policies, NOW, previous, solver=SOLVE)
        quiet = not (plan.binds or plan.evictions or plan.provisions or plan.rollbacks)
        if quiet and previous is not None and decisions(plan) == decisions(previous):
            return snapshot, pending, plan
        by_id = {g.id: g for g in pending}
        for b in plan.binds:
            snapshot = snapshot.with_running(b.placement.as_running(by_id[b.gang_id], NOW))
        snapshot = snapshot.without_gangs(sorted({e.victim for e in plan.evictions}))
        bound = {b.gang_id for b in plan.binds}
        pending = tuple(g for g in pending if g.id not in bound)
        previous = plan
    return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=worlds(), later=st.floats(0.0, 1.0))
def test_before_its_due_time_the_same_input_gives_the_same_decisions(
        world: World, later: float) -> None:
    quiet = settled(world)
    assume(quiet is not None)
    assert quiet is not None
    snapshot, pending, plan = quiet
    horizon = (plan.due - SLACK_SECONDS if plan.due is not None else NOW + 1e6) - NOW
    t = NOW + later * horizon * 0.999
    again = decide(snapshot, pending, world.policies, t, plan, solver=SOLVE)
    assert decisions(again) == decisions(plan)
