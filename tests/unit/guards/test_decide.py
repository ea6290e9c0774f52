"""The runaway guards in ``decide``: scenarios in, evictions and reasons out; and the two
invariants as properties (a queue over budget starts nothing; never more running gangs than
the cap)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.guards import NO_USAGE, Budget, Guards, Period, Run, Usage
from policies.queues import Queue
from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan, ReasonCategory
from scheduler.model import Gang, RunningGang
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

NODES = nodes("a", 4)  # 4 x 8 GPUs
#: Wednesday 2026-12-02 12:00 UTC.
NOW = 1_796_212_800.0
QL = ReasonCategory.QUEUE_LIMIT


def guarded(name: str = "q", parent: str | None = None, **guards: object) -> Queue:
    return replace(queue(name, parent, quota={"a": 64}),
                   guards=Guards(**guards))  # type: ignore[arg-type]


def plan_of(queues: list[Queue], pending: list[Gang], run: Sequence[RunningGang] = (),
            now: float = NOW, usage: Usage = NO_USAGE, preset: str = "gang-scheduler"
            ) -> CyclePlan:
    return decide(Snapshot(NODES, run), pending, policies(*queues, preset=preset), now,
                  solver=SOLVE, usage=usage)


def test_a_gang_past_the_queues_max_runtime_is_evicted_naming_the_policy() -> None:
    old = running(gang("old"), {"a-0000": 1}, start=NOW - 43_380)
    young = running(gang("young"), {"a-0001": 1}, start=NOW - 600)
    plan = plan_of([guarded(max_runtime_seconds=43_200)], [], [old, young])
    assert [(e.victim, e.preemptor) for e in plan.evictions] == [("ns/old", "")]
    assert plan.evictions[0].headline == (
        "preempted: queue q allows 12h00m of runtime; this gang ran 12h03m")
    # The next time a guard acts: the young gang's limit.
    assert plan.wake == NOW - 600 + 43_200
    assert plan.due is not None and plan.due <= plan.wake


def test_a_gang_evicted_by_the_previous_plan_is_not_evicted_again_at_once() -> None:
    """The watch may not show its pods leaving yet; refused, it is evicted the cycle after."""
    old = running(gang("old"), {"a-0000": 1}, start=NOW - 7200)
    queues = [guarded(max_runtime_seconds=3600)]
    first = plan_of(queues, [], [old])
    pols = policies(*queues)
    second = decide(Snapshot(NODES, [old]), [], pols, NOW + 1, first, solver=SOLVE)
    assert [e.victim for e in first.evictions] == ["ns/old"] and second.evictions == ()
    third = decide(Snapshot(NODES, [old]), [], pols, NOW + 2, second, solver=SOLVE)
    assert [e.victim for e in third.evictions] == ["ns/old"]


def test_the_annotation_asks_for_less_never_more() -> None:
    short = running(replace(gang("short"), max_runtime=600.0), {"a-0000": 1}, start=NOW - 700)
    long_ = running(replace(gang("long"), max_runtime=1e6), {"a-0001": 1}, start=NOW - 4000)
    plan = plan_of([guarded(max_runtime_seconds=3600)], [], [short, long_])
    assert {e.victim: e.message for e in plan.evictions} == {
        "ns/short": "preempted: its gangscheduler.io/max-runtime annotation allows 10m of "
                    "runtime; this gang ran 11m",
        "ns/long": "preempted: queue q allows 1h00m of runtime; this gang ran 1h06m"}


def test_annotation_alone_works_without_queue_guards_for_any_gang() -> None:
    g = running(replace(gang("g"), max_runtime=60.0), {"a-0000": 1}, start=NOW - 61)
    assert [e.victim for e in plan_of([queue("q", quota={"a": 64})], [], [g]).evictions] == [
        "ns/g"]


def test_the_annotations_deadline_wakes_the_loop_without_queue_guards() -> None:
    g = running(replace(gang("g"), max_runtime=600.0), {"a-0000": 1}, start=NOW - 60)
    plan = plan_of([queue("q", quota={"a": 64})], [], [g])
    assert plan.evictions == () and plan.wake == NOW + 540 and plan.due == NOW + 540


def test_a_parents_guard_covers_its_children() -> None:
    g = running(gang("g", "child"), {"a-0000": 1}, start=NOW - 7200)
    plan = plan_of([guarded("org", max_runtime_seconds=3600),
                    queue("child", "org", quota={"a": 64})], [], [g])
    assert [e.message for e in plan.evictions] == [
        "preempted: queue org allows 1h00m of runtime; this gang ran 2h00m"]


def test_an_evicted_gang_is_awaited_not_preempted_again() -> None:
    """The gang past its runtime fills the cluster; a pending one waits for it to go."""
    old = running(gang("old", gpus=8, pods=4), {f"a-000{i}": 1 for i in range(4)},
                  start=NOW - 7200)
    plan = plan_of([guarded(max_runtime_seconds=3600)], [gang("new", gpus=8, pods=4)], [old])
    assert [e.victim for e in plan.evictions] == ["ns/old"]
    assert plan.pending["ns/new"].category is ReasonCategory.PREEMPTION_PENDING
    assert "terminating" in plan.pending["ns/new"].message


def test_a_queue_over_its_budget_starts_nothing_and_says_when_it_resets() -> None:
    # 13 h of a finished 8-GPU run this week: 104 GPU-h of a 100 GPU-h budget.
    usage = Usage.of((Run("q", 8, NOW - 13 * 3600, NOW - 60),))
    queues = [guarded(budget=Budget(100, Period.WEEK))]
    plan = plan_of(queues, [gang("g")], usage=usage)
    assert plan.binds == ()
    reason = plan.pending["ns/g"]
    assert reason.category is QL
    assert reason.message == ("queue q reached its GPU-hour budget for this week: 104 of "
                              "100 GPU-h; resets Monday 07 Dec 00:00 UTC")
    assert plan.wake == 1_796_601_600.0  # Monday 2026-12-07 00:00 UTC
    # Running gangs count too, from their start.
    big = running(gang("big", gpus=8, pods=4), {f"a-000{i}": 1 for i in range(4)},
                  start=NOW - 4 * 3600)
    assert plan_of(queues, [gang("g")], [big]).pending["ns/g"].category is QL
    # Under budget: it starts.
    assert [b.gang_id for b in plan_of(queues, [gang("g")]).binds] == ["ns/g"]
    # Last week's use does not count.
    old = Usage.of((Run("q", 8, NOW - 6 * 86400, NOW - 5 * 86400),))
    assert [b.gang_id for b in plan_of(queues, [gang("g")], usage=old).binds] == ["ns/g"]


def test_a_parents_budget_holds_its_childrens_gangs() -> None:
    usage = Usage.of((Run("a", 8, NOW - 3 * 3600, NOW),))
    queues = [guarded("org", budget=Budget(20, Period.DAY)),
              queue("a", "org", quota={"a": 32}), queue("b", "org", quota={"a": 32})]
    plan = plan_of(queues, [gang("g", "b")], usage=usage)
    assert plan.pending["ns/g"].message.startswith("queue org reached its GPU-hour budget "
                                                   "for today: 24 of 20 GPU-h")


def test_running_cap_counts_running_and_this_cycles_binds() -> None:
    r = running(gang("r"), {"a-0000": 1}, start=NOW - 60)
    plan = plan_of([guarded(max_running_gangs=3)],
                   [gang("p1", created=1), gang("p2", created=2), gang("p3", created=3)], [r])
    assert len(plan.binds) == 2
    held = [gid for gid, why in plan.pending.items() if why.category is QL]
    assert len(held) == 1
    assert "maxRunningGangs 3" in plan.pending[held[0]].message


def test_pending_cap_considers_the_first_arrivals_only() -> None:
    pending = [gang(f"p{i}", gpus=8, pods=4, created=float(i)) for i in range(5)]
    plan = plan_of([guarded(max_pending_gangs=2)], pending)
    assert [b.gang_id for b in plan.binds] == ["ns/p0"]
    assert plan.pending["ns/p1"].category is not QL  # considered: waits for room
    for gid in ("ns/p2", "ns/p3", "ns/p4"):
        assert plan.pending[gid].category is QL
        assert "maxPendingGangs" in plan.pending[gid].message
        assert plan.pending[gid].position == 0  # not in the order at all


def test_a_partly_bound_gang_is_completed_whatever_the_caps() -> None:
    """Its bound members run already: the caps gate starts, and it has started."""
    g = gang("g", gpus=8, pods=2)
    part = running(replace(g, roles=(replace(g.roles[0], count=1),)), {"a-0000": 1},
                   start=NOW - 60)
    rest = replace(g, roles=(replace(g.roles[0], count=1),), declared_min_member=None)
    plan = plan_of([guarded(max_running_gangs=1, max_pending_gangs=1)],
                   [gang("first", created=-1.0), rest], [part])
    assert "ns/g" not in plan.pending or plan.pending["ns/g"].category is not QL


def test_guards_act_under_fifo_gang_too() -> None:
    old = running(gang("old"), {"a-0000": 1}, start=NOW - 7200)
    plan = plan_of([guarded(max_runtime_seconds=3600, max_running_gangs=1)],
                   [gang("p")], [old], preset="fifo-gang")
    assert [e.victim for e in plan.evictions] == ["ns/old"]
    # The gang past its limit is leaving: it no longer counts against maxRunningGangs.
    assert [b.gang_id for b in plan.binds] == ["ns/p"]


def test_no_guards_no_wake() -> None:
    plan = plan_of([queue("q", quota={"a": 64})], [gang("g")],
                   [running(gang("r"), {"a-0001": 1})])
    assert plan.wake is None and plan.evictions == ()


# Properties ---------------------------------------------------------------------------------
_gangs = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([1, 2, 4, 8]),
                            st.integers(0, 5)), max_size=10)


@settings(max_examples=60, deadline=None)
@given(pending=_gangs, run=st.lists(st.tuples(st.sampled_from(["a", "b"]),
                                              st.integers(0, 20)), max_size=4),
       cap=st.integers(1, 4), finished=st.floats(0, 200), budget=st.floats(1, 150))
def test_caps_and_budget_hold(pending: list[tuple[str, int, int]], run: list[tuple[str, int]],
                              cap: int, finished: float, budget: float) -> None:
    """Never more running gangs under org than its cap (unless already so at the start);
    a queue over budget (org's, from a's finished runs) starts no gang."""
    queues = [guarded("org", max_running_gangs=cap, budget=Budget(budget, Period.DAY)),
              queue("a", "org", quota={"a": 64}), queue("b", "org", quota={"a": 64})]
    runs = [running(gang(f"r{i}", q, gpus=1), {f"a-000{i % 4}": 1}, start=NOW - age * 60)
            for i, (q, age) in enumerate(run)]
    gangs = [gang(f"p{i}", q, gpus=g, created=float(c)) for i, (q, g, c) in enumerate(pending)]
    usage = Usage.of((Run("a", 1, NOW - finished * 3600, NOW - 1),) if finished else ())
    plan = plan_of(queues, gangs, runs, usage=usage)
    started = len(plan.binds) + len(plan.nominations)
    assert len(runs) + started <= max(cap, len(runs))
    used = min(finished, 12.0) + sum(NOW - r.start_time for r in runs) / 3600
    if used >= budget + 1e-6:
        assert started == 0
        assert all(r.category is QL for r in plan.pending.values())
