"""Reservations per pool without their side effects: a hold is not borrowing (no reclaim
storm against the reserved gang's queue), a previously reserved gang keeps its pool while gangs
ahead of it in the cycle are considered, a gang that may use several pools reserves in one
with no reservation yet, and a gang kept off reserved nodes that are all it may use says it
waits for them.
"""

from __future__ import annotations

from policies.fit import Applicant
from policies.preemption import candidates
from policies.quota import QuotaLedger, QuotaTree
from policies.reservation import Reservation
from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan, ReasonCategory
from scheduler.model.resources import GPU, Resources
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

R = ReasonCategory
NOW = 10_000.0
A_END, H_END = NOW + 1000.0, NOW + 2000.0


def test_a_hold_alone_does_not_make_a_queue_borrow() -> None:
    pol = policies(queue("p"), queue("r", "p", quota={"a100": 16}),
                   queue("o", "p", quota={"a100": 16}))
    led = QuotaLedger.empty(QuotaTree.build(pol.queues)).charge("r", "a100", {GPU: 8})
    held = led.hold("r", "a100", {GPU: 16}, "ns/big")
    assert held.available("o", "a100")[GPU] == 8  # the hold still limits everyone...
    assert not held.borrowing("r", "a100")  # ...but r's running gangs borrow nothing
    assert held.charge("r", "a100", {GPU: 9}).borrowing("r", "a100")


def test_the_reserved_gangs_queue_is_not_reclaimed_from_for_its_hold() -> None:
    """The reclaim storm: with r's quota held for its reserved gang, o (within its quota)
    found r 'borrowing' and evicted r's gangs, which were within r's quota."""
    pol = policies(queue("p"), queue("r", "p", quota={"a100": 16}),
                   queue("o", "p", quota={"a100": 16}))
    snap = Snapshot(nodes("a100", 4), [running(gang("rr", "r", pool="a100"), {"a100-0000": 1})])
    led = QuotaLedger.empty(QuotaTree.build(pol.queues)).charge("r", "a100", {GPU: 8})
    held = led.hold("r", "a100", {GPU: 16}, "ns/big")
    preemptor = gang("x", "o", pool="a100")
    applicant = Applicant(preemptor, pol.queues.queues["o"], {"a100": Resources({GPU: 8})})
    found = candidates(applicant, snap, held, pol.queues, NOW, frozenset())
    assert [c.id for c in found] == []


# Two pools of three 8-GPU nodes: the first node of each runs a gang until a known time,
# the last one a gang with no known end.
NODES = nodes("a100", 3) + nodes("h100", 3)
BUSY = (running(gang("ra", "q", pool="a100"), {"a100-0000": 1}, end=A_END),
        running(gang("rh", "q", pool="h100"), {"h100-0000": 1}, end=H_END),
        running(gang("la", "q", pool="a100"), {"a100-0002": 1}),
        running(gang("lh", "q", pool="h100"), {"h100-0002": 1}))
QUEUES = (queue("q", quota={"a100": 64, "h100": 64}),)
BIG_A = gang("big-a", "q", pods=2, pool="a100", created=2.0)
BIG_ANY = gang("big-any", "q", pods=2, created=1.0)


def run(pending: list, previous: CyclePlan | None = None, now: float = NOW,
        snapshot: Snapshot | None = None) -> CyclePlan:
    return decide(snapshot or Snapshot(NODES, BUSY), pending,
                  policies(*QUEUES, preemption=False, max_reservations=2), now, previous,
                  solver=SOLVE)


def pools(plan: CyclePlan) -> dict[str, tuple[str, ...]]:
    return {r.gang_id: r.pools for r in plan.reservations}


def test_a_previously_reserved_gang_keeps_its_pool() -> None:
    """Reconsidered first, a gang that may use both pools re-reserved where nodes free up
    soonest (a100), taking the a100 gang's reservation away for a cycle, in which long gangs
    could start on a100 and push the a100 gang's start out."""
    previous = CyclePlan(now=NOW - 10, reservations=(
        Reservation(BIG_ANY.id, ("h100-0000", "h100-0001"), H_END, "q", (), ("h100",)),
        Reservation(BIG_A.id, ("a100-0000", "a100-0001"), A_END, "q", (), ("a100",))))
    both_busy = Snapshot(NODES, (*BUSY, running(gang("rh2", "q", pool="h100"),
                                                 {"h100-0001": 1}, end=H_END)))
    plan = run([BIG_ANY, BIG_A], previous=previous, snapshot=both_busy)
    assert pools(plan) == {BIG_ANY.id: ("h100",), BIG_A.id: ("a100",)}
    assert plan.pending[BIG_A.id].category is R.RESERVED


def test_a_gang_that_may_use_both_pools_reserves_in_the_one_without_a_reservation() -> None:
    """It was never allowed to reserve while either pool held a reservation, so with a
    backlog of single-pool gangs reserving in turn it starved."""
    previous = run([BIG_A])
    assert pools(previous) == {BIG_A.id: ("a100",)}
    plan = run([BIG_A, BIG_ANY], previous=previous)
    assert pools(plan) == {BIG_A.id: ("a100",), BIG_ANY.id: ("h100",)}
    assert plan.pending[BIG_ANY.id].category is R.RESERVED


def test_kept_off_reserved_nodes_that_are_all_it_may_use_it_waits_for_them() -> None:
    snap = Snapshot(nodes("a100", 2), [
        running(gang("ra", "q", pool="a100"), {"a100-0000": 1}, end=A_END)])
    small = gang("small", "q", pool="a100", created=3.0)
    plan = run([BIG_A, small], snapshot=snap)
    assert pools(plan) == {BIG_A.id: ("a100",)}
    reason = plan.pending[small.id]
    assert reason.category is R.QUEUED, reason
    assert "waits for the nodes reserved for ns/big-a: every node" in reason.message, \
        reason.message
