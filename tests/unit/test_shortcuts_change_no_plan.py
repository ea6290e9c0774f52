"""The cycle's shortcuts change no decision: the same plan as the long way round.

- a gang shaped like one that already failed against the same state reuses its reason
  (``Memo.failure_key``); turned off here, every gang is decided in full;
- under FIFO ordering one sort replaces the merge of the per-queue lists;
- under fair share, a queue alone in the heap is not ranked.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies import fairshare
from policies.queues import OrderingMode
from scheduler.decide import cycle
from scheduler.decide.cycle import decide
from scheduler.decide.memo import Memo
from scheduler.decide.order import Rank, Turn
from scheduler.decide.plan import CyclePlan
from scheduler.decide.tallies import queue_tallies
from scheduler.model import Gang
from tests.unit.policies.builders import SOLVE
from tests.unit.test_decide_properties import NOW, PROPERTY, World, worlds


def _with_lookalikes(world: World, data: st.DataObject) -> World:
    """Each pending gang plus copies of the same shape under other names and ages, some
    with later steps of their own (a lookalike must not inherit another's)."""
    extra: list[Gang] = []
    for g in world.pending:
        for k in range(data.draw(st.integers(0, 3))):
            name = f"{g.name}-copy{k}"
            extra.append(replace(g, id=f"{g.namespace}/{name}", uid=f"uid-{name}", name=name,
                                 creation_time=g.creation_time + data.draw(st.integers(-5, 5)),
                                 runtime_estimate=data.draw(
                                     st.sampled_from([None, 300.0, 30_000.0])),
                                 later_steps=data.draw(st.sampled_from(["", f"after {name}"]))))
    return replace(world, pending=world.pending + tuple(extra))


def _plans(world: World, preset: str) -> tuple[CyclePlan, CyclePlan]:
    policies = replace(world.policies, scheduler=replace(
        world.policies.scheduler, **_PRESETS[preset]))
    first = decide(world.snapshot, world.pending, policies, NOW, solver=SOLVE)
    second = decide(world.snapshot, world.pending, policies, NOW + 60.0, previous=first,
                    solver=SOLVE)
    return first, second


_PRESETS: dict[str, dict[str, Any]] = {
    "gang-scheduler": {},
    "fifo-gang": {"ordering": OrderingMode.FIFO, "preemption": False, "reservation": False,
                  "backfill": False},
    "greedy-gang": {"ordering": OrderingMode.FIFO, "preemption": False, "reservation": False},
}


def _as_text(plan: CyclePlan, world: World) -> tuple[object, ...]:
    return (plan.binds, plan.evictions, plan.nominations, plan.reservations,
            {g: str(r) for g, r in plan.pending.items()}, plan.order,
            queue_tallies(world.snapshot, world.pending, world.policies, plan))


@pytest.mark.parametrize("preset", sorted(_PRESETS))
@PROPERTY
@given(world=worlds(), data=st.data())
def test_failure_memo_changes_no_plan(preset: str, world: World, data: st.DataObject) -> None:
    world = _with_lookalikes(world, data)
    fast = _plans(world, preset)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(Memo, "failure_key", lambda *args, **kwargs: None)
        slow = _plans(world, preset)
    for a, b in zip(fast, slow, strict=True):
        assert _as_text(a, world) == _as_text(b, world)
        assert a == b


def _heap_order(gangs: list[Gang]) -> list[str]:
    """The per-queue lists merged through a heap, as ``_in_order`` does for fair share."""
    mode = OrderingMode.FIFO
    lists: dict[str, list[Gang]] = {}
    for g in sorted(gangs, key=lambda g: (g.id, g.uid)):
        lists.setdefault(g.queue, []).append(g)
    lists = {q: sorted(gs, key=lambda g: fairshare.gang_key(g, mode), reverse=True)
             for q, gs in lists.items()}
    heap = [(fairshare.gang_key(gs[-1], mode), q) for q, gs in lists.items()]
    heapq.heapify(heap)
    out = []
    while heap:
        _, q = heapq.heappop(heap)
        out.append(lists[q].pop().id)
        if lists[q]:
            heapq.heappush(heap, (fairshare.gang_key(lists[q][-1], mode), q))
    return out


@PROPERTY
@given(world=worlds(), data=st.data())
def test_fifo_order_is_the_merge_of_the_queues(world: World, data: st.DataObject) -> None:
    world = _with_lookalikes(world, data)
    plan, _ = _plans(world, "greedy-gang")
    assert list(plan.order) == _heap_order(list(world.pending))


@PROPERTY
@given(world=worlds())
def test_a_cycle_with_nothing_pending_is_the_long_way_with_nothing_to_consider(
        world: World) -> None:
    first, _ = _plans(world, "gang-scheduler")
    # A gang of an unknown queue is never considered and counts in no queue: the long way.
    alien = replace(world.pending[0], id="ns/alien", uid="uid-alien", queue="nowhere")
    long = decide(world.snapshot, [alien], world.policies, NOW + 60.0, previous=first,
                  solver=SOLVE)
    fast = decide(world.snapshot, [], world.policies, NOW + 60.0, previous=first,
                  solver=SOLVE)
    assert (fast.binds, fast.evictions, fast.nominations, fast.reservations, fast.order) == \
        (long.binds, long.evictions, long.nominations, long.reservations, long.order)
    assert fast.pending == {} and list(long.pending) == ["ns/alien"]
    assert queue_tallies(world.snapshot, [], world.policies, fast) == \
        queue_tallies(world.snapshot, [alien], world.policies, long)


def _in_order_reference(by_queue: dict[str, list[Gang]], mode: OrderingMode, turn: Turn,
                        rank: Rank, owner_fair: Mapping[str, object] | None = None) -> None:
    """``order.in_order`` as it was before its shortcuts: every queue always ranked. (The
    worlds here set no owner fairness, so there are no owner lines to follow.)"""
    assert not owner_fair
    lists = {q: sorted(gs, key=lambda g: fairshare.gang_key(g, mode), reverse=True)
             for q, gs in by_queue.items() if gs}

    def entry(q: str) -> tuple[object, ...]:
        head = lists[q][-1]
        key = () if mode is OrderingMode.FIFO else rank(q, head)
        return (key, fairshare.gang_key(head, mode), q)

    heap = [entry(q) for q in sorted(lists)]
    heapq.heapify(heap)
    while heap:
        q = heapq.heappop(heap)[-1]
        assert isinstance(q, str)
        gang = lists[q].pop()
        if turn(gang, q) and mode is OrderingMode.FAIR_SHARE:
            heap = [entry(name) for name in sorted(lists) if lists[name]]
            heapq.heapify(heap)
        elif lists[q]:
            heapq.heappush(heap, entry(q))


@pytest.mark.parametrize("preset", sorted(_PRESETS))
@PROPERTY
@given(world=worlds(), data=st.data())
def test_ordering_shortcuts_change_no_plan(preset: str, world: World,
                                           data: st.DataObject) -> None:
    world = _with_lookalikes(world, data)
    fast = _plans(world, preset)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(cycle, "in_order", _in_order_reference)
        slow = _plans(world, preset)
    for a, b in zip(fast, slow, strict=True):
        assert _as_text(a, world) == _as_text(b, world)
