"""The live scheduler takes its settings from the config file (no hard-coded intervals)."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from scheduler.kube.read.informer import EventType
from scheduler.kube.runner import LiveScheduler
from scheduler.run.config import LeaderElectionConfig, SchedulerConfig
from scheduler.run.inflight import ApplyResult, Flight
from tests.unit.kube.fakes import FakeClient


def live(config: SchedulerConfig, **kwargs: float) -> LiveScheduler:
    return LiveScheduler(config, FakeClient(), identity="test", **kwargs)  # type: ignore[arg-type]


CONFIG = SchedulerConfig(queue_status_interval_seconds=7.5,
                         leader_election=LeaderElectionConfig(enabled=False))


def test_queue_status_interval_comes_from_the_config() -> None:
    runner = live(CONFIG)
    try:
        assert runner.queue_status.min_interval == 7.5
    finally:
        runner.stop()


def test_an_explicit_queue_status_interval_overrides_the_config() -> None:
    runner = live(CONFIG, queue_status_interval=1.0)
    try:
        assert runner.queue_status.min_interval == 1.0
    finally:
        runner.stop()


def test_the_scheduler_policy_of_the_config_is_in_force_and_queues_keep_it() -> None:
    config = SchedulerConfig(scheduler_policy={"preemption": False,
                                               "reservation": {"maxGangs": 3}},
                             leader_election=LeaderElectionConfig(enabled=False))
    runner = live(config)
    try:
        assert not runner.policies.current().scheduler.preemption
        runner.policies.handle(EventType.ADDED, {
            "apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "team-a", "generation": 1},
            "spec": {"namespaces": ["*"]}})
        current = runner.policies.current()
        assert "team-a" in current.queues.queues
        assert (current.scheduler.preemption, current.scheduler.max_reservations) == (False, 3)
    finally:
        runner.stop()


def test_giving_the_lease_up_waits_for_the_binds_in_flight() -> None:
    runner = live(CONFIG)
    outcome: Future[ApplyResult] = Future()
    runner.scheduler.flights.launch(Flight((), {}, {}, outcome, 0.0))
    quiesced = threading.Event()

    def quiesce() -> None:
        runner._quiesce()
        quiesced.set()

    waiter = threading.Thread(target=quiesce)
    try:
        waiter.start()
        assert not quiesced.wait(0.3)  # a bind is still on the wire
        outcome.set_result(ApplyResult())
        assert quiesced.wait(30.0)
        assert len(runner.scheduler.flights) == 0
    finally:
        waiter.join(timeout=30.0)
        runner.stop()
