"""``load_trace``'s options mean the same for every format (``simulate --limit / --time-scale
/ --seed`` pass them through whatever the trace is): a format that ignored one, or a loader
that refused one with a TypeError, would make the CLI lie or crash."""

from __future__ import annotations

from typing import Any

import pytest

from simulator.loaders import load_trace

SAMPLES = ["philly-sample", "openb-sample", "synthetic-sample", "synthetic-two-pools-sample",
           "generic-sample"]


@pytest.mark.parametrize("name", SAMPLES)
def test_limit_keeps_the_first_jobs(name: str) -> None:
    full = load_trace(name)
    assert load_trace(name, limit=5) == full[:5]
    assert load_trace(name, limit=0) == ()


@pytest.mark.parametrize("name", SAMPLES)
def test_time_scale_multiplies_submit_times_and_nothing_else(name: str) -> None:
    full = load_trace(name, limit=50)
    half = load_trace(name, limit=50, time_scale=0.5)
    assert [j.job_id for j in half] == [j.job_id for j in full]
    assert [j.submit_time for j in half] == pytest.approx([j.submit_time * 0.5 for j in full])
    assert [(j.duration, j.roles) for j in half] == [(j.duration, j.roles) for j in full]


def test_seed_draws_another_synthetic_trace_and_the_spec_seed_is_the_default() -> None:
    spec_seed = load_trace("synthetic-sample", limit=100)
    assert load_trace("synthetic-sample", limit=100, seed=7) == spec_seed  # the file says 7
    other = load_trace("synthetic-sample", limit=100, seed=8)
    assert [j.submit_time for j in other] != [j.submit_time for j in spec_seed]
    assert load_trace("synthetic-sample", limit=100, seed=8) == other  # deterministic


def test_seed_does_not_change_a_recorded_trace() -> None:
    assert load_trace("philly-sample", limit=20, seed=3) == load_trace("philly-sample", limit=20)


@pytest.mark.parametrize(("option", "value", "message"), [
    ("time_scale", 0.0, "time_scale must be a finite number > 0, got 0.0"),
    ("time_scale", float("inf"), "time_scale must be a finite number > 0, got inf"),
    ("limit", -1, "limit must be >= 0, got -1"),
])
def test_bad_options_are_refused_naming_them(option: str, value: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        options: dict[str, Any] = {option: value}
        load_trace("generic-sample", **options)
