"""The loop's memory of finished runs for the queues' budgets (``run.guard_usage``)."""

from __future__ import annotations

from dataclasses import replace

from policies.guards import LONGEST_PERIOD_SECONDS, Budget, Guards, Period, Run, Usage
from scheduler.decide.plan import Bind
from scheduler.placement.types import Placement
from scheduler.run.guard_usage import GuardUsage
from tests.unit.policies.builders import gang, policies, queue, running

BUDGETED = policies(replace(queue("q"), guards=Guards(budget=Budget(10, Period.WEEK))))


def test_a_run_seen_running_and_then_gone_is_finished_when_it_went() -> None:
    store = GuardUsage()
    g = running(gang("g", gpus=8), {"a-0000": 1}, start=100.0)
    assert store.of({"ns/g": g}, BUDGETED, 200.0) == Usage()
    assert store.of({}, BUDGETED, 300.0) == Usage.of([Run("q", 8, 100.0, 300.0)])


def test_a_run_bound_and_ended_between_cycles_is_counted_from_its_bind() -> None:
    store = GuardUsage()
    store.of({}, BUDGETED, 0.0)
    store.bound([Bind("ns/g", "q", Placement("ns/g", ()))], [gang("g", gpus=4)], 10.0)
    assert store.of({}, BUDGETED, 500.0) == Usage.of([Run("q", 4, 10.0, 500.0)])


def test_a_bound_run_takes_its_start_from_its_pods_once_seen() -> None:
    store = GuardUsage()
    store.of({}, BUDGETED, 0.0)
    store.bound([Bind("ns/g", "q", Placement("ns/g", ()))], [gang("g", gpus=4)], 10.0)
    store.of({"ns/g": running(gang("g", gpus=4), {"a-0000": 1}, start=12.0)}, BUDGETED, 20.0)
    assert store.of({}, BUDGETED, 30.0) == Usage.of([Run("q", 4, 12.0, 30.0)])


def test_recreated_pods_under_the_same_id_are_a_new_run() -> None:
    store = GuardUsage()
    store.of({"ns/g": running(gang("g", gpus=2), {"a-0000": 1}, start=0.0)}, BUDGETED, 5.0)
    usage = store.of({"ns/g": running(gang("g", gpus=2), {"a-0000": 1}, start=50.0)},
                     BUDGETED, 60.0)
    assert usage == Usage.of([Run("q", 2, 0.0, 50.0)])


def test_old_runs_are_forgotten_and_nothing_is_kept_without_a_budget() -> None:
    store = GuardUsage()
    store.of({"ns/g": running(gang("g"), {"a-0000": 1}, start=0.0)}, BUDGETED, 1.0)
    store.of({}, BUDGETED, 10.0)
    later = 10.0 + LONGEST_PERIOD_SECONDS + 1
    assert store.of({}, BUDGETED, later) == Usage()
    store.of({"ns/g": running(gang("g"), {"a-0000": 1}, start=0.0)}, BUDGETED, 1.0)
    assert store.of({}, policies(queue("q")), 10.0) == Usage()
    assert store.of({}, BUDGETED, 11.0) == Usage()  # the budget-less cycle forgot it
