"""Queue and SchedulerPolicy parsing: every error with its field path, never an exception."""

from __future__ import annotations

from typing import Any

import pytest

from policies import parsing
from policies.queues import (
    Limits,
    OrderingMode,
    QueueingStrategy,
    ReclaimPolicy,
    SchedulerPolicy,
    WithinQueuePreemption,
)
from scheduler.model.resources import GPU, Resources


def queue_obj(name: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": name}, "spec": spec}


FULL = queue_obj(
    parent="research", weight=2, namespaces=["team-a", "ml-*"],
    quotas=[{"pool": "a100", "nominal": {GPU: 32, "cpu": "256", "memory": "2Ti"},
             "borrowingLimit": {GPU: 16}, "lendingLimit": {GPU: 0}}],
    preemption={"withinQueue": "Never", "reclaimFromOthers": "LowerPriority",
                "minRuntimeSeconds": 600},
    queueing={"strategy": "StrictFIFO", "backfill": False, "defaultRuntimeSeconds": 3600},
)


def test_full_queue_parses_into_canonical_units() -> None:
    queue, errors = parsing.parse_queue(FULL)
    assert errors == []
    assert queue is not None
    assert queue.parent == "research" and queue.weight == 2.0
    quota = queue.quota("a100")
    assert quota is not None
    assert quota.nominal == Resources({GPU: 32, "cpu": 256_000, "memory": 2 << 40})
    assert quota.borrowing_limit.limit(GPU) == 16
    # a zero limit is kept (it forbids lending), an absent one means "no limit"
    assert quota.lending_limit == Limits(((GPU, 0),))
    assert quota.lending_limit.limit("cpu") is None
    assert queue.preemption.within_queue is WithinQueuePreemption.NEVER
    assert queue.preemption.reclaim_from_others is ReclaimPolicy.LOWER_PRIORITY
    assert queue.queueing.strategy is QueueingStrategy.STRICT_FIFO
    assert queue.queueing.backfill is False
    assert queue.admits_namespace("ml-vision") and not queue.admits_namespace("team-b")


def test_defaults_are_documented_values() -> None:
    queue, errors = parsing.parse_queue(queue_obj(namespaces=["*"]))
    assert errors == [] and queue is not None
    assert queue.weight == 1.0 and queue.quotas == ()
    assert queue.preemption.within_queue is WithinQueuePreemption.LOWER_PRIORITY
    assert queue.preemption.reclaim_from_others is ReclaimPolicy.ANY
    assert queue.queueing.strategy is QueueingStrategy.BEST_EFFORT
    assert queue.queueing.default_runtime_seconds is None
    assert queue.admits_namespace("anything")


def test_empty_namespaces_admit_nobody() -> None:
    queue, _ = parsing.parse_queue(queue_obj())
    assert queue is not None and not queue.admits_namespace("team-a")


@pytest.mark.parametrize(("spec", "expected"), [
    ({"quotas": [{"pool": "a100", "nominal": {GPU: -1}}]},
     "team-a: spec.quotas[0].nominal.nvidia.com/gpu: must be >= 0, got -1"),
    ({"quotas": [{"pool": "a100", "nominal": {"cpu": "-2"}}]},
     "team-a: spec.quotas[0].nominal.cpu: must be >= 0, got '-2'"),
    ({"quotas": [{"pool": "a100", "nominal": {"memory": "lots"}}]},
     "team-a: spec.quotas[0].nominal.memory: must be a Kubernetes quantity"),
    ({"quotas": [{"nominal": {}}]}, "team-a: spec.quotas[0].pool: required"),
    ({"quotas": [{"pool": "a100"}]}, "team-a: spec.quotas[0].nominal: required"),
    ({"quotas": [{"pool": "a", "nominal": {}}, {"pool": "a", "nominal": {}}]},
     "team-a: spec.quotas[1].pool: duplicate pool 'a'"),
    ({"quotas": [{"pool": "a", "nominal": {}, "borrowingLimit": {GPU: 1}}]},
     "team-a: spec.quotas[0].borrowingLimit: only meaningful for a queue with spec.parent"),
    ({"parent": "p", "quotas": [{"pool": "a", "nominal": {GPU: 2}, "lendingLimit": {GPU: 3}}]},
     "team-a: spec.quotas[0].lendingLimit.nvidia.com/gpu: must be <= nominal (2), got 3"),
    ({"weight": 0}, "team-a: spec.weight: must be > 0, got 0"),
    ({"weight": "heavy"}, "team-a: spec.weight: must be a number, got 'heavy'"),
    ({"parent": "team-a"}, "team-a: spec.parent: a queue cannot be its own parent"),
    ({"namespaces": "team-a"}, "team-a: spec.namespaces: must be a list"),
    ({"preemption": {"withinQueue": "Always"}},
     "team-a: spec.preemption.withinQueue: must be one of Never | LowerPriority, got 'Always'"),
    ({"preemption": {"minRuntimeSeconds": -5}},
     "team-a: spec.preemption.minRuntimeSeconds: must be >= 0, got -5"),
    ({"queueing": {"strategy": "LIFO"}},
     "team-a: spec.queueing.strategy: must be one of StrictFIFO | BestEffort, got 'LIFO'"),
    ({"queueing": {"backfill": "yes"}},
     "team-a: spec.queueing.backfill: must be true or false, got 'yes'"),
    ({"quota": []}, "team-a: spec.quota: unknown field"),
])
def test_each_error_names_field_path_and_reason(spec: dict[str, Any], expected: str) -> None:
    queue, errors = parsing.parse_queue(queue_obj(**spec))
    assert queue is None
    assert any(str(e).startswith(expected) for e in errors), [str(e) for e in errors]


def test_all_errors_are_collected_not_just_the_first() -> None:
    obj = queue_obj(weight=-1, quotas=[{"pool": "a100", "nominal": {GPU: -1, "cpu": "x"}}],
                    queueing={"strategy": "LIFO"})
    obj["apiVersion"] = "v1"
    _, errors = parsing.parse_queue(obj)
    paths = {e.path for e in errors}
    assert {"apiVersion", "spec.weight", "spec.quotas[0].nominal.nvidia.com/gpu",
            "spec.quotas[0].nominal.cpu", "spec.queueing.strategy"} <= paths


@pytest.mark.parametrize("garbage", [None, 3, "text", [], {"kind": "Queue"},
                                     {"metadata": "x", "spec": []}])
def test_garbage_never_raises(garbage: Any) -> None:
    queue, errors = parsing.parse_queue(garbage)
    assert queue is None and errors


def test_scheduler_policy_preset_with_overrides() -> None:
    obj = {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "SchedulerPolicy",
           "metadata": {"name": "baseline"},
           "spec": {"preset": "fifo-gang", "backfill": True, "placement": {"cpsat": False}}}
    policy, errors = parsing.parse_scheduler_policy(obj)
    assert errors == [] and policy is not None
    assert policy.ordering is OrderingMode.FIFO and policy.preemption is False
    assert policy.backfill is True and policy.placement.use_cpsat is False


def test_scheduler_policy_errors() -> None:
    obj = {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "SchedulerPolicy",
           "metadata": {"name": "p"}, "spec": {"preset": "magic", "ordering": "Random"}}
    policy, errors = parsing.parse_scheduler_policy(obj)
    assert policy is None
    assert {e.path for e in errors} == {"spec.preset", "spec.ordering"}


def test_presets() -> None:
    assert SchedulerPolicy.preset("gang-scheduler") == SchedulerPolicy()
    fifo = SchedulerPolicy.preset("fifo-gang")
    assert (fifo.preemption, fifo.reservation, fifo.backfill) == (False, False, False)
    with pytest.raises(KeyError, match="known: fifo-gang"):
        SchedulerPolicy.preset("nope")
