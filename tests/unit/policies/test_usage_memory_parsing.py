"""The fair-share memory setting, ``spec.fairShare.usageHalfLifeSeconds`` of a SchedulerPolicy:
read, defaulted (off), refused with the field path and the reason, in policy files and in the
scheduler's config, and told by ``policy validate``."""

from __future__ import annotations

from typing import Any

import pytest

from policies import parsing
from policies.queues import PolicySet, QueueSet, SchedulerPolicy
from scheduler.cli.policy import summarise
from scheduler.run.config import ConfigError, SchedulerConfig

PATH = "spec.fairShare.usageHalfLifeSeconds"


def policy(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "SchedulerPolicy",
            "metadata": {"name": "p"}, "spec": spec}


@pytest.mark.parametrize(("spec", "half_life"), [
    ({}, 0.0),  # off by default: today's fair share
    ({"fairShare": {}}, 0.0),
    ({"fairShare": None}, 0.0),
    ({"fairShare": {"usageHalfLifeSeconds": 0}}, 0.0),  # 0: off
    ({"fairShare": {"usageHalfLifeSeconds": 604800}}, 604800.0),  # a week, Slurm's default
    ({"fairShare": {"usageHalfLifeSeconds": 3600.5}}, 3600.5),
    ({"preset": "fifo-gang", "fairShare": {"usageHalfLifeSeconds": 60}}, 60.0),
])
def test_read(spec: dict[str, Any], half_life: float) -> None:
    got, errors = parsing.parse_scheduler_policy(policy(spec))
    assert errors == [] and got is not None
    assert got.usage_half_life_seconds == half_life


@pytest.mark.parametrize(("fair_share", "path", "reason"), [
    ({"usageHalfLifeSeconds": -1}, PATH, "must be >= 0, got -1"),
    ({"usageHalfLifeSeconds": "7d"}, PATH, "must be a number, got '7d'"),
    ({"usageHalfLifeSeconds": True}, PATH, "must be a number, got True"),
    ({"usageHalfLifeSeconds": float("inf")}, PATH, "must be a finite number"),
    ({"usageHalfLifeSeconds": 1e12}, PATH, "must be at most"),
    ({"halfLife": 3600}, "spec.fairShare.halfLife", "unknown field (known: usageHalfLifeSeconds)"),
    ("on", "spec.fairShare", "must be a mapping, got str"),
])
def test_refused_with_path_and_reason(fair_share: Any, path: str, reason: str) -> None:
    got, errors = parsing.parse_scheduler_policy(policy({"fairShare": fair_share}))
    assert got is None
    assert [e.path for e in errors] == [path]
    assert reason in errors[0].reason


def test_fuzzed_like_every_field() -> None:
    assert PATH in parsing.POLICY_FIELDS


def test_the_scheduler_config_names_the_field() -> None:
    ok = SchedulerConfig(scheduler_policy={"fairShare": {"usageHalfLifeSeconds": 86400}})
    assert ok.policy().usage_half_life_seconds == 86400
    with pytest.raises(ConfigError, match=r"schedulerPolicy\.fairShare\.usageHalfLifeSeconds: "
                                          r"must be >= 0"):
        SchedulerConfig(scheduler_policy={"fairShare": {"usageHalfLifeSeconds": -5}})


def test_policy_validate_tells_it_only_when_on() -> None:
    on = summarise(PolicySet(QueueSet(), SchedulerPolicy(usage_half_life_seconds=2 * 86400)))
    assert "fair share remembers borrowed usage (half-life 2d00h)" in on.splitlines()[0]
    assert "remembers" not in summarise(PolicySet(QueueSet(), SchedulerPolicy()))
