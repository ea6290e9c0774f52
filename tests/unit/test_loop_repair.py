"""The loop repairs partly bound gangs while it keeps running, and a bind that failed only for
want of an answer is retried as soon as the cluster answers again (not after its backoff).

A cache with a PodGroup of two members, one of them bound and Running (a scheduler killed or a
rollback failed mid-bind), and a fake actuator that records plans; the clock is the test's.
"""

from __future__ import annotations

from dataclasses import replace

from policies.queues import PolicySet, PoolQuota, Queue, QueueSet
from scheduler.decide.plan import CyclePlan
from scheduler.feed.cache import ClusterCache
from scheduler.model import Node, PodRequirements, Resources
from scheduler.model.resources import GPU
from scheduler.model.workloads import POD_GROUP_LABEL, QUEUE_LABEL, PodGroupInfo, PodInfo, PodPhase
from scheduler.run.loop import ApplyResult, Scheduler

QUEUE = Queue(name="q", namespaces=("ns",), quotas=(PoolQuota(
    pool="p", nominal=Resources({GPU: 100}), covered=frozenset({GPU})),))


class Fixed:
    def current(self) -> PolicySet:
        return PolicySet(QueueSet.of([QUEUE]))


class Actuator:
    """Records plans; the binds of *failing* gangs fail (without an answer if *unanswered*)."""

    def __init__(self) -> None:
        self.plans: list[CyclePlan] = []
        self.failing: set[str] = set()
        self.unanswered = True

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult:
        self.plans.append(plan)
        failed = {b.gang_id: "HTTP 503: etcd restarting" for b in plan.binds
                  if b.gang_id in self.failing}
        return ApplyResult(bound=tuple(b.gang_id for b in plan.binds if b.gang_id not in failed),
                           failed=failed, unanswered=tuple(failed) if self.unanswered else ())


def pod(i: int, gang: str, node: str = "") -> PodInfo:
    return PodInfo(uid=f"{gang}-u{i}", namespace="ns", name=f"{gang}-{i}",
                   requirements=PodRequirements(Resources.of(gpu=4)),
                   scheduler_name="gang-scheduler", creation_time=100.0, node_name=node,
                   phase=PodPhase.RUNNING if node else PodPhase.PENDING,
                   labels={POD_GROUP_LABEL: gang})


def cluster(free_gpus: int, *, answering: list[bool] | None = None,
            ) -> tuple[Scheduler, Actuator, list[float]]:
    """Node n0 runs the bound member (4 GPUs); n1 has *free_gpus* for the other one."""
    cache = ClusterCache()
    for name, gpus in (("n0", 4), ("n1", free_gpus)):
        cache.upsert_node(Node.build(name, Resources.of(gpu=gpus, cpu=64000, pods=110),
                                     labels={"gangscheduler.io/pool": "p"}))
    cache.upsert_group(PodGroupInfo("ns", "half", min_member=2, creation_time=100.0,
                                    labels={QUEUE_LABEL: "q"}))
    cache.upsert_pod(pod(0, "half", node="n0"))
    cache.upsert_pod(pod(1, "half"))
    now = [200.0]
    actuator = Actuator()
    answers = None if answering is None else (lambda: answering[0])
    sched = Scheduler(cache, Fixed(), lambda: now[0], actuator, repair_grace=30.0,
                      answering=answers)
    return sched, actuator, now


def test_a_started_gang_left_at_one_of_two_is_completed_while_the_scheduler_runs() -> None:
    sched, _, _ = cluster(free_gpus=4)
    plan = sched.run_once()
    assert [b.gang_id for b in plan.binds] == ["ns/half"] and plan.rollbacks == ()
    assert [ref.name for ref, _ in plan.binds[0].pod_nodes] == ["half-1"]


