"""A bind fenced midway (the replica's Lease renewal came late between two members) leaves
the members bound so far to the repair: the next cycle binds only the rest, without a backoff
and without rolling anything back.

A cache with a pending gang of two 4-GPU members and room for both; the fake actuator fences
the gang's first bind after its first member, as ``Binder`` reports it (``fenced``, ``left``).
"""

from __future__ import annotations

from scheduler.decide.plan import CyclePlan
from scheduler.feed.cache import ClusterCache
from scheduler.model import Node, Resources
from scheduler.model.workloads import QUEUE_LABEL, PodGroupInfo
from scheduler.run.loop import ApplyResult, Scheduler
from tests.unit.test_loop_repair import Fixed, pod


class FencedOnce:
    """The first bind of the gang is fenced after its first member; later ones succeed."""

    def __init__(self) -> None:
        self.plans: list[CyclePlan] = []

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult:
        self.plans.append(plan)
        if len(self.plans) > 1:
            return ApplyResult(bound=tuple(b.gang_id for b in plan.binds))
        (b,) = plan.binds
        return ApplyResult(failed={b.gang_id: "fenced"}, fenced=(b.gang_id,),
                           left=b.pod_nodes[:1])


def test_a_bind_fenced_midway_is_completed_next_cycle_without_rolling_back() -> None:
    cache = ClusterCache()
    for name in ("n0", "n1"):
        cache.upsert_node(Node.build(name, Resources.of(gpu=4, cpu=64000, pods=110),
                                     labels={"gangscheduler.io/pool": "p"}))
    cache.upsert_group(PodGroupInfo("ns", "g", min_member=2, creation_time=100.0,
                                    labels={QUEUE_LABEL: "q"}))
    for i in range(2):
        cache.upsert_pod(pod(i, "g"))
    actuator = FencedOnce()
    sched = Scheduler(cache, Fixed(), lambda: 200.0, actuator, backoff_initial=60.0)
    first = sched.run_once()
    (left,) = first.binds[0].pod_nodes[:1]
    assert sched.backing_off(200.0) == {}  # nothing wrong with the gang: no backoff
    second = sched.run_once()  # the same clock: a backoff would delay it
    assert second.rollbacks == ()
    assert [b.gang_id for b in second.binds] == ["ns/g"]
    (rest,) = second.binds[0].pod_nodes  # the member left bound is not bound again
    assert rest[0] != left[0] and rest[1] != left[1]
