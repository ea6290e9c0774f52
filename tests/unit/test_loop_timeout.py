"""A gang past its PodGroup's scheduleTimeoutSeconds leaves the cycle and is given up: a plan
entry (``GiveUp``) with the gang's pods, which the actuator marks."""

from __future__ import annotations

from policies.queues import PolicySet, PoolQuota, Queue, QueueSet
from scheduler.cache import ClusterCache
from scheduler.loop import ApplyResult, Scheduler
from scheduler.model import Node, PodRequirements, Resources
from scheduler.model.workloads import POD_GROUP_LABEL, QUEUE_LABEL, PodGroupInfo, PodInfo
from scheduler.plan import CyclePlan
from scheduler.resources import GPU


class Recorder:
    def __init__(self) -> None:
        self.plans: list[CyclePlan] = []

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult:
        self.plans.append(plan)
        return ApplyResult()

    @property
    def given_up(self) -> list[dict[str, str]]:
        return [{g.gang_id: g.message for g in p.give_ups} for p in self.plans if p.give_ups]


def scheduler_with_big_gang(timeout: int | None) -> tuple[Scheduler, Recorder, list[float]]:
    cache = ClusterCache()
    cache.upsert_node(Node.build("n0", Resources.of(gpu=4, cpu=64000, pods=110),
                                 labels={"gangscheduler.io/pool": "p"}))
    cache.upsert_group(PodGroupInfo("ns", "big", min_member=2, creation_time=100.0,
                                    schedule_timeout_seconds=timeout, labels={QUEUE_LABEL: "q"}))
    for i in range(2):
        cache.upsert_pod(PodInfo(uid=f"u{i}", namespace="ns", name=f"big-{i}",
                                 requirements=PodRequirements(Resources.of(gpu=4)),
                                 scheduler_name="gang-scheduler", creation_time=100.0,
                                 labels={POD_GROUP_LABEL: "big"}))
    queue = Queue(name="q", namespaces=("ns",), quotas=(PoolQuota(
        pool="p", nominal=Resources({GPU: 100}), covered=frozenset({GPU})),))

    class Fixed:
        def current(self) -> PolicySet:
            return PolicySet(QueueSet.of([queue]))

    now = [101.0]
    rec = Recorder()
    return Scheduler(cache, Fixed(), lambda: now[0], rec), rec, now


def test_before_the_deadline_the_gang_is_decided() -> None:
    sched, rec, _ = scheduler_with_big_gang(timeout=10)
    plan = sched.run_once()
    assert "ns/big" in plan.pending
    assert rec.given_up == []


def test_after_the_deadline_it_is_given_up_and_not_decided() -> None:
    sched, rec, now = scheduler_with_big_gang(timeout=10)
    now[0] = 111.0
    plan = sched.run_once()
    assert "ns/big" not in plan.pending and not plan.binds
    assert list(rec.given_up[0]) == ["ns/big"]
    assert "scheduleTimeoutSeconds (10s)" in rec.given_up[0]["ns/big"]
    (give_up,) = plan.give_ups
    assert [p.name for p in give_up.members.pods] == ["big-0", "big-1"]
    assert give_up.members.group_uid is not None  # its PodGroup is marked failed


def test_without_a_timeout_it_waits_forever() -> None:
    sched, rec, now = scheduler_with_big_gang(timeout=None)
    now[0] = 1e9
    assert "ns/big" in sched.run_once().pending
    assert rec.given_up == []
