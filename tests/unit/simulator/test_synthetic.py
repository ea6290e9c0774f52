"""The synthetic generator: deterministic per seed, faithful to its spec, strict on bad specs."""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from typing import Any

import pytest

from simulator.loaders.synthetic import generate, load_synthetic, parse_spec
from simulator.samples import sample_path
from simulator.trace import TraceError

SPEC: dict[str, Any] = {
    "seed": 1,
    "jobs": 4000,
    "arrivals": {"rate_per_hour": 120},
    "gang_gpus": {1: 50, 8: 30, 24: 20},
    "duration": {"median": 600, "sigma": 1.0, "min": 10, "max": 86400},
    "teams": {"a": 3, "b": 1},
    "priorities": {0: 1, 10: 1},
    "checkpoint": {"probability": 0.5, "interval": 300},
}


def test_same_seed_gives_identical_jobs() -> None:
    assert generate(parse_spec(SPEC)) == generate(parse_spec(dict(SPEC)))
    path = sample_path("synthetic-sample")
    assert load_synthetic(path) == load_synthetic(path)


def test_different_seed_gives_different_jobs() -> None:
    one = generate(parse_spec(SPEC))
    two = generate(parse_spec({**SPEC, "seed": 2}))
    assert [j.submit_time for j in one] != [j.submit_time for j in two]
    assert load_synthetic(sample_path("synthetic-sample"), seed=99) != load_synthetic(
        sample_path("synthetic-sample")
    )


def test_jobs_follow_the_spec_distributions() -> None:
    jobs = generate(parse_spec(SPEC))
    assert len(jobs) == 4000
    gaps = [b.submit_time - a.submit_time for a, b in itertools.pairwise(jobs)]
    assert statistics.mean(gaps) == pytest.approx(30.0, rel=0.05)  # 120 jobs/hour
    sizes = Counter(j.total_gpus for j in jobs)
    assert set(sizes) == {1, 8, 24}
    assert sizes[1] / len(jobs) == pytest.approx(0.5, abs=0.03)
    assert Counter(j.queue for j in jobs)["a"] / len(jobs) == pytest.approx(0.75, abs=0.03)
    durations = sorted(j.duration for j in jobs)
    assert statistics.median(durations) == pytest.approx(600, rel=0.1)
    assert durations[0] >= 10 and durations[-1] <= 86400
    assert {j.checkpoint_interval for j in jobs} == {None, 300.0}
    assert {j.priority for j in jobs} == {0, 10}
    big = next(j for j in jobs if j.total_gpus == 24)
    assert [(r.name, r.count, r.gpus) for r in big.roles] == [("worker", 3, 8)]


def test_horizon_stops_arrivals() -> None:
    spec = {k: v for k, v in SPEC.items() if k != "jobs"} | {"horizon_hours": 2}
    jobs = generate(parse_spec(spec))
    assert jobs and jobs[-1].submit_time <= 7200
    assert math.isclose(len(jobs), 240, rel_tol=0.25)


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        ({"duration": {"median": 600, "sigma": 0}}, "duration.sigma", "must be > 0"),
        ({"gang_gpus": {}}, "gang_gpus", "non-empty mapping"),
        ({"gang_gpus": {"big": 1}}, "gang_gpus.big", "key must be an integer"),
        ({"teams": {"a": -1}}, "teams.a", "weight must be a number >= 0"),
        ({"arrivals": {"rate_per_hour": "fast"}}, "arrivals.rate_per_hour", "must be a number"),
        ({"checkpoint": {"probability": 1.5, "interval": 5}}, "checkpoint.probability", "<= 1"),
        ({"checkpoint": {"probability": 0.5}}, "checkpoint.interval", "required"),
        ({"colour": "blue"}, "colour", "unknown field"),
        ({"jobs": 2.5}, "jobs", "must be an integer"),
    ],
)
def test_bad_spec_names_the_field(change: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(TraceError) as info:
        parse_spec({**SPEC, **change}, "spec.yaml")
    assert info.value.column == field
    assert reason in info.value.reason
    assert str(info.value).startswith(f"spec.yaml: {field}: ")
