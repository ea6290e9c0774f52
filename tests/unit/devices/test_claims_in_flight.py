"""A gang's device allocations while its bind is in flight (``scheduler.run.inflight``).

The live actuator writes a gang's claim allocations on the binding stage, after ``apply``
returned, and the next cycle starts meanwhile. Until the claims' watch shows them allocated,
the cache must assume the allocations the flight is carrying out, as it assumes the members
bound: otherwise the next cycle sees the members on their nodes but their devices free, and
gives the same devices to another gang (the e2e test
``test_gang_scheduler_allocates_whole_gangs_and_the_second_waits_whole_behind_the_first``
caught this on the real cluster once a second in three runs).

The real cache fed through the informers' handlers, the real loop and ``decide``; the
actuator hands every plan's binds out as a flight the test lands when it likes.
"""

from __future__ import annotations

from scheduler.feed.cache import ClusterCache
from scheduler.feed.grouping import GroupingConfig
from scheduler.model import prebind
from scheduler.run.inflight import ApplyResult
from scheduler.run.loop import Scheduler
from scheduler.run.metrics import SchedulerMetrics
from tests.unit.devices.world import World
from tests.unit.policies.builders import policies, queue
from tests.unit.test_loop_inflight import LaterActuator
from tests.unit.test_loop_metrics import Clock, Policies


def setup() -> tuple[World, Scheduler, Clock, LaterActuator]:
    """Two nodes of 3 devices (as the e2e test's), two Jobs of 4 pods of one device each:
    only one fits at a time."""
    world = World(nodes=2, devices=3, gpus=3,
                  cache=ClusterCache(GroupingConfig(default_queue="default")))
    world.job("first", 4)
    actuator, clock = LaterActuator(), Clock(2_000_000_000.0)
    sched = Scheduler(world.cache, Policies(policies(queue("default", quota={"h100": 64}))),
                      clock, actuator, SchedulerMetrics(), backoff_initial=5.0)
    return world, sched, clock, actuator


def decisions(actuator: LaterActuator) -> list[prebind.PreBind]:
    return [d for b in actuator.plans[-1].binds for d in b.placement.prebinds]


def test_a_flights_allocations_are_taken_until_it_lands() -> None:
    world, sched, clock, actuator = setup()
    assert [b.gang_id for b in sched.run_once().binds] == ["team/first"]
    first = decisions(actuator)
    assert len({dev for d in first for dev in d.devices}) == 4
    world.job("second", 4)  # arrives while the first's claims are being written
    clock.now += 1
    plan = sched.run_once()
    assert plan.binds == () and list(plan.pending) == ["team/second"]
    assert plan.pending["team/second"].category == "Devices"
    # It landed: its allocations stay assumed until the watch shows them.
    actuator.flights[0].set_result(ApplyResult(bound=("team/first",), prebinds=tuple(first)))
    clock.now += 1
    assert sched.run_once().binds == ()


def test_a_flight_that_failed_gives_its_devices_back() -> None:
    world, sched, clock, actuator = setup()
    sched.run_once()
    world.job("second", 4)
    clock.now += 1
    assert sched.run_once().binds == ()
    # The first's bind failed and its claims were taken back: nothing carried out.
    actuator.flights[0].set_result(ApplyResult(failed={"team/first": "refused"}))
    clock.now += 1
    assert [b.gang_id for b in sched.run_once().binds] == ["team/second"]


def test_a_flight_abandoned_on_stepping_down_assumes_nothing_more() -> None:
    world, sched, clock, actuator = setup()
    sched.run_once()
    first = decisions(actuator)
    claims = world.cache.facts.catalog().devices.claims
    assert all(claims[d.claim].allocation is not None for d in first)
    assert sched.drain(timeout=0.0) == 1  # stepping down: the next leader decides afresh
    claims = world.cache.facts.catalog().devices.claims
    assert all(claims[d.claim].allocation is None for d in first)
    world.job("second", 4)
    clock.now += 1
    assert [b.gang_id for b in sched.run_once().binds] == ["team/first"]
