"""A scrape taken while the loop updates a labelled gauge sees every series that is in both
the old and the new values: the HTTP server's thread scrapes while the loop's thread writes.

The flake check at da5d3d5 caught the old update (clear, then refill) in the e2e metrics test:
one scrape read ``gang_scheduler_fair_share`` of a queue as absent. Here the scrape is taken
deterministically, from inside the update, at every label set it writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import Gauge

from scheduler.run.metrics import SchedulerMetrics

Series = set[tuple[str, tuple[tuple[str, str], ...]]]


def series(metrics: SchedulerMetrics, name: str) -> Series:
    return {(s.name, tuple(sorted(s.labels.items())))
            for family in metrics.registry.collect() for s in family.samples if s.name == name}


def scrape_at_each_write(metrics: SchedulerMetrics, gauge: Gauge, name: str,
                         seen: list[Series], monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every ``gauge.labels(...)`` call first record what a scrape would show."""
    original: Callable[..., Any] = gauge.labels

    def labels(*values: str) -> Any:
        seen.append(series(metrics, name))
        return original(*values)

    monkeypatch.setattr(gauge, "labels", labels)


@pytest.mark.parametrize(("before", "after"), [
    ({"a": 0.5, "b": 0.5}, {"a": 0.25, "b": 0.75}),  # same queues, new shares
    ({"a": 1.0, "b": 1.0, "c": 1.0}, {"b": 1.0, "c": 0.5, "d": 0.5}),  # one gone, one new
    ({}, {"a": 1.0}),
])
def test_a_scrape_mid_update_never_misses_a_series_that_stays(
        before: dict[str, float], after: dict[str, float],
        monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = SchedulerMetrics()
    metrics.set_shares(before, before)
    name = "gang_scheduler_fair_share"
    seen: list[Series] = []
    scrape_at_each_write(metrics, metrics.fair_share, name, seen, monkeypatch)
    metrics.set_shares(after, after)
    staying = {(name, (("queue", q),)) for q in before.keys() & after.keys()}
    assert seen, "the update wrote no label set"
    for scrape in seen:
        assert staying <= scrape, f"a scrape mid-update missed {sorted(staying - scrape)}"
    assert series(metrics, name) == {(name, (("queue", q),)) for q in after}
    for q, v in after.items():
        assert metrics.registry.get_sample_value(name, {"queue": q}) == v


def test_label_sets_that_disappeared_are_dropped_and_may_come_back() -> None:
    metrics = SchedulerMetrics()
    metrics.set_pending({("q1", "Quota"): 2, ("q2", "WaitingForMembers"): 1})
    metrics.set_pending({("q2", "WaitingForMembers"): 3})
    assert metrics.registry.get_sample_value(
        "gang_scheduler_pending_gangs", {"queue": "q1", "reason": "Quota"}) is None
    metrics.set_pending({("q1", "Quota"): 1})
    samples = {tuple(sorted(s.labels.items())): s.value
               for family in metrics.registry.collect() for s in family.samples
               if s.name == "gang_scheduler_pending_gangs"}
    assert samples == {(("queue", "q1"), ("reason", "Quota")): 1.0}
