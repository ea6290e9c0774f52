"""``CycleObserver``: the summary line and the metrics of each cycle and bind outcome, the
timed solver, and GPU-seconds accrued up to every scrape; table-driven where a cycle's plan
and result go in and samples and log levels come out."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

import pytest
from structlog.testing import capture_logs

from scheduler.decide.housekeeping import PartlyBound
from scheduler.decide.plan import (
    Bind,
    CyclePlan,
    PendingReason,
    ReasonCategory,
    Rollback,
    RollbackCause,
)
from scheduler.decide.recall import Recall
from scheduler.feed.cache_cycle import CycleInput
from scheduler.feed.grouping import GangSet
from scheduler.model import PodRef
from scheduler.placement.types import (
    Placement,
    PlacementParams,
    Unplaceable,
    UnplaceableReason,
)
from scheduler.run.inflight import ApplyResult, Flight
from scheduler.run.last_cycle import LastCycle
from scheduler.run.metrics import SchedulerMetrics
from scheduler.run.observe import CycleObserver
from scheduler.world.snapshot import Snapshot
from tests.unit.policies import builders as b

POLICIES = b.policies(b.queue("team", quota={"a": 16}))
RUNNING = b.gang("r", "team", pods=1)  # 8 GPUs on a-0000
PENDING = b.gang("p", "team")
PODS = (PodRef("ns", "x-0", "u0"),)


def last_cycle(plan: CyclePlan) -> LastCycle:
    snapshot = Snapshot(b.nodes("a", 2), [b.running(RUNNING, {"a-0000": 1})])
    gangs = GangSet(pending=(PENDING,), running_by_id=snapshot.running, other_usage={})
    return LastCycle(CycleInput(snapshot, gangs, 1), POLICIES, Recall(snapshot.index), plan,
                     lambda _: {})


def sample(m: SchedulerMetrics, name: str, **labels: str) -> float:
    return m.registry.get_sample_value(name, labels) or 0.0


BIND = Bind("ns/p", "team", Placement("ns/p", ()), pod_nodes=((PODS[0], "a-0001"),))


@dataclass
class Case:
    name: str
    plan: CyclePlan
    result: ApplyResult
    level: str  # of the summary line
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)


CASES = [
    Case("an idle cycle: a debug line, the cycle counted and timed",
         CyclePlan(100.0, pending={"ns/p": PendingReason(ReasonCategory.QUOTA, "why")}),
         ApplyResult(), "debug",
         {("gang_scheduler_cycles_total", ()): 1,
          ("gang_scheduler_cycle_duration_seconds_sum", ()): 0.25,
          ("gang_scheduler_apply_duration_seconds_sum", ()): 0.125,
          ("gang_scheduler_pending_gangs", (("queue", "team"), ("reason", "Quota"))): 1,
          ("gang_scheduler_gangs", (("queue", "team"), ("tier", "batch"),
                                    ("state", "pending"))): 1,
          ("gang_scheduler_gangs", (("queue", "team"), ("tier", "batch"),
                                    ("state", "running"))): 1}),
    Case("a cycle that binds: an info line", CyclePlan(100.0, binds=(BIND,)),
         ApplyResult(bound=("ns/p",)), "info"),
    Case("a failed bind is news", CyclePlan(100.0), ApplyResult(failed={"ns/p": "x"}), "info"),
    Case("rollbacks counted by cause, blocked evictions and issued ones",
         CyclePlan(100.0, rollbacks=(
             Rollback("ns/a", PODS, "gone", RollbackCause.MEMBER_GONE),
             Rollback("ns/b", PODS, "late", RollbackCause.TIMED_OUT),
             Rollback("ns/c", PODS, "gone", RollbackCause.MEMBER_GONE))),
         ApplyResult(evicted=("ns/r", "ns/gone"), blocked={"ns/v": "pdb"}), "info",
         {("gang_scheduler_rollbacks_total", (("reason", "MemberGone"),)): 2,
          ("gang_scheduler_rollbacks_total", (("reason", "ScheduleTimeout"),)): 1,
          ("gang_scheduler_evictions_blocked_total", ()): 1,
          ("gang_scheduler_preemptions_total", (("queue", "team"),)): 1,
          ("gang_scheduler_preemptions_total", (("queue", ""),)): 1,
          ("gang_scheduler_evictions_total", ()): 1}),  # ns/r's one pod; ns/gone is gone
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_cycle(case: Case) -> None:
    m = SchedulerMetrics()
    observer = CycleObserver(m, lambda: 100.0)
    with capture_logs() as logs:
        observer.cycle(last_cycle(case.plan), case.result, 0.25, 0.125, 3)
    (line,) = [e for e in logs if e["event"] == "cycle_summary"]
    assert line["log_level"] == case.level and line["in_flight"] == 3
    for (name, labels), value in case.samples.items():
        assert sample(m, name, **dict(labels)) == value, name


def test_without_metrics_a_cycle_is_only_logged() -> None:
    observer = CycleObserver(None, lambda: 100.0)
    assert observer.solver() is None  # the default solver: nothing to time
    with capture_logs() as logs:
        observer.cycle(last_cycle(CyclePlan(100.0, binds=(BIND,))), ApplyResult(), 0.1, 0.1, 0)
        observer.binds_taken(ApplyResult(bound=("ns/p",)))
    assert [e["event"] for e in logs] == ["cycle_summary"]


@pytest.mark.parametrize(("placed", "label"), [(True, "greedy"), (False, "unplaceable")])
def test_the_timed_solver_observes_each_solve_and_sums_them_per_cycle(
        placed: bool, label: str, monkeypatch: pytest.MonkeyPatch) -> None:
    m = SchedulerMetrics()
    observer = CycleObserver(m, lambda: 0.0)
    answer = (Placement("ns/p", ()) if placed
              else Unplaceable("ns/p", UnplaceableReason.NO_ELIGIBLE_NODES, ""))
    monkeypatch.setattr("scheduler.placement.solve", lambda *_: answer)
    solve = observer.solver()
    assert solve is not None
    snapshot = Snapshot(b.nodes("a", 1))
    for _ in range(3):
        assert solve(PENDING, snapshot, PlacementParams()) is answer
    assert sample(m, "gang_scheduler_solver_duration_seconds_count", solver=label) == 3
    assert observer.solve_s > 0
    observer.solver()  # the next cycle's: its own sum
    assert observer.solve_s == 0


@pytest.mark.parametrize(("result", "success", "failure"), [
    (ApplyResult(bound=("a", "b")), 2, 0),
    (ApplyResult(bound=("a",), failed={"b": "x", "c": "y"}), 1, 2),
    (ApplyResult(), 0, 0),
])
def test_binds_counted_by_outcome(result: ApplyResult, success: int, failure: int) -> None:
    m = SchedulerMetrics()
    CycleObserver(m, lambda: 0.0).binds_taken(result)
    assert sample(m, "gang_scheduler_binds_total", result="success") == success
    assert sample(m, "gang_scheduler_binds_total", result="failure") == failure


@pytest.mark.parametrize(("launched", "landed", "observed"),
                         [(10.0, 12.5, 2.5), (10.0, 9.0, 0.0)])
def test_a_landing_observes_the_bind_duration(launched: float, landed: float,
                                              observed: float) -> None:
    m = SchedulerMetrics()
    flight = Flight((BIND,), {}, {}, Future(), launched)
    CycleObserver(m, lambda: 0.0).landed(flight, ApplyResult(bound=("ns/p",)), landed)
    assert sample(m, "gang_scheduler_bind_duration_seconds_sum") == observed
    assert sample(m, "gang_scheduler_bind_duration_seconds_count") == 1


@pytest.mark.parametrize(("partial", "logged"), [
    ({"ns/p": PartlyBound(PODS * 2, True, 0.0)}, [2]),
    ({"ns/q": PartlyBound(PODS, True, 0.0)}, [])])
def test_a_completed_partial_gang_is_logged(partial: dict[str, PartlyBound],
                                            logged: list[int]) -> None:
    with capture_logs() as logs:
        CycleObserver(None, lambda: 0.0).partial_completed(BIND, partial)
    assert [e["bound"] for e in logs if e["event"] == "partial_gang_completed"] == logged


def test_gpu_seconds_accrue_up_to_every_scrape_and_not_across_a_forgotten_gap() -> None:
    clock = [100.0]
    m = SchedulerMetrics()
    observer = CycleObserver(m, lambda: clock[0])

    def scrape_at(t: float) -> float:
        clock[0] = t
        list(m.registry.collect())  # a scrape: charges up to now
        return sample(m, "gang_scheduler_allocated_gpu_seconds_total", queue="team",
                      namespace="ns", pool="a")

    cycle: Callable[[float], None] = lambda t: observer.cycle(  # noqa: E731
        last_cycle(CyclePlan(t)), ApplyResult(), 0.0, 0.0, 0)
    cycle(100.0)
    assert scrape_at(110.0) == 80.0  # 8 GPUs allocated for 10 s
    cycle(120.0)
    assert scrape_at(120.0) == 160.0
    observer.forget_accounting()  # a leadership gap: another replica charged it
    assert scrape_at(150.0) == 160.0
    cycle(150.0)
    assert scrape_at(155.0) == 200.0  # from the cycle after the gap only
    assert observer.accrual is not None and len(m._before_scrape.hooks) == 1  # made once
