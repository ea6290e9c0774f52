"""After a cycle the live runner's writers (PodGroup status, shortfalls, gang notices) see the
gangs as the cache has them once the plan went out (``LiveScheduler._follow_the_pods``), not
as the cycle's input had them: the cycle's bind assumed, and what the watch reported during
the cycle."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pytest

from scheduler.decide.plan import CyclePlan
from scheduler.kube.client import Response
from scheduler.kube.read.informer import EventType
from scheduler.kube.runner import LiveScheduler
from scheduler.model import Gang, Node, RunningGang
from scheduler.model.resources import Resources
from scheduler.model.workloads import POD_GROUP_LABEL, QUEUE_LABEL
from scheduler.run.config import LeaderElectionConfig, SchedulerConfig
from scheduler.run.inflight import ApplyResult
from tests.unit.kube.fakes import FakeClient
from tests.unit.kube.test_runner_idle import pod, queue


@dataclasses.dataclass
class Seen:
    """What each writer was handed after the cycle."""

    synced: Mapping[str, RunningGang] | None = None
    reported: Mapping[str, RunningGang] | None = None
    told: list[Gang] = dataclasses.field(default_factory=list)


@pytest.fixture
def live() -> Iterator[LiveScheduler]:
    ok: Any = lambda *_: Response(200, b"{}")  # noqa: E731
    config = SchedulerConfig(leader_election=LeaderElectionConfig(enabled=False))
    runner = LiveScheduler(config, FakeClient(on_request=ok), identity="test",  # type: ignore[arg-type]
                           poll_interval=0.01, queue_status_interval=0.05)
    runner.policies.handle(EventType.ADDED, queue("team"))
    runner.cache.upsert_node(Node.build("n1", Resources.of(gpu=16, cpu=64000, pods=110),
                                        {"gangscheduler.io/pool": "p"}))
    try:
        yield runner
    finally:
        runner.stop()


def _watch(live: LiveScheduler, during: Iterable[Any] = ()) -> Seen:
    """Run one cycle; *during*: cache changes made while the plan is applied (the watch's
    events during the cycle). What the writers were handed."""
    seen = Seen()
    live.group_sync.sync = lambda running=None: setattr(seen, "synced", running)  # type: ignore[method-assign]
    live.shortfalls.report = lambda running, now: setattr(seen, "reported", running)  # type: ignore[method-assign]
    live.gang_notices.report = lambda gangs: seen.told.extend(gangs)  # type: ignore[method-assign]
    apply = live.actuator.apply

    def applying(plan: CyclePlan, now: float) -> ApplyResult:
        result = apply(plan, now)
        for change in during:
            change()
        return result

    live.actuator.apply = applying  # type: ignore[method-assign]
    live._cycle(0, True, "test")
    live.scheduler.drain(10)
    return seen


def test_a_gang_bound_by_the_cycle_is_running_for_the_writers(live: LiveScheduler) -> None:
    for j in range(2):
        live.cache.upsert_pod(pod(f"a-{j}", "a"))
    seen = _watch(live)
    assert [g.id for g in live.scheduler.last_cycle[0].gangs.pending] == ["ns/a"]  # type: ignore[index]
    assert seen.synced is not None and set(seen.synced) == {"ns/a"}
    assert seen.reported is seen.synced  # one read for every writer


def test_a_member_lost_and_a_gang_come_during_the_cycle_are_seen(live: LiveScheduler) -> None:
    for j in range(2):
        live.cache.upsert_pod(dataclasses.replace(pod(f"b-{j}", "b"), node_name="n1"))
    lost = lambda: live.cache.delete_pod("uid-b-1")  # noqa: E731
    came = [lambda j=j, q=q: live.cache.upsert_pod(  # type: ignore[misc]
        dataclasses.replace(pod(f"c-{j}", "c"), labels={POD_GROUP_LABEL: "c", QUEUE_LABEL: q}))
        for j, q in enumerate(("team", "other"))]  # pods that disagree: a notice
    seen = _watch(live, [lost, *came])
    assert seen.reported is not None
    short = seen.reported["ns/b"].shortfall
    assert short is not None and (short.present, short.minimum) == (1, 2)
    told = {g.id: g for g in seen.told}
    assert told["ns/c"].notices  # pending, not in the cycle's input
    assert "ns/c" not in {g.id for g in live.scheduler.last_cycle[0].gangs.pending}  # type: ignore[index]
