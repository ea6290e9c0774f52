"""The runaway guards' rules (``policies.guards``) and their parsing, table-driven."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from policies.guards import (
    Budget,
    Guards,
    Period,
    Run,
    Usage,
    gpu_hours,
    over_budget,
    overrun_message,
    pending_cap,
    period_bounds,
    running_cap,
    runtime_limit,
)
from policies.parsing import QUEUE_FIELDS, parse_queue
from policies.validation import PolicyStore

DAY = 86400.0


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("period", "now", "start", "end"), [
    (Period.DAY, "2026-12-02T13:00:00", "2026-12-02T00:00:00", "2026-12-03T00:00:00"),
    # Week: Monday 00:00 UTC to the next Monday (2026-12-02 is a Wednesday).
    (Period.WEEK, "2026-12-02T13:00:00", "2026-11-30T00:00:00", "2026-12-07T00:00:00"),
    (Period.WEEK, "2026-11-30T00:00:00", "2026-11-30T00:00:00", "2026-12-07T00:00:00"),
    (Period.WEEK, "2026-12-06T23:59:59", "2026-11-30T00:00:00", "2026-12-07T00:00:00"),
    (Period.MONTH, "2026-12-31T23:00:00", "2026-12-01T00:00:00", "2027-01-01T00:00:00"),
    (Period.MONTH, "2027-02-10T00:00:00", "2027-02-01T00:00:00", "2027-03-01T00:00:00"),
])
def test_calendar_periods_in_utc(period: Period, now: str, start: str, end: str) -> None:
    assert period_bounds(period, ts(now)) == (ts(start), ts(end))


@pytest.mark.parametrize(("ended", "going", "hours"), [
    ((), (), 0.0),
    ((Run("q", 8, 0.0, 3600.0),), (), 8.0),  # ended within the period
    ((Run("q", 8, -3600.0, 3600.0),), (), 8.0),  # began the day before: only its share
    ((), (Run("q", 4, 0.0),), 8.0),  # still running at now = 2h
    ((), (Run("q", 4, -3600.0),), 8.0),  # running since before the period: its share
    ((Run("other", 8, 0.0, 3600.0),), (Run("other", 8, 0.0),), 0.0),  # another queue's
    ((Run("q", 8, -7200.0, -3600.0),), (), 0.0),  # ended before the period
    ((Run("q", 1, -5 * DAY, 3600.0),), (), 1.0),  # days long, split at each midnight
])
def test_gpu_hours_count_only_the_period(ended: tuple[Run, ...], going: tuple[Run, ...],
                                         hours: float) -> None:
    # The period starts at a UTC midnight (epoch 0); now is 02:00.
    assert gpu_hours(Usage.of(ended), going, frozenset({"q"}), since=0.0, now=7200.0) == hours


def test_usage_is_kept_per_utc_day() -> None:
    usage = Usage.of([Run("q", 2, DAY - 3600.0, DAY + 1800.0)])
    assert usage.finished == {"q": {0.0: 2.0, DAY: 1.0}}


@pytest.mark.parametrize(("path", "own", "expected"), [
    ((), None, None),
    ((("q", Guards(max_runtime_seconds=3600)),), None, (3600, "queue q")),
    # The annotation may ask for less...
    ((("q", Guards(max_runtime_seconds=3600)),), 600.0,
     (600.0, "its gangscheduler.io/max-runtime annotation")),
    # ...never more: the queue caps it.
    ((("q", Guards(max_runtime_seconds=3600)),), 7200.0, (3600, "queue q")),
    ((), 600.0, (600.0, "its gangscheduler.io/max-runtime annotation")),
    # A parent's limit covers its children.
    ((("org", Guards(max_runtime_seconds=600)), ("q", Guards(max_runtime_seconds=3600))),
     None, (600, "queue org")),
])
def test_runtime_limit(path: Any, own: float | None, expected: Any) -> None:
    assert runtime_limit(path, own) == expected


def test_overrun_message_names_the_policy() -> None:
    assert overrun_message((43200.0, "queue team-a"), 43380.0) == (
        "preempted: queue team-a allows 12h00m of runtime; this gang ran 12h03m")


def test_over_budget_says_use_and_reset() -> None:
    g = Guards(budget=Budget(100, Period.WEEK))
    now = ts("2026-12-02T13:00:00")
    assert over_budget("team-a", g, 99.9, now) is None
    assert over_budget("team-a", g, 104.2, now) == (
        "queue team-a reached its GPU-hour budget for this week: 104 of 100 GPU-h; "
        "resets Monday 07 Dec 00:00 UTC")
    assert over_budget("team-a", Guards(), 1e9, now) is None


@pytest.mark.parametrize(("cap", "running", "held"), [
    (None, 100, False), (2, 1, False), (2, 2, True), (2, 3, True)])
def test_running_cap(cap: int | None, running: int, held: bool) -> None:
    why = running_cap("q", Guards(max_running_gangs=cap), running)
    assert (why is not None) == held
    if why:
        assert "maxRunningGangs 2" in why


@pytest.mark.parametrize(("cap", "place", "held"), [
    (None, 1000, False), (3, 3, False), (3, 4, True)])
def test_pending_cap(cap: int | None, place: int, held: bool) -> None:
    why = pending_cap("q", Guards(max_pending_gangs=cap), place)
    assert (why is not None) == held
    if why:
        assert "maxPendingGangs" in why


def _queue(guards: Any) -> dict[str, Any]:
    return {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "team-a"}, "spec": {"namespaces": ["*"], "guards": guards}}


def test_parse_guards() -> None:
    q, errors = parse_queue(_queue({"maxRuntimeSeconds": 43200,
                                    "budget": {"gpuHours": 100, "period": "Week"},
                                    "maxRunningGangs": 4, "maxPendingGangs": 50}))
    assert errors == [] and q is not None
    assert q.guards == Guards(43200.0, Budget(100.0, Period.WEEK), 4, 50)
    none, errors = parse_queue(_queue(None))
    assert errors == [] and none is not None and not none.guards


@pytest.mark.parametrize(("guards", "path", "reason"), [
    ({"maxRuntimeSeconds": 0}, "spec.guards.maxRuntimeSeconds", "must be > 0"),
    ({"maxRuntimeSeconds": "12h"}, "spec.guards.maxRuntimeSeconds", "must be a number"),
    ({"maxRuntimeSeconds": 1e12}, "spec.guards.maxRuntimeSeconds", "at most"),
    ({"budget": {"gpuHours": 10}}, "spec.guards.budget.period", "required"),
    ({"budget": {"period": "Week"}}, "spec.guards.budget.gpuHours", "required"),
    ({"budget": {"gpuHours": -1, "period": "Week"}}, "spec.guards.budget.gpuHours", ">= 0"),
    ({"budget": {"gpuHours": 1, "period": "Year"}}, "spec.guards.budget.period",
     "Day | Week | Month"),
    ({"budget": 5}, "spec.guards.budget", "must be a mapping"),
    ({"maxRunningGangs": 0}, "spec.guards.maxRunningGangs", "whole number from 1"),
    ({"maxPendingGangs": 2.5}, "spec.guards.maxPendingGangs", "whole number from 1"),
    ({"maxPendingGangs": True}, "spec.guards.maxPendingGangs", "whole number from 1"),
    ({"maxRuntime": 5}, "spec.guards.maxRuntime", "unknown field"),
    ([], "spec.guards", "must be a mapping"),
])
def test_bad_guards_name_the_field(guards: Any, path: str, reason: str) -> None:
    q, errors = parse_queue(_queue(guards))
    assert q is None
    assert any(e.path == path and reason in e.reason for e in errors), errors


def test_guard_fields_are_fuzzed() -> None:
    assert {"spec.guards.maxRuntimeSeconds", "spec.guards.budget.gpuHours",
            "spec.guards.budget.period", "spec.guards.maxRunningGangs",
            "spec.guards.maxPendingGangs"} <= set(QUEUE_FIELDS)


def test_an_invalid_guard_update_keeps_the_last_valid_version_in_force() -> None:
    """The live path (``PolicyStore``, behind ``Valid=False``): the edit is refused with the
    field named, and the cap last accepted stays."""
    good = PolicyStore().apply(_queue({"maxRunningGangs": 2}))
    assert good.accepted
    bad = good.store.apply(_queue({"maxRunningGangs": 0}))
    assert not bad.accepted
    assert [e.path for e in bad.errors] == ["spec.guards.maxRunningGangs"]
    kept = bad.store.policies.queues.get("team-a")
    assert kept is not None and kept.guards.max_running_gangs == 2
