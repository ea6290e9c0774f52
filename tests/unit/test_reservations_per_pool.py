"""Reservations per node pool: a starving gang is kept nodes in its pools only, and only gangs
that could use those pools (nodes or quota) are kept from delaying it. Most tests allow two
reserved gangs at once (``reservation.maxGangs: 2``); the default, one, is tested at the end.

Two pools of three 8-GPU nodes; in each, the first node runs a gang until a known time and the
last one a gang with no known end, so a gang of two 8-GPU pods is starved there and reserves
the first two nodes of its pool.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from policies.queues import Queue
from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan, ReasonCategory
from scheduler.model import Gang, RunningGang
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

R = ReasonCategory
NOW = 10_000.0
A_END, H_END = NOW + 1000.0, NOW + 2000.0
NODES = nodes("a100", 3) + nodes("h100", 3)
QUEUES = (queue("q", quota={"a100": 64, "h100": 64}),
          queue("nobf", quota={"a100": 64, "h100": 64}, backfill=False))
BUSY_A = running(gang("ra", "q", pool="a100"), {"a100-0000": 1}, end=A_END)
BUSY_H = running(gang("rh", "q", pool="h100"), {"h100-0000": 1}, end=H_END)
FOREVER = (running(gang("la", "q", pool="a100"), {"a100-0002": 1}),
           running(gang("lh", "q", pool="h100"), {"h100-0002": 1}))
BIG_A = gang("big-a", "q", pods=2, pool="a100", created=1.0)
BIG_H = gang("big-h", "q", pods=2, pool="h100", created=1.0)


def run(pending: Sequence[Gang], busy: Sequence[RunningGang] = (BUSY_A, BUSY_H),
        queues: Sequence[Queue] = QUEUES, previous: CyclePlan | None = None,
        now: float = NOW) -> CyclePlan:
    return decide(Snapshot(NODES, (*busy, *FOREVER)), pending,
                  policies(*queues, preemption=False, max_reservations=2), now, previous,
                  solver=SOLVE)


def test_a_starving_gang_in_each_pool_gets_a_reservation_at_once() -> None:
    plan = run([BIG_H, BIG_A])
    assert {r.gang_id: (r.pools, r.nodes, r.estimated_start) for r in plan.reservations} == {
        "ns/big-a": (("a100",), ("a100-0000", "a100-0001"), A_END),
        "ns/big-h": (("h100",), ("h100-0000", "h100-0001"), H_END)}
    assert plan.pending["ns/big-a"].category is R.RESERVED
    assert plan.pending["ns/big-h"].category is R.RESERVED
    # Both are carried over and kept by the next cycle.
    again = run([BIG_H, BIG_A], previous=plan, now=NOW + 10)
    assert sorted(r.gang_id for r in again.reservations) == ["ns/big-a", "ns/big-h"]


def test_an_a100_gang_is_never_behind_an_h100_reservation() -> None:
    """The reported bug: the a100 gang was 'Queued' behind the h100 reservation."""
    small_a = gang("small-a", "q", pool="a100", created=2.0)  # no runtime estimate
    busy = (BUSY_H, BUSY_A, running(gang("ra2", "q", pool="a100"), {"a100-0001": 1},
                                    end=A_END))
    plan = run([BIG_H, small_a], busy=busy)
    reason = plan.pending["ns/small-a"]
    assert reason.category is R.RESERVED, reason
    assert "big-h" not in reason.message
    assert sorted(r.gang_id for r in plan.reservations) == ["ns/big-h", "ns/small-a"]


def test_a_queue_without_backfill_waits_only_behind_a_reservation_in_its_pools() -> None:
    first = run([BIG_H])  # carried over, the reserved gang goes first next cycle
    elsewhere = run([BIG_H, gang("x", "nobf", pool="a100")], previous=first)
    assert [b.gang_id for b in elsewhere.binds] == ["ns/x"]
    same = run([BIG_H, gang("x", "nobf", pool="h100")], previous=first)
    assert not same.binds
    assert same.pending["ns/x"].category is R.QUEUED
    assert "waits behind the reservation of ns/big-h" in same.pending["ns/x"].message


@pytest.mark.parametrize(("pending", "binds", "reasons"), [
    # EASY backfill within a pool is unchanged: off the reserved nodes unless done in time.
    ([BIG_A, gang("x", "q", pool="a100", created=2.0)], [],
     {"ns/big-a": R.RESERVED, "ns/x": R.QUEUED}),
    ([BIG_A, gang("x", "q", pool="a100", created=2.0, runtime=500.0)], ["ns/x"],
     {"ns/big-a": R.RESERVED}),
    # A gang that may use either pool respects both reservations...
    ([BIG_A, BIG_H, gang("x", "q", created=2.0)], [],
     {"ns/big-a": R.RESERVED, "ns/big-h": R.RESERVED, "ns/x": R.QUEUED}),
    # ...except one it ends before: done in 1500s, it may use h100 (free until 2000s).
    ([BIG_A, BIG_H, gang("x", "q", created=2.0, runtime=1500.0)], ["ns/x"],
     {"ns/big-a": R.RESERVED, "ns/big-h": R.RESERVED}),
])
def test_who_is_kept_off_which_reservation(pending: Sequence[Gang], binds: Sequence[str],
                                           reasons: dict[str, ReasonCategory]) -> None:
    plan = run(pending)
    assert sorted(b.gang_id for b in plan.binds) == sorted(binds)
    assert {g: r.category for g, r in plan.pending.items()} == reasons, \
        {g: str(r) for g, r in plan.pending.items()}


def test_backfill_in_time_lands_only_where_it_ends_before_the_reservation() -> None:
    plan = run([BIG_A, BIG_H, gang("x", "q", created=2.0, runtime=1500.0)])
    bind = plan.bind_of("ns/x")
    assert bind is not None and bind.placement.nodes == ("h100-0001",)


def test_queued_behind_several_reservations_names_them_all() -> None:
    plan = run([BIG_A, BIG_H, gang("x", "q", created=2.0)])
    message = plan.pending["ns/x"].message
    assert "reserved for ns/big-a and for ns/big-h" in message, message
    assert plan.pending["ns/big-a"].estimated_start == plan.now + 1000.0
    assert plan.pending["ns/big-h"].estimated_start == plan.now + 2000.0


def test_a_pool_has_one_reservation_at_a_time() -> None:
    """A second starving a100 gang gets none of its own: kept off the reservation, it is
    queued behind it; allowed on it (done in time) but still short of room, it just waits."""
    behind = gang("small-a", "q", pool="a100", created=3.0)
    in_time = gang("big-a2", "q", pods=2, pool="a100", created=3.0, runtime=500.0)
    for second, category in ((behind, R.QUEUED), (in_time, R.PLACEMENT)):
        plan = run([BIG_A, second])
        assert [r.gang_id for r in plan.reservations] == ["ns/big-a"]
        assert plan.pending[second.id].category is category, plan.pending[second.id]


def run_default_cap(pending: Sequence[Gang], busy: Sequence[RunningGang] = (BUSY_A, BUSY_H),
                    previous: CyclePlan | None = None, now: float = NOW) -> CyclePlan:
    return decide(Snapshot(NODES, (*busy, *FOREVER)), pending,
                  policies(*QUEUES, preemption=False), now, previous, solver=SOLVE)


def test_by_default_one_gang_gets_a_reservation_and_keeps_it() -> None:
    plan = run_default_cap([BIG_H, BIG_A])
    assert [r.gang_id for r in plan.reservations] == ["ns/big-a"]  # first in order (uid)
    assert plan.pending["ns/big-h"].category is R.PLACEMENT
    assert "big-a" not in plan.pending["ns/big-h"].message
    # Next cycle an older h100 gang comes first in order, yet the reserved gang keeps its turn.
    older = gang("older-h", "q", pods=2, pool="h100", created=0.5)
    again = run_default_cap([older, BIG_H, BIG_A], previous=plan, now=NOW + 10)
    assert [r.gang_id for r in again.reservations] == ["ns/big-a"]
    assert again.pending["ns/older-h"].category is R.PLACEMENT


def test_with_the_default_cap_an_a100_gang_is_still_never_behind_an_h100_reservation() -> None:
    small_a = gang("small-a", "q", pool="a100", created=2.0)
    busy = (BUSY_H, BUSY_A, running(gang("ra2", "q", pool="a100"), {"a100-0001": 1},
                                    end=A_END))
    plan = run_default_cap([BIG_H, small_a], busy=busy)
    reason = plan.pending["ns/small-a"]
    assert reason.category is R.PLACEMENT and "big-h" not in reason.message, reason
    freed = run_default_cap([BIG_H, small_a], busy=(BUSY_H,))
    assert [b.gang_id for b in freed.binds] == ["ns/small-a"]  # a100 is free: it starts
