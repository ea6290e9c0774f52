"""``LastCycle``: what the last cycle leaves for readers between cycles, worked out once from
its own input, policies, recall and plan: the waiting gangs by (queue, reason category),
gangs backing off counted as Backoff, and the per-queue figures."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

import pytest

from scheduler.decide.plan import Bind, CyclePlan, PendingReason, ReasonCategory
from scheduler.decide.recall import Recall
from scheduler.feed.cache_cycle import CycleInput
from scheduler.feed.grouping import GangSet
from scheduler.model import Gang, Tier
from scheduler.placement.types import Placement
from scheduler.run.last_cycle import LastCycle
from scheduler.world.snapshot import Snapshot
from tests.unit.policies import builders as b

NOW = 500.0
QUOTA = b.queue("team", quota={"a": 16})
OTHER = b.queue("other", quota={"a": 64})  # more than the pool has: a warning
POLICIES = b.policies(QUOTA, OTHER)


def reason(category: ReasonCategory) -> PendingReason:
    return PendingReason(category, "why")


def last(pending: tuple[Gang, ...], reasons: dict[str, PendingReason],
         backing_off: dict[str, float], *, running: tuple[Gang, ...] = (),
         asked: list[float] | None = None) -> LastCycle:
    """The last cycle of *pending* gangs (and *running* ones, on a-0000) whose plan gave
    *reasons*; *backing_off*: the gangs backing off at the plan's time (*asked* records
    when it was asked)."""
    snapshot = Snapshot(b.nodes("a", 2), [b.running(g, {"a-0000": 1}) for g in running])
    gangs = GangSet(pending=pending, running_by_id=snapshot.running, other_usage={})

    def until(now: float) -> dict[str, float]:
        if asked is not None:
            asked.append(now)
        return backing_off if now == NOW else {}

    return LastCycle(CycleInput(snapshot, gangs, 1), POLICIES, Recall(snapshot.index),
                     CyclePlan(NOW, pending=reasons), until)


G1, G2, G3 = b.gang("g1", "team"), b.gang("g2", "team"), b.gang("g3", "other")


@dataclass
class Case:
    name: str
    pending: tuple[Gang, ...]
    reasons: dict[str, PendingReason]
    waiting: dict[tuple[str, str], int]
    backing_off: dict[str, float] = field(default_factory=dict)


CASES = [
    Case("by queue and reason category", (G1, G2, G3),
         {G1.id: reason(ReasonCategory.QUOTA), G2.id: reason(ReasonCategory.QUOTA),
          G3.id: reason(ReasonCategory.PLACEMENT)},
         {("team", "Quota"): 2, ("other", "Placement"): 1}),
    Case("a pending gang backing off (no reason this cycle) waits with reason Backoff",
         (G1, G2), {G1.id: reason(ReasonCategory.QUOTA)},
         {("team", "Quota"): 1, ("team", "Backoff"): 1}, {G2.id: NOW + 5}),
    Case("a gang with a reason is counted once, by its reason, even if backing off",
         (G1,), {G1.id: reason(ReasonCategory.QUOTA)}, {("team", "Quota"): 1},
         {G1.id: NOW + 5}),
    Case("a gang backing off that is not pending (bound since, or gone) is not counted",
         (G1,), {G1.id: reason(ReasonCategory.QUOTA)}, {("team", "Quota"): 1},
         {"ns/gone": NOW + 5}),
    Case("a reason for a gang the input had no pending gang for: no queue",
         (), {"ns/unformed": reason(ReasonCategory.WAITING_FOR_MEMBERS)},
         {("", "WaitingForMembers"): 1}),
    Case("nothing waits", (), {}, {}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_waiting(case: Case) -> None:
    assert last(case.pending, case.reasons, case.backing_off).waiting() == Counter(case.waiting)


def test_waiting_is_worked_out_once_at_the_plans_time() -> None:
    asked: list[float] = []
    cycle = last((G1,), {}, {G1.id: NOW + 5}, asked=asked)
    first = cycle.waiting()
    assert cycle.waiting() is first and asked == [NOW]


def test_queue_figures_count_every_waiting_gang_and_what_runs() -> None:
    cycle = last((G1, G2, G3), {G1.id: reason(ReasonCategory.QUOTA)}, {G2.id: NOW + 5},
                 running=(b.gang("r", "team"),))
    reports = {q.name: q for q in cycle.queues()}
    assert sorted(reports) == ["other", "team"]
    team, other = reports["team"], reports["other"]
    # g1 by its reason, g2 backing off; g3 has no reason and is not backing off.
    assert (team.pending, other.pending) == (2, 0)
    assert (team.running, team.allocated_gpus, other.allocated_gpus) == (1, 8, 0)
    assert not team.warnings and other.warnings  # capacity: the pool's 16 GPUs
    assert cycle.queues() is cycle.queues()  # worked out once


def test_gangs_by_queue_tier_and_state() -> None:
    """Interactive and batch gangs counted apart, waiting (backing off included) and running
    (what the cycle saw run, and what it binds); bounded: the tier is one of two values."""
    notebook = replace(b.gang("nb", "team"), tier=Tier.INTERACTIVE)
    debug = replace(b.gang("dbg", "other"), tier=Tier.INTERACTIVE)
    cycle = last((G1, G2, debug), {G1.id: reason(ReasonCategory.QUOTA),
                                   debug.id: reason(ReasonCategory.PLACEMENT)},
                 {G2.id: NOW + 5}, running=(notebook, G3))
    assert cycle.tiers() == Counter({("team", "batch", "pending"): 2,
                                     ("other", "interactive", "pending"): 1,
                                     ("team", "interactive", "running"): 1,
                                     ("other", "batch", "running"): 1})
    bound = LastCycle(cycle.inp, cycle.policies, cycle.recall,
                      CyclePlan(NOW, binds=(Bind(debug.id, "other", Placement(debug.id, ())),)),
                      lambda _: {})
    assert bound.tiers()[("other", "interactive", "running")] == 1
    assert {tier for _, tier, _ in bound.tiers()} <= {"batch", "interactive"}
