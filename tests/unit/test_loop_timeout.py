"""A PodGroup's scheduleTimeoutSeconds bounds how long members already placed keep their nodes
waiting for the rest, as under the coscheduling plugin; it never gives a gang up for waiting.

Through the loop (``Scheduler.run_once``), which the live scheduler and the simulator share:
a gang queued past its timeout is still decided and binds once there is room; a partly bound
gang whose started members waited past the timeout is rolled back (its bound members deleted)
and backed off, then tried again whole.
"""

from __future__ import annotations

from policies.queues import PolicySet, PoolQuota, Queue, QueueSet
from scheduler.decide.plan import CyclePlan, RollbackCause
from scheduler.feed.cache import ClusterCache
from scheduler.model import Node, PodRequirements, Resources
from scheduler.model.resources import GPU
from scheduler.model.workloads import (
    POD_GROUP_LABEL,
    QUEUE_LABEL,
    PodGroupInfo,
    PodInfo,
    PodPhase,
)
from scheduler.run.loop import ApplyResult, Scheduler

POOL = {"gangscheduler.io/pool": "p"}


class Recorder:
    def __init__(self) -> None:
        self.plans: list[CyclePlan] = []

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult:
        self.plans.append(plan)
        return ApplyResult(bound=tuple(b.gang_id for b in plan.binds))


def node(name: str) -> Node:
    return Node.build(name, Resources.of(gpu=4, cpu=64000, pods=110), labels=POOL)


def pod(i: int, **fields: object) -> PodInfo:
    return PodInfo(uid=f"u{i}", namespace="ns", name=f"big-{i}",
                   requirements=PodRequirements(Resources.of(gpu=4)),
                   scheduler_name="gang-scheduler", creation_time=100.0,
                   labels={POD_GROUP_LABEL: "big"}, **fields)  # type: ignore[arg-type]


def scheduler(timeout: int | None, nodes: int = 1, partly_bound: bool = False,
              repair_grace: float = 60.0) -> tuple[Scheduler, ClusterCache, list[float]]:
    """PodGroup ``big`` (2 pods of 4 GPUs, created at 100) on *nodes* 4-GPU nodes; with
    *partly_bound*, big-0 was bound to n0 and started at 101, big-1 waits."""
    cache = ClusterCache()
    for i in range(nodes):
        cache.upsert_node(node(f"n{i}"))
    cache.upsert_group(PodGroupInfo("ns", "big", uid="pg", min_member=2, creation_time=100.0,
                                    schedule_timeout_seconds=timeout,
                                    labels={QUEUE_LABEL: "q"}))
    cache.upsert_pod(pod(0, node_name="n0", phase=PodPhase.RUNNING, started_at=101.0)
                     if partly_bound else pod(0))
    cache.upsert_pod(pod(1))
    queue = Queue(name="q", namespaces=("ns",), quotas=(PoolQuota(
        pool="p", nominal=Resources({GPU: 100}), covered=frozenset({GPU})),))

    class Fixed:
        def current(self) -> PolicySet:
            return PolicySet(QueueSet.of([queue]))

    now = [102.0]
    return Scheduler(cache, Fixed(), lambda: now[0], Recorder(), backoff_initial=5.0,
                     repair_grace=repair_grace), cache, now


def test_a_gang_queued_long_past_its_timeout_is_still_decided_and_binds_once_it_fits() -> None:
    sched, cache, now = scheduler(timeout=10)
    now[0] = 100.0 + 3600  # an hour in line, the timeout 10 s
    plan = sched.run_once()
    assert "ns/big" in plan.pending and not plan.rollbacks
    cache.upsert_node(node("n1"))
    now[0] += 1
    assert [b.gang_id for b in sched.run_once().binds] == ["ns/big"]


def test_a_partly_bound_gang_is_released_after_its_timeout_then_backed_off() -> None:
    sched, _, now = scheduler(timeout=10, partly_bound=True)  # no room for big-1
    plan = sched.run_once()  # first seen partly bound at 102: within its timeout, kept
    assert plan.rollbacks == () and "ns/big" in plan.pending
    now[0] = 111.0
    assert sched.run_once().rollbacks == ()  # 9 s
    now[0] = 112.0
    (rollback,) = sched.run_once().rollbacks  # 10 s: released, not given up
    assert rollback.cause is RollbackCause.TIMED_OUT
    assert [p.name for p in rollback.pods] == ["big-0"]
    assert rollback.reason.startswith("its bound members waited 10s")
    assert sched.backing_off(112.0) == {"ns/big": 117.0}  # tried again whole after it


def test_without_a_timeout_the_repair_grace_bounds_the_wait() -> None:
    sched, _, now = scheduler(timeout=None, partly_bound=True, repair_grace=30.0)
    sched.run_once()
    now[0] = 131.0
    assert sched.run_once().rollbacks == ()
    now[0] = 132.0
    (rollback,) = sched.run_once().rollbacks
    assert rollback.cause is not RollbackCause.TIMED_OUT and sched.backing_off(132.0) == {}