def test_one_that_cannot_be_completed_is_released_after_its_grace_without_a_restart() -> None:
    sched, _, now = cluster(free_gpus=0)
    assert sched.run_once().rollbacks == ()  # within its grace: not yet
    now[0] += 29.0
    assert sched.run_once().rollbacks == ()
    now[0] += 1.0
    (rollback,) = sched.run_once().rollbacks
    assert [p.name for p in rollback.pods] == ["half-0"] and not rollback.takeover
    assert rollback.reason.startswith("Placement")
    # The deletes did not happen (the cache still shows the pod bound): decided again.
    now[0] += 0.5
    assert [r.gang_id for r in sched.run_once().rollbacks] == ["ns/half"]


def test_a_gang_seen_whole_again_starts_its_grace_afresh() -> None:
    sched, _, now = cluster(free_gpus=0)
    sched.run_once()
    sched.cache.upsert_pod(replace(pod(1, "half"), node_name="n0"))  # bound elsewhere
    now[0] += 20.0
    assert sched.run_once().rollbacks == ()
    sched.cache.upsert_pod(pod(1, "half"))  # recreated pending: partly bound again
    now[0] += 20.0
    assert sched.run_once().rollbacks == ()  # 40 s since first seen, 20 s this time


def test_an_unanswered_bind_failure_backs_off_only_until_the_cluster_answers() -> None:
    answering = [False]
    sched, actuator, now = cluster(free_gpus=4, answering=answering)
    actuator.failing.add("ns/half")
    assert sched.run_once().binds  # tried, failed: the apiserver away
    assert "ns/half" in sched.backing_off(now[0])
    now[0] += 0.5
    assert not sched.run_once().binds  # still away: waits out its backoff
    answering[0] = True
    actuator.failing.clear()
    now[0] += 0.5
    plan = sched.run_once()  # answers again: at once, not 4 s later
    assert [b.gang_id for b in plan.binds] == ["ns/half"]
    assert sched.backing_off(now[0]) == {}


def test_a_bind_the_apiserver_refused_waits_out_its_backoff_even_when_it_answers() -> None:
    sched, actuator, now = cluster(free_gpus=4, answering=[True])
    actuator.failing.add("ns/half")
    actuator.unanswered = False
    sched.run_once()
    actuator.failing.clear()
    now[0] += 0.5
    assert not sched.run_once().binds
    assert sched.backing_off(now[0]) == {"ns/half": 205.0}


def one_started(other_created: float) -> tuple[Scheduler, list[float]]:
    """No room for member 1; member 0 started at 150 and member 1 was created at
    *other_created*: after that, a replacement (the gang lost a member); before, cut mid-bind."""
    sched, _, now = cluster(free_gpus=0)
    sched.cache.upsert_pod(replace(pod(0, "half", node="n0"), started_at=150.0))
    sched.cache.upsert_pod(replace(pod(1, "half"), creation_time=other_created))
    return sched, now


def test_a_running_gang_that_lost_a_member_waits_for_its_replacement_past_the_grace() -> None:
    # A node failed under it: the survivor started at 150, its replacement came at 190.
    sched, now = one_started(other_created=190.0)
    sched.run_once()
    now[0] += 60.0
    assert sched.run_once().rollbacks == ()  # not cut mid-bind: kept, and told BelowMinimum
    # The same gang cut mid-bind (its other member older than the survivor's start): released.
    sched.cache.upsert_pod(replace(pod(1, "half"), creation_time=140.0))
    now[0] += 1.0
    assert [r.gang_id for r in sched.run_once().rollbacks] == ["ns/half"]


def test_a_takeover_keeps_a_running_gang_that_lost_a_member_and_releases_one_cut_mid_bind(
        ) -> None:
    # A new leader (or a restarted scheduler) reads "cut" from the pods, as its predecessor
    # did: a gang short of a lost member keeps its survivor, one cut mid-bind goes at once.
    plan = one_started(other_created=190.0)[0].run_once(takeover=True)
    assert plan.rollbacks == () and "ns/half" in plan.pending
    (rollback,) = one_started(other_created=140.0)[0].run_once(takeover=True).rollbacks
    assert [p.name for p in rollback.pods] == ["half-0"] and rollback.takeover
