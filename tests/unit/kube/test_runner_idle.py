"""The live loop runs no decision cycle while nothing changes, and one for each change.

The real ``LiveScheduler.run`` on its own thread, over a fake apiserver that answers every
write; the cache and the policies are fed directly (as the informers would). Waits are
generous and the assertions are on cycle counts, not on timing: a cycle that ran although
nothing changed is a failure however slow the machine.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from scheduler.kube import runner as runner_module
from scheduler.kube.client import Response
from scheduler.kube.read.informer import EventType
from scheduler.kube.runner import LiveScheduler
from scheduler.model import Node, PodRequirements, Resources
from scheduler.model.workloads import POD_GROUP_LABEL, QUEUE_LABEL, PodInfo
from scheduler.run.config import LeaderElectionConfig, SchedulerConfig
from scheduler.run.inflight import ApplyResult, Flight
from tests.unit.kube.fakes import FakeClient

#: The idle loop's longest sleep: short, so that a spurious cycle would show within the
#: quiet spells below.
IDLE = 0.05
QUIET = 0.6  # seconds without a change, in which no cycle may run


def queue(name: str, **queueing: Any) -> dict[str, Any]:
    return {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": name, "generation": 1},
            "spec": {"namespaces": ["*"], "queueing": queueing,
                     "quotas": [{"pool": "p", "nominal": {"nvidia.com/gpu": 64}}]}}


def pod(name: str, gang: str, gpus: int = 8, size: int = 2, created: float = 0.0) -> PodInfo:
    return PodInfo(uid=f"uid-{name}", namespace="ns", name=name,
                   requirements=PodRequirements(Resources.of(gpu=gpus, cpu=1000)),
                   scheduler_name="gang-scheduler", creation_time=created,
                   labels={POD_GROUP_LABEL: gang, QUEUE_LABEL: "team"},
                   annotations={"gangscheduler.io/min-member": str(size)},
                   resource_version="1")


@pytest.fixture
def runner() -> Iterator[LiveScheduler]:
    ok: Callable[..., Response] = lambda *_: Response(200, b"{}")  # noqa: E731
    config = SchedulerConfig(cycle_interval_seconds=IDLE,
                             leader_election=LeaderElectionConfig(enabled=False))
    live = LiveScheduler(config, FakeClient(on_request=ok), identity="test",  # type: ignore[arg-type]
                         poll_interval=0.01, queue_status_interval=0.05)
    live.policies.handle(EventType.ADDED, queue("team"))
    live.cache.upsert_node(Node.build("n1", Resources.of(gpu=8, cpu=64000, pods=110),
                                      {"gangscheduler.io/pool": "p"}))
    for i in range(3):  # three gangs of 2 x 8 GPUs on one 8-GPU node: all wait
        for j in range(2):
            live.cache.upsert_pod(pod(f"g{i}-{j}", f"g{i}"))
    thread = threading.Thread(target=live.run, daemon=True)
    thread.start()
    try:
        settle(live)
        yield live
    finally:
        live.stop()
        thread.join(timeout=30)


def settle(live: LiveScheduler) -> int:
    """Wait until cycles stop, then check that none runs for QUIET seconds; the count."""
    deadline = time.monotonic() + 30
    seen = -1
    while time.monotonic() < deadline:
        now = live.scheduler.cycles
        if now == seen and now > 0:
            break
        seen = now
        time.sleep(0.2)
    time.sleep(QUIET)
    assert live.scheduler.cycles == seen, "a cycle ran although nothing changed"
    return seen


def one_more(live: LiveScheduler, before: int) -> None:
    """Exactly one cycle ran since *before* (waits for it, then for QUIET seconds)."""
    deadline = time.monotonic() + 30
    while live.scheduler.cycles == before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert settle(live) == before + 1


def test_nothing_changes_no_cycle(runner: LiveScheduler) -> None:
    before = runner.scheduler.cycles
    time.sleep(QUIET)
    assert runner.scheduler.cycles == before
    assert set(runner.scheduler.last_plan.pending) == {"ns/g0", "ns/g1", "ns/g2"}  # type: ignore[union-attr]


def test_an_update_that_changes_nothing_read_runs_no_cycle(runner: LiveScheduler) -> None:
    before = runner.scheduler.cycles
    runner.cache.upsert_pod(dataclasses.replace(pod("g0-0", "g0"), resource_version="2"))
    runner.policies.handle(EventType.MODIFIED, queue("team"))  # same generation: status only
    assert settle(runner) == before


@pytest.mark.parametrize("change", ["a pod", "a queue", "a bind outcome"])
def test_one_cycle_for_each_change(runner: LiveScheduler, change: str) -> None:
    before = runner.scheduler.cycles
    if change == "a pod":
        runner.cache.upsert_pod(pod("g3-0", "g3"))  # another gang's first member: it waits
    elif change == "a queue":
        runner.policies.handle(EventType.ADDED, queue("other"))
    else:
        outcome: Future[ApplyResult] = Future()
        runner.scheduler.flights.launch(Flight((), {}, {}, outcome, time.time()))
        outcome.set_result(ApplyResult())
    one_more(runner, before)


def test_one_cycle_when_a_gang_starves(runner: LiveScheduler) -> None:
    # A queue whose gangs may be reserved for after 5 s of waiting: the gang's plan is due
    # then (it may get a reservation), and at no other time.
    runner.policies.handle(EventType.ADDED, queue("slow", reserveAfterSeconds=5))
    before = settle(runner)
    created = time.time()
    for j in range(2):
        runner.cache.upsert_pod(dataclasses.replace(pod(f"s-{j}", "s", created=created),
                                                    labels={POD_GROUP_LABEL: "s",
                                                            QUEUE_LABEL: "slow"}))
    assert settle(runner) == before + 1  # the new gang: one cycle, not one per sleep
    due = runner.scheduler.next_due()
    assert due is not None and due >= created + 5
    while time.time() < due + 0.5:
        time.sleep(0.05)
    assert settle(runner) == before + 2  # its due time: one cycle more, and no other
    assert runner.scheduler.next_due() is None


def test_a_cycle_that_failed_is_tried_again_though_nothing_changes(
        runner: LiveScheduler, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_module, "FAILED_CYCLE_RETRY_SECONDS", 0.5)
    original, calls = runner.scheduler.run_once, []

    def failing_once(takeover: bool = False) -> Any:
        calls.append(takeover)
        if len(calls) == 1:
            raise RuntimeError("a bug, or the apiserver away at the wrong moment")
        return original(takeover)

    runner.scheduler.run_once = failing_once  # type: ignore[method-assign]
    runner.cache.upsert_pod(pod("g3-0", "g3"))
    deadline = time.monotonic() + 30
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(calls) == 2  # the failed one, then its retry
    settle(runner)
    assert len(calls) == 2  # and no more: the retry succeeded
