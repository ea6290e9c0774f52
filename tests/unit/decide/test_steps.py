"""Each step of ``consider`` called directly on one ``Trial`` (``world.trial``): when it
decides, what it decides, and when it passes the turn on (None)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from policies.fit import Misfit, fit
from scheduler.decide import consider as c
from scheduler.decide.draft import Draft
from scheduler.decide.outcomes import Bound, Nominated, Outcome, Reserved, Waiting
from scheduler.decide.plan import ReasonCategory
from scheduler.decide.trial import Trial
from scheduler.model import Gang, RunningGang
from scheduler.model.pods import PreemptionPolicy
from scheduler.placement.types import UnplaceableReason
from tests.unit.decide import world as w
from tests.unit.policies import builders as b

R = ReasonCategory
NO_BACKFILL = [b.queue("q", quota={"a": 16}, backfill=False)]
TWO_QUEUES = [b.queue("q", quota={"a": 16}), b.queue("other", quota={"a": 16})]


def full(name: str = "low", *, queue: str = "q", priority: int = 0,
         end: float | None = None) -> RunningGang:
    """A gang of two 8-GPU pods filling both nodes."""
    return b.running(b.gang(name, queue, pods=2, priority=priority),
                     {"a-0000": 1, "a-0001": 1}, end=end)


def never_preempts(g: Gang) -> Gang:
    return replace(g, preemption_policy=PreemptionPolicy.NEVER)


def tried(t: Trial) -> Trial:
    """*t* after its plain attempt (the steps after ``place`` run only after a misfit)."""
    assert not isinstance(t.attempt, Bound)
    return t


Case = tuple[Callable[[], Trial], type[Outcome] | None, str]


def run(step: Callable[[Trial], Outcome | None], make: Callable[[], Trial],
        decides: type[Outcome] | None, says: str) -> Outcome | None:
    outcome = step(make())
    if decides is None:
        assert outcome is None
    else:
        assert isinstance(outcome, decides), outcome
        assert says in getattr(outcome, "message", ""), outcome
    return outcome


BEHIND: dict[str, Case] = {
    "no reservation": (lambda: w.trial(b.gang("g"), queues=NO_BACKFILL), None, ""),
    "its queue backfills": (lambda: w.trial(b.gang("g"), obstacles=w.reserved(w.reservation())),
                            None, ""),
    "a reservation in another pool": (
        lambda: w.trial(b.gang("g"), queues=NO_BACKFILL,
                        obstacles=w.reserved(w.reservation(pool="b"))), None, ""),
    "no backfill past it": (
        lambda: w.trial(b.gang("g"), queues=NO_BACKFILL,
                        obstacles=w.reserved(w.reservation())),
        Waiting, "queue q does not backfill; waits behind the reservation of ns/starving"),
    "never fits: says so instead": (
        lambda: w.trial(b.gang("g", gpus=16), queues=NO_BACKFILL,
                        obstacles=w.reserved(w.reservation())), Waiting, "(never fits)"),
}


@pytest.mark.parametrize("case", BEHIND)
def test_behind_reservation(case: str) -> None:
    run(c.behind_reservation, *BEHIND[case])


def test_remembered_passes_first_then_answers_a_lookalike() -> None:
    draft = w.draft()
    first = w.trial(b.gang("g"), draft)
    assert c.remembered(first) is None and first.key is not None
    draft.context.memo.remember(first.key, draft.epoch, Waiting(R.QUOTA, "no room"))
    again = c.remembered(w.trial(b.gang("lookalike"), draft))
    assert again == Waiting(R.QUOTA, "no room")
    # Another shape, or another state (a new epoch), is not answered from the memo.
    assert c.remembered(w.trial(b.gang("bigger", pods=2), draft)) is None
    charged = draft.ledger.charge("q", "a", b.gang("x").roles[0].requests)
    later = Draft(draft.context, draft.snapshot, charged)  # the same memo, a new ledger
    assert c.remembered(w.trial(b.gang("later"), later)) is None


def test_remembered_skips_a_gang_with_members_running() -> None:
    g = b.gang("g", pods=2)
    t = w.trial(g, running=[b.running(g, {"a-0000": 1})])
    assert c.remembered(t) is None and t.key is None


PLACE: dict[str, Case] = {
    "fits": (lambda: w.trial(b.gang("g")), Bound, ""),
    "larger than the nodes": (lambda: w.trial(b.gang("g", pods=3)), None, ""),
    "over quota": (lambda: w.trial(b.gang("g", pods=2),
                                   queues=[b.queue("q", quota={"a": 8})]), None, ""),
    "the nodes are full": (lambda: w.trial(b.gang("g"), running=[full()]), None, ""),
}


@pytest.mark.parametrize("case", PLACE)
def test_place(case: str) -> None:
    outcome = run(c.place, *PLACE[case])
    if isinstance(outcome, Bound):
        assert outcome.fit.placement.nodes == ("a-0000",)


AWAIT: dict[str, Case] = {
    "nothing draining": (lambda: tried(w.trial(b.gang("g"), running=[full(priority=5)])),
                         None, ""),
    "draining frees its room": (
        lambda: tried(w.trial(b.gang("g"), running=[full(priority=5)],
                              obstacles=w.draining("ns/low"))),
        Nominated, "waiting for 1 terminating gang(s) (ns/low) to go, without evicting more"),
    "may not preempt": (
        lambda: tried(w.trial(never_preempts(b.gang("g")), running=[full(priority=5)],
                              obstacles=w.draining("ns/low"))), None, ""),
    "draining is not enough": (
        lambda: tried(w.trial(b.gang("g", pods=3), running=[full(priority=5)],
                              obstacles=w.draining("ns/low"))), None, ""),
}


@pytest.mark.parametrize("case", AWAIT)
def test_await_draining(case: str) -> None:
    outcome = run(c.await_draining, *AWAIT[case])
    if isinstance(outcome, Nominated):
        assert outcome.awaiting == ("ns/low",) and outcome.evictions == ()


HIGH = b.gang("g", priority=10)
PREEMPT: dict[str, Case] = {
    "a lower-priority victim": (lambda: tried(w.trial(HIGH, running=[full()])), Nominated,
                                "evicting 1 gang(s) (ns/low) to start on a-0000"),
    "preemption off": (lambda: tried(w.trial(HIGH, running=[full()], preemption=False)),
                       None, ""),
    "no lower priority": (lambda: tried(w.trial(HIGH, running=[full(priority=10)])), None, ""),
    "preemptionPolicy Never": (
        lambda: tried(w.trial(never_preempts(HIGH), running=[full()])), None, ""),
}


@pytest.mark.parametrize("case", PREEMPT)
def test_preempt(case: str) -> None:
    outcome = run(c.preempt, *PREEMPT[case])
    if isinstance(outcome, Nominated):
        assert outcome.evicting == ("ns/low",)
        assert [e.release.id for e in outcome.evictions] == ["ns/low"]


ENDS = w.NOW + 600
RESERVE: dict[str, Case] = {
    "starving, running gangs end": (
        lambda: tried(w.trial(b.gang("g"), running=[full(end=ENDS)])), Reserved,
        "reserved 1 node(s) and its quota until running gangs are expected to end"),
    "reservations off": (
        lambda: tried(w.trial(b.gang("g"), running=[full(end=ENDS)], reservation=False)),
        None, ""),
    "not starving yet": (
        lambda: tried(w.trial(b.gang("g"), running=[full(end=ENDS)],
                              reserve_after_seconds=3600.0)), None, ""),
    "never fits": (lambda: tried(w.trial(b.gang("g", gpus=16))), None, ""),
    "the cap is reached": (
        lambda: tried(w.trial(b.gang("g"), running=[full(end=ENDS)],
                              obstacles=w.reserved(w.reservation(pool="b")))), None, ""),
}


@pytest.mark.parametrize("case", RESERVE)
def test_reserve_nodes(case: str) -> None:
    outcome = run(c.reserve_nodes, *RESERVE[case])
    if isinstance(outcome, Reserved):
        assert outcome.reservation.nodes == ("a-0000",)
        assert outcome.reservation.estimated_start == ENDS


EXPLAIN: dict[str, tuple[Callable[[], Trial], ReasonCategory, str]] = {
    "quota in use": (
        lambda: tried(w.trial(b.gang("g"), running=[full()], reservation=False)),
        R.QUOTA, "wait for the queue's running gangs to finish, or raise the quota"),
    "capacity in use": (
        lambda: tried(w.trial(b.gang("g"), queues=TWO_QUEUES,
                              running=[full(queue="other")], reservation=False)),
        R.PLACEMENT, ""),
    "never fits": (lambda: tried(w.trial(b.gang("g", gpus=16))), R.PLACEMENT, "(never fits)"),
    "never admitted": (
        lambda: tried(w.trial(b.gang("g", pods=2), queues=[b.queue("q", quota={"a": 8})])),
        R.QUOTA, "can never be admitted to queue q, even with every queue idle"),
    "every node reserved": (
        lambda: tried(w.trial(b.gang("g", runtime=3600),
                              obstacles=w.reserved(w.reservation(
                                  nodes=("a-0000", "a-0001"))))),
        R.QUEUED, "waits for the nodes reserved for ns/starving"),
    "not starving yet": (
        lambda: tried(w.trial(b.gang("g"), running=[full()], reserve_after_seconds=3600.0)),
        R.QUOTA, "no reservation before it has been pending 3600s (reserveAfterSeconds)"),
    "would preempt but may not": (
        lambda: tried(w.trial(never_preempts(HIGH), running=[full()], reservation=False)),
        R.QUOTA, "preemption is disabled by its preemptionPolicy (Never): evicting 1 gang(s)"),
}


@pytest.mark.parametrize("case", EXPLAIN)
def test_explain_always_decides(case: str) -> None:
    make, category, says = EXPLAIN[case]
    outcome = c.explain(make())
    assert outcome.category is category and says in outcome.message, outcome


def test_the_steps_in_order_give_the_outcome() -> None:
    order = (c.behind_reservation, c.remembered, c.place, c.await_draining, c.preempt,
             c.reserve_nodes, c.explain)
    assert order == c.STEPS
    assert isinstance(c.consider(w.trial(HIGH, running=[full()])), Nominated)


def test_fits_without_reservations_asks_over_every_pool_not_through_fit() -> None:
    """``Trial._fits_without_reservations`` is a placement question over every pool, quota
    aside (its docstring's example): pool a (4-GPU nodes, the queue's quota) all reserved,
    pool b (8-GPU nodes) without quota. Through ``fit`` the gang would "never fit"."""
    nodes = b.nodes("a", 2, gpus=4) + b.nodes("b", 2)
    res = w.reservation(nodes=("a-0000", "a-0001"), pool="a", start=w.NOW + 600)
    t = w.trial(b.gang("g", pods=2, runtime=3600), nodes=nodes,
                queues=[b.queue("q", quota={"a": 16})], obstacles=w.reserved(res))
    assert t.restricted and t.misfit.pools == ("a",)
    final = t.final
    assert final is not None and final.message.startswith("waits for the nodes reserved")
    through_fit = fit(t.applicant, replace(t.world, params=t.base))
    assert isinstance(through_fit, Misfit) and through_fit.reason is UnplaceableReason.NEVER_FITS
