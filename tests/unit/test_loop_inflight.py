"""Binds in flight (``scheduler.run.inflight``): the loop's bookkeeping while an actuator binds
outside the cycle.

A real ``ClusterCache`` and the real ``decide``; the actuator hands every plan's binds out as
a ``Future`` the test completes when it likes, as the live binding stage does when the
apiserver answers.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

from scheduler.decide.plan import CyclePlan
from scheduler.model.workloads import PodInfo
from scheduler.run.inflight import ApplyResult
from scheduler.run.loop import Scheduler
from scheduler.run.metrics import SchedulerMetrics
from tests.unit.policies.builders import policies, queue
from tests.unit.test_loop_metrics import Clock, gang_pods, make, node, sample

TEAM = policies(queue("team", quota={"p": 32}))


@dataclass
class LaterActuator:
    """Binds nothing inside ``apply``: each plan's binds become a flight to complete."""

    plans: list[CyclePlan] = field(default_factory=list)
    flights: list[Future[ApplyResult]] = field(default_factory=list)

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult:
        self.plans.append(plan)
        if not plan.binds:
            return ApplyResult()
        self.flights.append(Future())
        return ApplyResult(binding=self.flights[-1])

    def land(self, index: int = -1, *, fail: str = "") -> None:
        """Complete a flight: every gang of its plan bound, or failed for *fail*."""
        plan = [p for p in self.plans if p.binds][index]
        gangs = tuple(b.gang_id for b in plan.binds)
        self.flights[index].set_result(
            ApplyResult(failed=dict.fromkeys(gangs, fail)) if fail else ApplyResult(bound=gangs))


def setup(pods: list[PodInfo], nodes: int = 1) -> tuple[Scheduler, SchedulerMetrics, Clock,
                                                        LaterActuator]:
    actuator = LaterActuator()
    sched, metrics, clock = make(pods, [node(f"n{i}") for i in range(nodes)], TEAM)
    sched.actuator = actuator
    return sched, metrics, clock, actuator


def binds(plan: CyclePlan) -> list[str]:
    return [b.gang_id for b in plan.binds]


def test_a_gang_in_flight_is_neither_re_placed_nor_pending_and_keeps_its_capacity() -> None:
    # One node of 8 GPUs: g1 takes all of it; g2, arriving while g1 binds, must not fit.
    sched, metrics, clock, _ = setup(gang_pods("g1", 2, 4))
    assert binds(sched.run_once()) == ["ns/g1"]
    for p in gang_pods("g2", 1, 8, created=1):
        sched.cache.upsert_pod(p)
    clock.now += 1
    plan = sched.run_once()
    assert binds(plan) == [] and "ns/g1" not in plan.pending
    assert list(plan.pending) == ["ns/g2"]
    assert sched.cache.cycle_input(clock.now).gangs.partially_bound == {}
    assert sched.flights.gangs() == {"ns/g1"}
    assert sample(metrics, "gang_scheduler_binds_total", result="success") == 0


def test_an_assumption_in_flight_does_not_expire() -> None:
    sched, _, clock, _act = setup(gang_pods("g1", 2, 4))
    sched.run_once()
    clock.now += sched.cache.assume_ttl * 3  # a huge backlog's binds can take minutes
    plan = sched.run_once()
    assert binds(plan) == [] and "ns/g1" not in plan.pending
    assert "ns/g1" in sched.cache.cycle_input(clock.now).snapshot.running


