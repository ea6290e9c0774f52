"""The mixed generator: deterministic per seed, each class shaped as its section says, strict
on bad specs; the shipped sample loads by name."""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter, defaultdict
from typing import Any

import pytest

from simulator import session
from simulator.loaders import load_trace
from simulator.loaders.mixed import generate, parse_mixed
from simulator.trace import TraceError, TraceJob

DAY, HOUR = 86400.0, 3600.0
SPEC: dict[str, Any] = {
    "format": "mixed",
    "seed": 5,
    "days": 3,
    "notebook": {"rate_per_hour": 6, "day_hours": [9, 17], "users": 7,
                 "duration": {"median": 1800, "sigma": 0.5}, "teams": {"a": 1, "b": 1}},
    "hpo": {"bursts_per_day": 4, "trials": {"min": 10, "max": 30},
            "trial_gpus": {1: 1, 2: 1}, "spread_minutes": 5, "owners": 2,
            "duration": {"median": 900, "sigma": 0.5}, "teams": {"search": 1}},
    "training": {"rate_per_hour": 1, "gang_gpus": {8: 1, 16: 1, 64: 1},
                 "duration": {"median": 7200, "sigma": 0.5}, "teams": {"a": 1, "b": 1},
                 "checkpoint_interval": 1800},
}


def _jobs(spec: dict[str, Any] = SPEC) -> tuple[TraceJob, ...]:
    return generate(parse_mixed(spec))


def _of(jobs: tuple[TraceJob, ...], job_class: str) -> list[TraceJob]:
    return [j for j in jobs if j.job_class == job_class]


def test_same_seed_same_jobs_another_seed_others() -> None:
    assert _jobs() == _jobs(copy.deepcopy(SPEC))
    assert _jobs() != _jobs({**SPEC, "seed": 6})


def test_every_job_has_its_class_and_all_three_are_present() -> None:
    jobs = _jobs()
    assert set(Counter(j.job_class for j in jobs)) == {"notebook", "hpo", "training"}
    assert list(jobs) == sorted(jobs, key=lambda j: (j.submit_time, j.job_id))
    assert all(j.submit_time < 3 * DAY for j in jobs)


def test_notebooks_are_one_gpu_interactive_daytime_from_many_users() -> None:
    notebooks = _of(_jobs(), "notebook")
    assert len(notebooks) > 50
    assert all(j.total_gpus == 1 and j.interactive for j in notebooks)
    assert all(9 * HOUR <= j.submit_time % DAY < 17 * HOUR for j in notebooks)
    users = {j.user for j in notebooks}
    assert len(users) == 7 and all(u.startswith("user-") for u in users)
    assert {j.queue for j in notebooks} == {"a", "b"}


def test_hpo_comes_in_bursts_of_alike_small_trials_from_one_owner() -> None:
    trials = _of(_jobs(), "hpo")
    assert all(not j.interactive and j.queue == "search" for j in trials)
    # A burst: trials within the 5-minute spread of the first, one owner, one size.
    bursts: list[list[TraceJob]] = []
    for job in trials:
        if bursts and job.submit_time - bursts[-1][0].submit_time < 300:
            bursts[-1].append(job)
        else:
            bursts.append([job])
    assert len(bursts) >= 4
    for burst in bursts:
        assert 10 <= len(burst) <= 30
        assert len({j.user for j in burst}) == 1
        assert len({j.total_gpus for j in burst}) == 1 and burst[0].total_gpus in (1, 2)


def test_training_is_large_gangs_of_eight_gpu_workers_that_checkpoint() -> None:
    training = _of(_jobs(), "training")
    assert training and all(j.total_gpus in (8, 16, 64) for j in training)
    assert all(r.gpus == 8 for j in training for r in j.roles)
    assert all(j.checkpoint_interval == 1800 and not j.interactive for j in training)


def test_one_class_section_changed_leaves_the_other_classes_alike() -> None:
    more_hpo = copy.deepcopy(SPEC)
    more_hpo["hpo"]["bursts_per_day"] = 9
    before, after = _jobs(), _jobs(more_hpo)
    for job_class in ("notebook", "training"):
        assert _of(before, job_class) == _of(after, job_class)
    assert _of(before, "hpo") != _of(after, "hpo")


def test_the_shipped_sample_loads_by_name_with_the_three_classes() -> None:
    jobs = load_trace("synthetic-mixed-sample")
    by_class: dict[str, set[str]] = defaultdict(set)
    for j in jobs:
        by_class[j.job_class].add(j.queue)
    assert by_class == {"notebook": {"vision", "nlp"}, "hpo": {"automl"},
                        "training": {"vision", "nlp"}}
    assert load_trace("synthetic-mixed-sample", seed=1) != jobs


@pytest.mark.parametrize(("change", "field"), [
    ({"format": "synthetic"}, "format"),
    ({"days": 0}, "days"),
    ({"extra": 1}, "extra"),
    ({"hpo": {**SPEC["hpo"], "trials": {"min": 5, "max": 2}}}, "hpo.trials.max"),
    ({"notebook": {**SPEC["notebook"], "day_hours": [18, 9]}}, "notebook.day_hours"),
    ({"training": {**SPEC["training"], "gang_gpus": {}}}, "training.gang_gpus"),
    ({"training": {**SPEC["training"], "duration": {"median": 10, "sigma": 0.5, "min": 20,
                                                    "max": 5}}}, "training.duration.max"),
])
def test_bad_specs_name_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(TraceError) as info:
        parse_mixed({**SPEC, **change}, "mix.yaml")
    assert info.value.column == field, str(info.value)


def test_batch_only_drops_the_interactive_tier_and_nothing_else() -> None:
    spec = session.SessionSpec(cluster="simulator/samples/mixed_cluster.yaml",
                               trace="synthetic-mixed-sample")
    tiered = session.load_inputs(spec).jobs
    batch = session.load_inputs(dataclasses.replace(spec, batch_only=True)).jobs
    assert any(j.interactive for j in tiered) and not any(j.interactive for j in batch)
    assert [dataclasses.replace(j, interactive=False) for j in tiered] == list(batch)
