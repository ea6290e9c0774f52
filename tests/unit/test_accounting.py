"""Live accounting (scheduler/report/accounting.py and the loop's metrics): GPU-seconds and cost per
queue, namespace and pool, and where free GPUs sit unused (idle, stranded, reserved).

Run through the real loop: a ``ClusterCache`` with pods and nodes, ``Scheduler.run_once`` with
the real ``decide``, the fake actuator of test_loop_metrics, a clock the test moves.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from policies.queues import PolicySet
from scheduler.model.workloads import PodInfo
from scheduler.run.config import PricingConfig
from scheduler.run.metrics import SchedulerMetrics
from tests.unit.policies.builders import POOL, policies, queue
from tests.unit.test_loop_metrics import (
    TEAM,
    FakeActuator,
    gang_pods,
    make,
    node,
    other_pod,
    sample,
)

PRICES = PricingConfig(currency="EUR", gpu_hour={"p": 3.6}, default_gpu_hour=1.0)


def priced() -> SchedulerMetrics:
    """Metrics with PRICES (``make`` builds unpriced ones)."""
    return SchedulerMetrics(pricing=PRICES)


def test_gpu_seconds_and_cost_accrue_at_what_was_allocated_between_cycles() -> None:
    sched, m, clock = make(gang_pods("g1", 2, 4), [node("n1"), node("n2")], TEAM,
                           metrics=priced())
    sched.run_once()  # binds g1 (8 GPUs): nothing allocated before, nothing charged yet
    gpu_s = ("gang_scheduler_allocated_gpu_seconds_total",
             {"queue": "team", "namespace": "ns", "pool": "p"})
    assert sample(m, gpu_s[0], **gpu_s[1]) == 0
    clock.now += 10
    sched.run_once()
    assert sample(m, gpu_s[0], **gpu_s[1]) == 80  # 8 GPUs for 10 s
    clock.now += 5
    sched.run_once()
    assert sample(m, gpu_s[0], **gpu_s[1]) == 120
    cost = sample(m, "gang_scheduler_gpu_cost_total", queue="team", namespace="ns", pool="p",
                  currency="EUR")
    assert math.isclose(cost, 120 / 3600 * 3.6)
    assert sample(m, "gang_scheduler_gpu_hour_price", pool="p", currency="EUR") == 3.6


def test_a_scrape_between_cycles_charges_up_to_the_scrape() -> None:
    # No cycle runs while nothing changes: what is allocated is charged whenever the metrics are
    # read, and the next cycle charges only the time after that.
    sched, m, clock = make(gang_pods("g1", 1, 8), [node("n1")], TEAM, metrics=priced())
    sched.run_once()
    gpu_s = {"queue": "team", "namespace": "ns", "pool": "p"}
    clock.now += 30
    assert sample(m, "gang_scheduler_allocated_gpu_seconds_total", **gpu_s) == 240
    assert sample(m, "gang_scheduler_allocated_gpu_seconds_total", **gpu_s) == 240
    clock.now += 5
    sched.run_once()
    assert sample(m, "gang_scheduler_allocated_gpu_seconds_total", **gpu_s) == 280


def test_a_leadership_gap_is_not_charged() -> None:
    sched, m, clock = make(gang_pods("g1", 1, 8), [node("n1")], TEAM, metrics=priced())
    sched.run_once()
    clock.now += 2
    sched.run_once()
    sched.forget_accounting()  # the runner calls this on taking the Lease (back)
    clock.now += 1000
    sched.run_once()
    assert sample(m, "gang_scheduler_allocated_gpu_seconds_total", queue="team",
                  namespace="ns", pool="p") == 16


def test_pool_gauges_a_cycle_skipped_are_set_at_the_next_scrape() -> None:
    # Gauges at most every 10 s of cycles: the second cycle (a waiting 8-GPU gang arrived,
    # stranding the 4 free GPUs) skips them; no cycle follows on an idle cluster, so the
    # scrape sets them, from that last cycle.
    sched, m, clock = make([other_pod("x", "n1", 4)], [node("n1")], TEAM,
                           pool_gauge_interval=10.0)
    sched.run_once()
    for p in gang_pods("big", 1, 8):
        sched.cache.upsert_pod(p)
    clock.now += 1
    sched.run_once()
    assert sample(m, "gang_scheduler_stranded_gpus", pool="p") == 4
    assert sample(m, "gang_scheduler_idle_gpus", pool="p") == 4


@pytest.mark.parametrize(("pods", "nodes", "idle", "stranded"), [
    # Nothing waits: free GPUs are idle, not stranded.
    (gang_pods("g1", 1, 4), [node("n1")], 4, 0),
    # A waiting 8-GPU gang cannot use the 4 free GPUs of n1 (a 4-GPU pod runs there).
    ([*gang_pods("big", 1, 8), other_pod("x", "n1", 4)], [node("n1")], 4, 4),
    # A waiting 2-GPU gang over quota could use them: quota, not shape, keeps it waiting.
    (gang_pods("g1", 1, 8, node="n1") + gang_pods("g2", 1, 2, created=1),
     [node("n1"), node("n2")], 8, 0),
])
def test_idle_and_stranded_gpus(pods: list, nodes: list, idle: int, stranded: int) -> None:
    sched, m, _ = make(pods, nodes, TEAM)
    sched.run_once()
    assert sample(m, "gang_scheduler_idle_gpus", pool="p") == idle
    assert sample(m, "gang_scheduler_stranded_gpus", pool="p") == stranded
    assert sample(m, "gang_scheduler_schedulable_gpus", pool="p") == 8 * len(nodes)


def _on_pool(pods: list[PodInfo], pool: str) -> list[PodInfo]:
    """*pods* with a node selector for *pool*."""
    return [dataclasses.replace(p, requirements=dataclasses.replace(
        p.requirements, node_selector={POOL: pool})) for p in pods]


#: Two pools of one 8-GPU node each, each node half taken by another scheduler's pod: 4 GPUs
#: free on each, where no 8-GPU pod fits.
HALF_FULL = [node("n1", pool="p"), node("n2", pool="q")]
HALVES = [other_pod("x1", "n1", 4), other_pod("x2", "n2", 4)]


@pytest.mark.parametrize(("why", "pol", "pods", "stranded"), [
    ("the team's tree has quota in p only: nobody waits for q, whose GPUs are just idle",
     policies(queue("team", quota={"p": 16})), gang_pods("big", 1, 8), {"p": 4, "q": 0}),
    ("a GPU quota of 0 closes q to the team (deploy/queues' default in h100)",
     policies(queue("team", quota={"p": 16, "q": 0})), gang_pods("big", 1, 8),
     {"p": 4, "q": 0}),
    ("a sibling's quota in q is the team's to borrow: it waits for both pools",
     policies(queue("org"), queue("team", "org", quota={"p": 16}),
              queue("other", "org", quota={"q": 8})), gang_pods("big", 1, 8),
     {"p": 4, "q": 4}),
    ("its node selector asks for q: p's free GPUs are nobody's concern",
     policies(queue("team", quota={"p": 16, "q": 16})), _on_pool(gang_pods("big", 1, 8), "q"),
     {"p": 0, "q": 4}),
    ("a gang still missing members waits for nothing yet",
     policies(queue("team", quota={"p": 16, "q": 16})), gang_pods("big", 2, 8, present=1),
     {"p": 0, "q": 0}),
])
def test_stranded_means_idle_while_a_gang_that_could_use_the_pool_waits(
        why: str, pol: PolicySet, pods: list[PodInfo], stranded: dict[str, int]) -> None:
    """Issue 32: idle GPUs of a pool nobody waits for were counted (and drawn) as stranded,
    and the shipped "stranded for an hour" alert would have fired on an idle pool."""
    sched, m, _ = make([*pods, *HALVES], HALF_FULL, pol)
    sched.run_once()
    assert {pool: sample(m, "gang_scheduler_stranded_gpus", pool=pool) for pool in stranded
            } == stranded, why
    assert {pool: sample(m, "gang_scheduler_idle_gpus", pool=pool) for pool in stranded
            } == {"p": 4, "q": 4}


def test_gpus_free_on_nodes_kept_for_a_preemptor_are_reserved_but_idle() -> None:
    # low is allocated 4 of n1's 8 GPUs; high (8 GPUs, higher priority) evicts it and gets n1.
    pods = gang_pods("low", 1, 4, node="n1") + gang_pods("high", 1, 8, priority=100)
    sched, m, _ = make(pods, [node("n1")], TEAM)
    plan = sched.run_once()
    assert plan.nominations and plan.nominations[0].nodes == ("n1",)
    assert sample(m, "gang_scheduler_reserved_idle_gpus", pool="p") == 4


def test_charged_per_queue_namespace_and_pool() -> None:
    two = policies(queue("a", quota={"p": 8, "q": 8}), queue("b", quota={"p": 8}))
    pods = gang_pods("ga", 1, 8, "a") + gang_pods("gb", 1, 4, "b", created=1)
    sched, m, clock = make(pods, [node("n1", pool="p"), node("n2", pool="p"),
                                  node("n3", pool="q")], two, FakeActuator(), priced())
    sched.run_once()
    clock.now += 100
    sched.run_once()
    charged = {(s.labels["queue"], s.labels["pool"]): s.value
               for fam in m.registry.collect() if fam.name == "gang_scheduler_allocated_gpu_seconds"
               for s in fam.samples if s.name.endswith("_total")}
    assert sum(charged.values()) == 1200  # (8 + 4) GPUs x 100 s
    assert charged[("b", "p")] == 400
