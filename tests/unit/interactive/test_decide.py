"""The interactive tier in ``decide``: scenarios in, binds, evictions and reasons out.

One 8-GPU node unless said otherwise; queue ``q`` (withinQueue LowerPriority, reclaim Any)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from policies.guards import Guards
from scheduler.decide.plan import CyclePlan, ReasonCategory
from scheduler.model import Gang
from scheduler.model.labels import Labels
from scheduler.model.workloads import JUPYTERHUB_USER_LABEL
from tests.unit.interactive.helpers import NOW, capped, notebook, plan_of
from tests.unit.policies.builders import gang, queue, running

QL = ReasonCategory.QUEUE_LIMIT


def bound(plan: CyclePlan) -> list[str]:
    return sorted(b.gang_id for b in plan.binds)


def evicted(plan: CyclePlan) -> list[tuple[str, str]]:
    return sorted((e.victim, e.preemptor) for e in plan.evictions)


# Order ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Order:
    name: str
    preset: str
    strategy: str = "BestEffort"
    backfill: bool = True


ORDERS = [Order("fair share", "gang-scheduler"), Order("fifo", "fifo-gang"),
          Order("strict fifo queue", "gang-scheduler", "StrictFIFO"),
          Order("no backfill", "gang-scheduler", backfill=False)]


@pytest.mark.parametrize("case", ORDERS, ids=lambda c: c.name)
def test_an_interactive_gang_goes_before_older_higher_priority_batch(case: Order) -> None:
    """The node has room for one of them: the notebook, though the batch gang is older and
    of higher priority, and whatever ordering rules the queue and policy keep."""
    batch = gang("train", gpus=8, priority=10, created=0.0)
    nb = notebook("nb", gpus=8, created=500.0)
    q = queue("q", quota={"a": 64}, strategy=case.strategy, backfill=case.backfill)
    plan = plan_of([q], [batch, nb], preset=case.preset)
    assert bound(plan) == ["ns/nb"]
    assert "ns/train" in plan.pending
    # Without the tier the batch gang goes first: the order is the priority's again.
    plain = plan_of([q], [batch, replace(nb, tier=batch.tier)], preset=case.preset)
    assert bound(plain) == ["ns/train"]


def test_an_interactive_gang_is_not_deferred_behind_the_blocker() -> None:
    """Backfill off: everyone waits behind the first gang that cannot start (queue x's,
    considered first: y borrows, so its share is higher), but not a notebook."""
    qs = [queue("org"), queue("x", "org", quota={"a": 24}, reclaim="Never"),
          queue("y", "org", quota={"a": 0})]
    run = [running(gang("ybig", "y", gpus=8), {"a-0000": 1}, start=NOW - 10)]
    pending = [gang("head", "x", gpus=8, pods=3), gang("later", "x", gpus=1, created=1.0),
               notebook("nb", "y", gpus=1, created=2.0)]
    plan = plan_of(qs, pending, run, node_count=3, backfill=False)
    assert bound(plan) == ["ns/nb"]
    assert plan.pending["ns/later"].message.startswith("waits behind ns/head")


# Preemption -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Preempt:
    name: str
    victim: Gang
    preemptor: Gang
    evicts: bool
    says: str = ""


PREEMPTS = [
    Preempt("interactive takes batch of higher priority",
            gang("train", priority=50), notebook("nb", gpus=8), True,
            "preempted by interactive gang ns/nb (priority 0): batch gang preempted for "
            "interactive gang ns/nb in queue q"),
    Preempt("batch of higher priority does not take interactive",
            notebook("nb", gpus=8), gang("urgent", priority=1000), False),
    Preempt("batch takes batch of lower priority (unchanged)",
            gang("train", priority=1), gang("urgent", priority=9), True,
            "preempted by ns/urgent (priority 9): lower priority (1 < 9) in queue q"),
    Preempt("interactive takes interactive of lower priority",
            notebook("old", gpus=8, user="bob", priority=0),
            notebook("new", gpus=8, priority=5), True,
            "preempted by interactive gang ns/new (priority 5): lower priority (0 < 5) in "
            "queue q"),
    Preempt("interactive does not take interactive of equal priority",
            notebook("old", gpus=8, user="bob"), notebook("new", gpus=8), False),
]


@pytest.mark.parametrize("case", PREEMPTS, ids=lambda c: c.name)
def test_within_queue_victims(case: Preempt) -> None:
    run = [running(case.victim, {"a-0000": 1}, start=NOW - 100)]
    plan = plan_of([queue("q", quota={"a": 64})], [case.preemptor], run)
    if case.evicts:
        assert evicted(plan) == [(case.victim.id, case.preemptor.id)]
        assert plan.evictions[0].message == case.says
    else:
        assert plan.evictions == () and case.preemptor.id in plan.pending


@pytest.mark.parametrize("tier_of_victim", ["batch", "interactive"])
def test_reclaim_any_never_takes_an_interactive_gang_for_batch(tier_of_victim: str) -> None:
    """Queue a borrows b's quota; b reclaims (reclaimFromOthers Any, no priority asked):
    a batch gang of a is taken back, an interactive one is not."""
    qs = [queue("org"), queue("a", "org", quota={"a": 0}), queue("b", "org", quota={"a": 8})]
    victim = (gang("borrower", "a", gpus=8) if tier_of_victim == "batch"
              else notebook("borrower", "a", gpus=8))
    plan = plan_of(qs, [gang("owner", "b", gpus=8)],
                   [running(victim, {"a-0000": 1}, start=NOW - 100)])
    if tier_of_victim == "batch":
        assert evicted(plan) == [("ns/borrower", "ns/owner")]
    else:
        assert plan.evictions == () and "ns/owner" in plan.pending


def test_a_guard_still_evicts_an_interactive_gang_past_its_runtime() -> None:
    q = replace(queue("q", quota={"a": 64}), guards=Guards(max_runtime_seconds=3600))
    plan = plan_of([q], [], [running(notebook("nb"), {"a-0000": 1}, start=NOW - 4000)])
    assert evicted(plan) == [("ns/nb", "")]


# Per-user caps --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cap:
    name: str
    gpus: int | None
    gangs: int | None
    running: tuple[Gang, ...]
    pending: tuple[Gang, ...]
    binds: tuple[str, ...]
    held: dict[str, str]
    terminating: bool = False  # the running gangs are being deleted


CAPS = [
    Cap("over the GPU cap waits, another user starts", 2, None,
        (notebook("a1", gpus=2),), (notebook("a2"), notebook("b1", user="bob")),
        ("ns/b1",), {"ns/a2": "user alice already runs 2 interactive GPU(s) of 2 allowed in "
                              "queue q (spec.interactive.maxGPUsPerUser); this gang asks for 1 "
                              "more and starts when one of theirs ends"}),
    Cap("the cycle's own binds count", 2, None,
        (), (notebook("a1", gpus=1, created=1.0), notebook("a2", gpus=1, created=2.0),
             notebook("a3", gpus=1, created=3.0)),
        ("ns/a1", "ns/a2"), {"ns/a3": "user alice already runs 2 interactive GPU(s) of 2"}),
    Cap("gang cap", None, 1,
        (notebook("a1", gpus=0),), (notebook("a2", gpus=0),), (),
        {"ns/a2": "user alice already runs 1 interactive gang(s) of 1 allowed in queue q "
                  "(spec.interactive.maxGangsPerUser)"}),
    Cap("larger than the cap can never start", 2, None,
        (), (notebook("big", gpus=4),), (),
        {"ns/big": "asks for 4 GPU(s), more than the 2 each user may hold in queue q"}),
    Cap("batch gangs are not capped", 1, 1,
        (notebook("a1"),), (gang("t1", gpus=2), gang("t2", gpus=2)), ("ns/t1", "ns/t2"), {}),
    Cap("no user label: the namespace is the user", 1, None,
        (notebook("x1", user=None, namespace="lab"),),
        (notebook("x2", user=None, namespace="lab"),), (),
        {"lab/x2": "user lab already runs 1 interactive GPU(s) of 1"}),
    Cap("a terminating gang no longer counts", 1, None,
        (notebook("a1"),), (notebook("a2"),), ("ns/a2",), {}, terminating=True),
]


@pytest.mark.parametrize("case", CAPS, ids=lambda c: c.name)
def test_per_user_caps(case: Cap) -> None:
    run = [replace(running(g, {"a-0000": 1}, start=NOW - 100), terminating=case.terminating)
           for g in case.running]
    plan = plan_of([capped(gpus=case.gpus, gangs=case.gangs)], list(case.pending), run)
    assert bound(plan) == sorted(case.binds)
    for gid, says in case.held.items():
        reason = plan.pending[gid]
        assert reason.category is QL and says in reason.message, reason.message


def test_the_jupyterhub_label_names_the_user_and_a_queue_may_name_its_own() -> None:
    hub = notebook("h1", label=JUPYTERHUB_USER_LABEL, user="carol")
    again = notebook("h2", label=JUPYTERHUB_USER_LABEL, user="carol")
    plan = plan_of([capped(gpus=1)], [again], [running(hub, {"a-0000": 1}, start=NOW - 9)])
    assert "user carol already runs 1" in plan.pending["ns/h2"].message
    own = replace(capped(gpus=1), interactive=replace(capped(gpus=1).interactive,
                                                      user_label="example.com/owner"))
    mine = notebook("o2", label="example.com/owner", user="dave")
    plan = plan_of([own], [mine], [running(notebook("o1", label="example.com/owner",
                                                    user="dave"), {"a-0000": 1})])
    assert "user dave already runs 1" in plan.pending["ns/o2"].message
    # Its own label first, JupyterHub's after it.
    both = replace(mine, roles=tuple(replace(r, labels=Labels(
        {"example.com/owner": "dave", JUPYTERHUB_USER_LABEL: "erin"})) for r in mine.roles))
    plan = plan_of([own], [both], [running(notebook("o1", label="example.com/owner",
                                                    user="dave"), {"a-0000": 1})])
    assert "user dave" in plan.pending["ns/o2"].message


def test_a_held_notebook_blocks_no_batch_gang() -> None:
    """Held by its user's cap in a StrictFIFO queue: the batch gangs behind it start."""
    q = capped(gpus=1, strategy="StrictFIFO")
    plan = plan_of([q], [notebook("a2"), gang("t", gpus=1)],
                   [running(notebook("a1"), {"a-0000": 1}, start=NOW - 9)])
    assert bound(plan) == ["ns/t"] and plan.pending["ns/a2"].category is QL
