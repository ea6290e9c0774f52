"""`explain` answers from the same decide the scheduler runs, on a cache built in memory."""

from __future__ import annotations

from policies.queues import PolicySet, PoolQuota, Queue, QueueSet
from scheduler.cli.explain import describe_estimate, explain_text
from scheduler.feed.cache import ClusterCache
from scheduler.model import Node, PodRequirements, Resources
from scheduler.model.resources import GPU
from scheduler.model.workloads import POD_GROUP_LABEL, QUEUE_LABEL, PodGroupInfo, PodInfo


class Fixed:
    def __init__(self, policies: PolicySet) -> None:
        self.policies = policies

    def current(self) -> PolicySet:
        return self.policies


def setup(gpus_per_pod: int, pods: int, quota: int) -> tuple[ClusterCache, Fixed]:
    cache = ClusterCache()
    for i in range(2):
        cache.upsert_node(Node.build(f"n{i}", Resources.of(gpu=8, cpu=64000, pods=110),
                                     labels={"gangscheduler.io/pool": "a100"}))
    cache.upsert_group(PodGroupInfo("ns", "g", min_member=pods, labels={QUEUE_LABEL: "q"}))
    for i in range(pods):
        cache.upsert_pod(PodInfo(uid=f"u{i}", namespace="ns", name=f"g-{i}",
                                 requirements=PodRequirements(Resources.of(gpu=gpus_per_pod)),
                                 scheduler_name="gang-scheduler",
                                 labels={POD_GROUP_LABEL: "g"}))
    queue = Queue(name="q", namespaces=("ns",), quotas=(PoolQuota(
        pool="a100", nominal=Resources({GPU: quota}), covered=frozenset({GPU})),))
    return cache, Fixed(PolicySet(QueueSet.of([queue])))


def test_explains_a_quota_wait() -> None:
    cache, policies = setup(8, 2, quota=8)
    text, found = explain_text("ns/g", cache, policies, now=0.0)
    assert found
    assert "queue        q" in text
    assert "pending: Quota" in text
    assert "position     1 of 1" in text


def test_says_when_it_would_bind() -> None:
    cache, policies = setup(4, 2, quota=16)
    text, found = explain_text("ns/g", cache, policies, now=0.0)
    assert found and "would be bound in the next cycle" in text


def test_unknown_gang() -> None:
    cache, policies = setup(4, 2, quota=16)
    text, found = explain_text("ns/other", cache, policies, now=0.0)
    assert not found and "not found" in text


def test_says_a_field_it_does_not_evaluate_is_why_the_gang_is_refused() -> None:
    from dataclasses import replace

    from scheduler.model.constraints import PodConstraints

    cache, policies = setup(4, 2, quota=16)
    for pod in cache.pods():
        refused = replace(pod.requirements, constraints=PodConstraints(unsupported=(
            "spec.resourceClaims: Dynamic Resource Allocation is not supported",)))
        cache.upsert_pod(replace(pod, requirements=refused))
    text, found = explain_text("ns/g", cache, policies, now=0.0)
    assert found and "pending: Unsupported" in text
    assert "spec.resourceClaims: Dynamic Resource Allocation is not supported" in text


def test_the_estimate_is_a_time_and_says_when_it_was_made() -> None:
    assert describe_estimate(1_714_568_400.0, now=1_714_564_800.0) == \
        "estimated 2024-05-01T13:00:00Z (in 1h00m)"
    assert describe_estimate(1_714_568_400.0, now=1_714_568_500.0,
                             made=1_714_564_800.0) == (
        "estimated 2024-05-01T13:00:00Z (in 0s), estimated at 2024-05-01T12:00:00Z")


def test_a_running_gang_being_evicted_says_its_members_terminate() -> None:
    """Issue 33: just after a preemption ``explain`` said only "running"."""
    from dataclasses import replace

    cache, policies = setup(4, 2, quota=16)
    for i, pod in enumerate(sorted(cache.pods(), key=lambda p: p.name)):
        cache.upsert_pod(replace(pod, node_name=f"n{i}", terminating=True,
                                 disruption="PreemptionByScheduler"))
    text, found = explain_text("ns/g", cache, policies, now=0.0)
    assert found and "running; members terminating (evicted, preempted or deleted)" in text
