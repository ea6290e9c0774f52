"""The loop's metrics and logs, table-driven: pods and queues in, metric samples out.

Each scenario fills a real ``ClusterCache``, runs ``Scheduler.run_once`` with the real
``decide`` and a fake actuator that records plans and fails or blocks what it is told to, and
reads the samples back from the scheduler's own registry.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from policies.queues import PolicySet
from scheduler.decide.plan import CyclePlan
from scheduler.feed.cache import ClusterCache
from scheduler.feed.grouping import GroupingConfig
from scheduler.model import Node, PodRequirements, Resources
from scheduler.model.workloads import POD_GROUP_LABEL, QUEUE_LABEL, PodInfo, PodPhase
from scheduler.run import loop
from scheduler.run.loop import ApplyResult, Scheduler
from scheduler.run.metrics import SchedulerMetrics
from tests.unit.policies.builders import POOL, policies, queue

MIN_MEMBER = "gangscheduler.io/min-member"


@dataclass
class FakeActuator:
    """Binds and evicts everything except what it is told to fail or block."""

    fail: Mapping[str, str] = field(default_factory=dict)  # gang id -> why
    block: Mapping[str, str] = field(default_factory=dict)  # victim id -> why
    plans: list[CyclePlan] = field(default_factory=list)

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult:
        self.plans.append(plan)
        bound = tuple(b.gang_id for b in plan.binds if b.gang_id not in self.fail)
        failed = {b.gang_id: self.fail[b.gang_id] for b in plan.binds if b.gang_id in self.fail}
        victims = [e.victim for e in plan.evictions]
        return ApplyResult(bound=bound, failed=failed,
                           evicted=tuple(v for v in victims if v not in self.block),
                           blocked={v: self.block[v] for v in victims if v in self.block})


@dataclass
class Policies:
    policies: PolicySet

    def current(self) -> PolicySet:
        return self.policies


def gang_pods(name: str, size: int, gpus: int, queue_name: str = "team", *,
              present: int | None = None, node: str = "", priority: int = 0,
              created: float = 0.0) -> list[PodInfo]:
    """*present* (default: all *size*) pods of a gang of *size*, bound to *node* if given."""
    return [PodInfo(uid=f"uid-{name}-{i}", namespace="ns", name=f"{name}-{i}",
                    requirements=PodRequirements(Resources.of(gpu=gpus, cpu=1000)),
                    scheduler_name="gang-scheduler", node_name=node,
                    phase=PodPhase.RUNNING if node else PodPhase.PENDING, priority=priority,
                    creation_time=created,
                    labels={POD_GROUP_LABEL: name, QUEUE_LABEL: queue_name},
                    annotations={MIN_MEMBER: str(size)})
            for i in range(size if present is None else present)]


def other_pod(name: str, node: str, gpus: int) -> PodInfo:
    """A pod of another scheduler: takes capacity, never a gang."""
    return PodInfo(uid=f"uid-{name}", namespace="ns", name=name,
                   requirements=PodRequirements(Resources.of(gpu=gpus)), node_name=node,
                   phase=PodPhase.RUNNING)


def node(name: str, gpus: int = 8, pool: str = "p") -> Node:
    return Node.build(name, Resources.of(gpu=gpus, cpu=64_000, pods=110), {POOL: pool})


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make(pods: list[PodInfo], nodes: list[Node], pol: PolicySet,
         actuator: FakeActuator | None = None, metrics: SchedulerMetrics | None = None,
         pool_gauge_interval: float = 0.0) -> tuple[Scheduler, SchedulerMetrics, Clock]:
    cache = ClusterCache(GroupingConfig(default_queue="team"))
    for n in nodes:
        cache.upsert_node(n)
    for p in pods:
        cache.upsert_pod(p)
    metrics, clock = metrics or SchedulerMetrics(), Clock()
    return Scheduler(cache, Policies(pol), clock, actuator or FakeActuator(), metrics,
                     backoff_initial=5.0, pool_gauge_interval=pool_gauge_interval), metrics, clock


def sample(m: SchedulerMetrics, name: str, **labels: str) -> float:
    return m.registry.get_sample_value(name, labels) or 0.0


TEAM = policies(queue("team", quota={"p": 8}))
TREE = policies(queue("org", quota={"p": 16}), queue("a", "org", weight=1, quota={"p": 0}),
                queue("b", "org", weight=3, quota={"p": 0}))


@dataclass(frozen=True)
class Case:
    id: str
    pods: list[PodInfo]
    nodes: list[Node]
    policies: PolicySet = TEAM
    fail: Mapping[str, str] = field(default_factory=dict)
    block: Mapping[str, str] = field(default_factory=dict)
    #: (metric name, labels) -> value after one cycle.
    expect: Mapping[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)


def m(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return f"gang_scheduler_{name}", tuple(sorted(labels.items()))


CASES = [
    Case("one bound, one over quota", gang_pods("g1", 2, 4) + gang_pods("g2", 1, 8, created=1),
         [node("n1"), node("n2")], expect={
             m("binds_total", result="success"): 1,
             m("pending_gangs", queue="team", reason="Quota"): 1,
             m("allocated_gpus", queue="team", pool="p"): 8,
             m("nominal_gpus", queue="team", pool="p"): 8,
             m("gang_scheduling_latency_seconds_count", queue="team"): 1,
             m("fair_share", queue="team"): 1.0,
             m("usage_share", queue="team"): 1.0,
             m("cycles_total"): 1}),
    Case("missing members wait, never timed", gang_pods("g1", 3, 1, present=2), [node("n1")],
         expect={m("pending_gangs", queue="team", reason="WaitingForMembers"): 1,
                 m("binds_total", result="success"): 0,
                 m("gang_scheduling_latency_seconds_count", queue="team"): 0}),
    Case("no room: placement", [*gang_pods("g1", 1, 8), other_pod("x", "n1", 4)], [node("n1")],
         expect={m("pending_gangs", queue="team", reason="Placement"): 1,
                 m("allocated_gpus", queue="team", pool="p"): 0}),
    Case("failed bind is counted, not timed", gang_pods("g1", 2, 4), [node("n1")],
         fail={"ns/g1": "binding ns/g1-1: conflict: recreated (x) failed; 1 bound kept"},
         expect={m("binds_total", result="failure"): 1,
                 m("binds_total", result="success"): 0,
                 m("gang_scheduling_latency_seconds_count", queue="team"): 0}),
    Case("whole victim gang preempted",
         gang_pods("low", 2, 4, node="n1") + gang_pods("high", 1, 8, priority=100),
         [node("n1")],
         expect={m("preemptions_total", queue="team"): 1, m("evictions_total"): 2,
                 m("pending_gangs", queue="team", reason="PreemptionPending"): 1,
                 m("allocated_gpus", queue="team", pool="p"): 8}),
    Case("blocked eviction is counted, not a preemption",
         gang_pods("low", 2, 4, node="n1") + gang_pods("high", 1, 8, priority=100),
         [node("n1")], block={"ns/low": "blocked by PodDisruptionBudget"},
         expect={m("preemptions_total", queue="team"): 0, m("evictions_total"): 0,
                 m("evictions_blocked_total"): 1}),
    Case("weighted siblings: shares and per-queue allocation",
         [p for i in range(6) for p in gang_pods(f"a{i}", 1, 1, "a", created=i)]
         + [p for i in range(16) for p in gang_pods(f"b{i}", 1, 1, "b", created=i)],
         [node("n1"), node("n2")], policies=TREE,
         expect={m("allocated_gpus", queue="org", pool="p"): 16,
                 m("nominal_gpus", queue="org", pool="p"): 16,
                 m("allocated_gpus", queue="a", pool="p"): 4,
                 m("allocated_gpus", queue="b", pool="p"): 12,
                 m("fair_share", queue="a"): 0.25, m("fair_share", queue="b"): 0.75,
                 m("usage_share", queue="a"): 0.25, m("usage_share", queue="b"): 0.75,
                 m("pending_gangs", queue="a", reason="Quota"): 2,
                 m("pending_gangs", queue="b", reason="Quota"): 4}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_one_cycle(case: Case) -> None:
    sched, metrics, _ = make(case.pods, case.nodes, case.policies,
                             FakeActuator(case.fail, case.block))
    sched.run_once()
    got = {key: sample(metrics, key[0], **dict(key[1])) for key in case.expect}
    assert got == dict(case.expect)


def test_solver_time_is_observed_per_solve() -> None:
    sched, metrics, _ = make(gang_pods("g1", 2, 2) + gang_pods("g2", 1, 4), [node("n1")], TEAM)
    sched.run_once()
    solves = sum(sample(metrics, "gang_scheduler_solver_duration_seconds_count", solver=s)
                 for s in ("greedy", "cpsat", "unplaceable"))
    assert solves >= 2
    assert sample(metrics, "gang_scheduler_cycle_duration_seconds_count") == 1


def test_latency_runs_from_first_complete_cycle_to_bind() -> None:
    pods = gang_pods("g1", 2, 4, present=1)
    sched, metrics, clock = make([*pods, other_pod("x", "n1", 8)], [node("n1")], TEAM)
    sched.run_once()  # t=100: one member of two: not complete yet
    clock.now = 110.0
    sched.cache.upsert_pod(gang_pods("g1", 2, 4)[1])
    sched.run_once()  # t=110: complete, but the node is full
    clock.now = 125.0
    sched.cache.delete_pod("uid-x")
    sched.run_once()  # t=125: bound
    assert sample(metrics, "gang_scheduler_gang_scheduling_latency_seconds_count",
                  queue="team") == 1
    assert sample(metrics, "gang_scheduler_gang_scheduling_latency_seconds_sum",
                  queue="team") == pytest.approx(15.0)


def test_a_gang_that_stops_being_complete_starts_its_latency_over() -> None:
    sched, metrics, clock = make([*gang_pods("g1", 2, 4), other_pod("x", "n1", 8)],
                                 [node("n1")], TEAM)
    sched.run_once()  # t=100 complete, no room
    clock.now = 150.0
    sched.cache.delete_pod("uid-g1-1")
    sched.run_once()  # incomplete again
    clock.now = 160.0
    sched.cache.upsert_pod(gang_pods("g1", 2, 4)[1])
    sched.run_once()  # complete from 160
    clock.now = 170.0
    sched.cache.delete_pod("uid-x")
    sched.run_once()
    assert sample(metrics, "gang_scheduler_gang_scheduling_latency_seconds_sum",
                  queue="team") == pytest.approx(10.0)


def test_backing_off_gangs_are_pending_with_reason_backoff() -> None:
    actuator = FakeActuator(fail={"ns/g1": "binding ns/g1-0: pod deleted before binding"})
    sched, metrics, clock = make(gang_pods("g1", 1, 4), [node("n1")], TEAM, actuator)
    sched.run_once()
    assert sample(metrics, "gang_scheduler_binds_total", result="failure") == 1
    clock.now += 1
    sched.run_once()
    assert sample(metrics, "gang_scheduler_pending_gangs", queue="team", reason="Backoff") == 1
    clock.now += 10  # backoff over, and this time the bind works
    actuator.fail = {}
    sched.run_once()
    assert sample(metrics, "gang_scheduler_pending_gangs", queue="team", reason="Backoff") == 0
    assert sample(metrics, "gang_scheduler_binds_total", result="success") == 1


def test_pending_gauge_drops_label_sets_that_disappeared() -> None:
    sched, metrics, _ = make([*gang_pods("g1", 1, 8), other_pod("x", "n1", 8)], [node("n1")],
                             TEAM)
    sched.run_once()
    assert sample(metrics, "gang_scheduler_pending_gangs", queue="team", reason="Placement") == 1
    sched.cache.delete_pod("uid-x")
    sched.run_once()
    assert metrics.registry.get_sample_value(
        "gang_scheduler_pending_gangs", {"queue": "team", "reason": "Placement"}) is None


@pytest.fixture
def debug_logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[MutableMapping[str, Any]]]:
    """Every log line at any level, whatever other tests configured (level filter, caching)."""
    old = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
                        cache_logger_on_first_use=False)
    try:
        with capture_logs() as logs:
            monkeypatch.setattr(loop, "log", structlog.get_logger("test"))
            yield logs
    finally:
        structlog.configure(**old)


def test_summary_line_is_info_when_busy_and_debug_when_idle(
        debug_logs: list[MutableMapping[str, Any]]) -> None:
    sched, _, _ = make(gang_pods("g1", 1, 4), [node("n1")], TEAM)
    sched.run_once()
    sched.cache.upsert_pod(dataclasses.replace(gang_pods("g1", 1, 4)[0], node_name="n1"))
    sched.run_once()
    logs = debug_logs
    summaries = [(e["log_level"], e["binds"]) for e in logs if e["event"] == "cycle_summary"]
    assert summaries == [("info", 1), ("debug", 0)]
    bound = [e for e in logs if e["event"] == "gang_bound"]
    assert [(e["gang"], e["namespace"], e["queue"]) for e in bound] == [("ns/g1", "ns", "team")]


def test_without_metrics_the_loop_still_runs() -> None:
    cache = ClusterCache()
    cache.upsert_node(node("n1"))
    for p in gang_pods("g1", 1, 4):
        cache.upsert_pod(p)
    sched = Scheduler(cache, Policies(TEAM), Clock(), FakeActuator())
    assert [b.gang_id for b in sched.run_once().binds] == ["ns/g1"]
    assert [q.allocated_gpus for q in sched.last_queues] == [4]


def test_queue_reports_count_every_waiting_gang_of_the_queue() -> None:
    """Missing members and backoff too, not only the gangs the plan considered."""
    actuator = FakeActuator(fail={"ns/g2": "binding ns/g2-0: conflict: already bound"})
    sched, _, clock = make([*gang_pods("g1", 3, 1, present=2), *gang_pods("g2", 1, 1)],
                           [node("n1")], TEAM, actuator)
    sched.run_once()
    clock.now += 1
    sched.run_once()
    assert [(q.name, q.pending) for q in sched.last_queues] == [("team", 2)]


def test_pool_gauges_follow_their_interval_and_gpu_seconds_every_cycle() -> None:
    sched, metrics, clock = make(gang_pods("g1", 1, 8), [node("n1")], TEAM,
                                 pool_gauge_interval=1.0)
    sched.run_once()
    assert sample(metrics, "gang_scheduler_schedulable_gpus", pool="p") == 8
    sched.cache.upsert_node(node("n2"))
    clock.now += 0.5
    sched.run_once()  # within the interval: the cycle leaves the gauge to the scrape
    accrual = sched.observer.accrual
    assert accrual is not None and accrual._skipped is not None
    allocated = sample(metrics, "gang_scheduler_allocated_gpu_seconds_total", queue="team",
                  namespace="ns", pool="p")
    assert allocated == 8 * 0.5  # GPU-seconds every cycle
    assert sample(metrics, "gang_scheduler_schedulable_gpus", pool="p") == 16  # the scrape's
    assert accrual._skipped is None
    clock.now += 0.5
    sched.run_once()
    assert sample(metrics, "gang_scheduler_schedulable_gpus", pool="p") == 16
