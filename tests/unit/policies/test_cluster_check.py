"""A queue's quotas against the pools the cluster has: unknown pools and quotas larger than
their pool are named, field and reason; fitting quotas say nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policies.cluster_check import quota_warnings
from policies.queues import PoolQuota
from scheduler.model.resources import Resources
from tests.unit.policies.builders import queue

CLUSTER = {"a100": Resources.of(gpu=32, cpu=256_000), "h100": Resources.of(gpu=16)}


@pytest.mark.parametrize(("quota", "expected"), [
    ({"a100": 32}, ()),
    ({"a100": 0}, ()),
    ({"h100": 64}, ("spec.quotas[pool=h100].nominal.nvidia.com/gpu: 64 is more than pool "
                    "'h100' has (16); at most that is guaranteed",)),
    ({"a10O": 8}, ("spec.quotas[pool=a10O].pool: no node carries pool 'a10O' (pools with nodes: "
                   "a100, h100); this quota guarantees nothing until it does",)),
])
def test_quota_warnings(quota: dict[str, int], expected: tuple[str, ...]) -> None:
    assert quota_warnings(queue("q", quota=quota), CLUSTER) == expected


def test_every_finding_of_a_queue_is_listed() -> None:
    q = queue("q", quota={"ghost": 1, "h100": 17})
    found = quota_warnings(q, CLUSTER)
    assert [w.split(":")[0] for w in found] == ["spec.quotas[pool=ghost].pool",
                                                "spec.quotas[pool=h100].nominal.nvidia.com/gpu"]
    assert quota_warnings(q, {})[0].endswith("(pools with nodes: none); this quota guarantees "
                                             "nothing until it does")


def test_other_resources_are_named_in_the_units_people_write() -> None:
    cpu = PoolQuota("a100", Resources({"cpu": 300_500}), frozenset({"cpu"}))
    q = replace(queue("q"), quotas=(cpu,))
    assert quota_warnings(q, CLUSTER) == (
        "spec.quotas[pool=a100].nominal.cpu: 300500m is more than pool 'a100' has (256); "
        "at most that is guaranteed",)
