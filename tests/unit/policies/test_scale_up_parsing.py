"""The scale-up setting, ``spec.scaleUp.pools`` of a SchedulerPolicy: read, off by default,
refused with the field path and the reason."""

from __future__ import annotations

from typing import Any

import pytest

from policies import parsing


def policy(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "SchedulerPolicy",
            "metadata": {"name": "p"}, "spec": spec}


@pytest.mark.parametrize(("spec", "pools"), [
    ({}, frozenset()),  # off by default: no gang asks the autoscaler
    ({"scaleUp": {}}, frozenset()),
    ({"scaleUp": {"pools": []}}, frozenset()),
    ({"scaleUp": {"pools": ["train", "a100"]}}, frozenset({"train", "a100"})),
])
def test_read(spec: dict[str, Any], pools: frozenset[str]) -> None:
    got, errors = parsing.parse_scheduler_policy(policy(spec))
    assert errors == [] and got is not None
    assert got.scale_up_pools == pools


@pytest.mark.parametrize(("scale_up", "path", "reason"), [
    ({"pools": "train"}, "spec.scaleUp.pools", "must be a list of pool names, got 'train'"),
    ({"pools": ["train", ""]}, "spec.scaleUp.pools", "must be a list of pool names"),
    ({"nodeGroups": ["x"]}, "spec.scaleUp.nodeGroups", "unknown field (known: pools)"),
    (["train"], "spec.scaleUp", "must be a mapping"),
])
def test_refused_naming_the_field(scale_up: Any, path: str, reason: str) -> None:
    got, errors = parsing.parse_scheduler_policy(policy({"scaleUp": scale_up}))
    assert got is None
    assert [e.path for e in errors] == [path]
    assert reason in errors[0].reason


def test_fuzzed_like_every_field() -> None:
    assert "spec.scaleUp.pools" in parsing.POLICY_FIELDS
