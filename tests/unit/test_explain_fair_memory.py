"""`explain` with fair share with memory: the decision it re-runs starts from what the Queue
statuses say each queue is remembered for (as the running scheduler does), and a waiting gang's
report says what its queue is remembered for and which siblings, having borrowed less, go
ahead of it."""

from __future__ import annotations

from dataclasses import replace

from policies.queues import PolicySet, PoolQuota, Queue, QueueSet, SchedulerPolicy
from scheduler.cli.explain import explain_text
from scheduler.feed.cache import ClusterCache
from scheduler.model import Node, PodRequirements, Resources
from scheduler.model.resources import GPU
from scheduler.model.workloads import POD_GROUP_LABEL, QUEUE_LABEL, PodGroupInfo, PodInfo
from tests.unit.test_explain import Fixed

H = 3600.0


def setup(half_life: float) -> tuple[ClusterCache, Fixed]:
    """One 8-GPU node; queues a and b (no quota: all they run is borrowed from org) each
    wait with an 8-GPU gang, a's older."""
    cache = ClusterCache()
    cache.upsert_node(Node.build("n0", Resources.of(gpu=8, cpu=64000, pods=110),
                                 labels={"gangscheduler.io/pool": "p"}))
    for i, q in enumerate(("a", "b")):
        cache.upsert_group(PodGroupInfo("ns", q, min_member=1, labels={QUEUE_LABEL: q},
                                        creation_time=float(i)))
        cache.upsert_pod(PodInfo(uid=f"u{q}", namespace="ns", name=f"{q}-0",
                                 requirements=PodRequirements(Resources.of(gpu=8)),
                                 scheduler_name="gang-scheduler", creation_time=float(i),
                                 labels={POD_GROUP_LABEL: q}))
    org = Queue(name="org", quotas=(PoolQuota("p", Resources({GPU: 8}), frozenset({GPU})),))
    teams = [Queue(name=q, parent="org", namespaces=("ns",),
                   quotas=(PoolQuota("p", Resources({GPU: 0}), frozenset({GPU})),))
             for q in ("a", "b")]
    return cache, Fixed(PolicySet(QueueSet.of([org, *teams]),
                                  replace(SchedulerPolicy(), usage_half_life_seconds=half_life)))


def test_the_queue_that_borrowed_waits_and_is_told_why() -> None:
    cache, policies = setup(H)
    saved = {"a": (20 * H, 0.0)}  # 20 GPU-h, one half-life ago: 10 now
    text, found = explain_text("ns/a", cache, policies, H, saved)
    assert found and "pending:" in text, text
    assert ("fair share   a remembered for 10.0 GPU-h borrowed (half-life 1h00m); ahead of "
            "it while both borrow, having borrowed less: b 0.0") in text, text
    text, _ = explain_text("ns/b", cache, policies, H, saved)
    assert "would be bound in the next cycle" in text


def test_without_memory_or_without_a_status_the_older_gang_goes_first() -> None:
    cache, policies = setup(0.0)
    text, _ = explain_text("ns/a", cache, policies, H, {"a": (20 * H, 0.0)})
    assert "would be bound in the next cycle" in text and "fair share" not in text
    cache, policies = setup(H)
    text, _ = explain_text("ns/a", cache, policies, H)
    assert "would be bound in the next cycle" in text
    text, _ = explain_text("ns/b", cache, policies, H)
    assert "fair share   b remembered for 0.0 GPU-h borrowed (half-life 1h00m)" in text