def test_a_bind_that_landed_is_counted_once_with_its_latency() -> None:
    sched, metrics, clock, act = setup(gang_pods("g1", 2, 4))
    sched.run_once()
    clock.now += 2
    act.land()
    clock.now += 5  # taken in at a later cycle: the latency is when it landed
    sched.run_once()
    sched.run_once()
    assert sample(metrics, "gang_scheduler_binds_total", result="success") == 1
    assert sample(metrics, "gang_scheduler_gang_scheduling_latency_seconds_count",
                  queue="team") == 1
    assert sample(metrics, "gang_scheduler_gang_scheduling_latency_seconds_sum",
                  queue="team") == 2
    assert sample(metrics, "gang_scheduler_bind_duration_seconds_sum") == 2
    assert len(sched.flights) == 0
    # Settled: the assumption now lapses unless the watch confirms it, and the gang is
    # pending again (the watch never showed the pods bound here).
    clock.now += sched.cache.assume_ttl + 1
    assert [g.id for g in sched.cache.cycle_input(clock.now).gangs.pending] == ["ns/g1"]


def test_a_failed_bind_frees_its_capacity_and_backs_the_gang_off() -> None:
    sched, metrics, clock, act = setup(gang_pods("g1", 2, 4) + gang_pods("g2", 1, 8, created=1))
    assert binds(sched.run_once()) == ["ns/g1"]
    act.land(fail="pod deleted before binding (gone)")
    clock.now += 1
    plan = sched.run_once()
    assert binds(plan) == ["ns/g2"]  # g1's GPUs are free again; g1 itself backs off
    assert "ns/g1" in sched.backing_off(clock.now)
    assert sample(metrics, "gang_scheduler_binds_total", result="failure") == 1


def test_a_failed_bind_keeps_the_gang_latency_running() -> None:
    sched, metrics, clock, act = setup(gang_pods("g1", 2, 4))
    sched.run_once()
    act.land(fail="HTTP 503: busy")
    clock.now += 10  # past the backoff
    sched.run_once()
    assert binds(act.plans[-1]) == ["ns/g1"]
    clock.now += 1
    act.land()
    sched.run_once()
    assert sample(metrics, "gang_scheduler_gang_scheduling_latency_seconds_sum",
                  queue="team") == 11  # from the first complete cycle, not the retry


def test_cycles_decide_while_binds_are_in_flight() -> None:
    sched, _, clock, act = setup(gang_pods("g1", 1, 8), nodes=2)
    sched.run_once()
    for p in gang_pods("g2", 1, 8, created=1):
        sched.cache.upsert_pod(p)
    clock.now += 1
    assert binds(sched.run_once()) == ["ns/g2"]  # g1 still binding: two flights out
    assert sched.flights.gangs() == {"ns/g1", "ns/g2"}
    act.land(1)  # the later one lands first
    sched.run_once()
    assert sched.flights.gangs() == {"ns/g1"}


def test_drain_takes_in_what_landed_and_abandons_the_rest() -> None:
    sched, metrics, clock, act = setup(gang_pods("g1", 1, 8) + gang_pods("g2", 1, 8, created=1),
                                       nodes=2)
    sched.run_once()  # both in one flight
    for p in gang_pods("g3", 1, 8, created=2):
        sched.cache.upsert_pod(p)
    sched.cache.upsert_node(node("n2"))
    clock.now += 1
    assert binds(sched.run_once()) == ["ns/g3"]
    act.land(0)
    assert sched.drain(timeout=0.01) == 1  # g3's flight never landed
    assert sample(metrics, "gang_scheduler_binds_total", result="success") == 2
    assert len(sched.flights) == 0
    # g3 is no longer assumed: the cache is the watch's again (it shows g3 pending).
    assert [g.id for g in sched.cache.cycle_input(clock.now).gangs.pending] == ["ns/g3"]
    act.land(1)  # its outcome arriving afterwards is not taken in (not counted)
    sched.run_once()
    assert sample(metrics, "gang_scheduler_binds_total", result="success") == 2


def test_drain_waits_for_a_bind_that_lands_meanwhile() -> None:
    sched, metrics, _, act = setup(gang_pods("g1", 1, 8))
    sched.run_once()
    threading.Timer(0.2, act.land).start()
    assert sched.drain(timeout=30.0) == 0
    assert sample(metrics, "gang_scheduler_binds_total", result="success") == 1
