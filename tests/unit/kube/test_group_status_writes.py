"""A bound gang's PodGroup status is written once, by the sync after the cycle.

The actuator carries the plan out and writes nothing about bound PodGroups; the sync that
follows (the binds assumed in the cache) writes ``Scheduled`` once, with the bind's start
time, and again only when the pods move on. (Once, the bind wrote ``Scheduled`` with its own
counts and the sync wrote it again with others: two PATCHes, briefly inconsistent counts.)
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.decide.plan import Bind, CyclePlan
from scheduler.feed.cache import ClusterCache
from scheduler.kube.client import Response
from scheduler.kube.events import EventRecorder
from scheduler.kube.write.actuator import KubeActuator
from scheduler.kube.write.binder import Binder
from scheduler.kube.write.group_sync import GroupStatusSync
from scheduler.kube.write.status import StatusWriter
from scheduler.model import PodRef, PodRequirements, Resources
from scheduler.model.workloads import POD_GROUP_LABEL, PodGroupInfo, PodInfo, PodPhase
from scheduler.placement.types import Assignment, Placement
from tests.unit.kube.fakes import landed

GROUP_STATUS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups/g/status"
NOW = 1_714_564_800.0


@dataclass
class Api:
    """Answers binds, status patches and events; ``fail_group_patches`` first ones get 500."""

    fail_group_patches: int = 0
    group_patches: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        with self.lock:
            if method == "PATCH" and path == GROUP_STATUS:
                if self.fail_group_patches:
                    self.fail_group_patches -= 1
                    return Response(500, b'{"message": "etcd timeout"}')
                self.group_patches.append(body["status"])
        return Response(201 if method == "POST" else 200, b"{}")


def member(i: int, **changes: Any) -> PodInfo:
    pod = PodInfo(uid=f"u{i}", namespace="ns", name=f"g-{i}",
                  requirements=PodRequirements(Resources.of(gpu=8)),
                  scheduler_name="gang-scheduler", labels={POD_GROUP_LABEL: "g"})
    return dataclasses.replace(pod, **changes)


PODS = [member(0), member(1)]
POD_NODES = tuple((PodRef("ns", p.name, p.uid), f"n{i}") for i, p in enumerate(PODS))
PLAN = CyclePlan(now=NOW, binds=(Bind("ns/g", "team-a", Placement(
    "ns/g", (Assignment("", "n0", 1), Assignment("", "n1", 1))), POD_NODES),))


@dataclass
class Setup:
    api: Api
    cache: ClusterCache
    actuator: KubeActuator
    sync: GroupStatusSync

    def sync_and_flush(self) -> None:
        self.sync.sync()
        assert self.actuator.writer.flush()


@pytest.fixture
def setup() -> Iterator[Setup]:
    api, cache = Api(), ClusterCache()
    cache.upsert_group(PodGroupInfo("ns", "g", uid="g-uid", min_member=2))
    for p in PODS:
        cache.upsert_pod(p)
    binder = Binder(api, concurrency=2)
    actuator = KubeActuator(api, binder, StatusWriter(api), EventRecorder(api))  # type: ignore[arg-type]
    yield Setup(api, cache, actuator, GroupStatusSync(cache, actuator.statuses, actuator.writer))
    actuator.close()
    binder.close()


def bind_then_sync(s: Setup, flush_between: bool) -> None:
    """What ``Scheduler.run_once`` and the runner do: apply, assume (same now), then sync."""
    result = landed(s.actuator.apply(PLAN, NOW))
    assert result.bound == ("ns/g",)
    s.cache.assume(POD_NODES, NOW)
    if flush_between:
        assert s.actuator.writer.flush()
        assert s.api.group_patches == []  # the bind itself writes nothing about the group
    s.sync_and_flush()


@pytest.mark.parametrize("flush_between", [True, False], ids=["bind-written", "bind-queued"])
def test_bind_and_next_sync_patch_the_podgroup_status_once(
        setup: Setup, flush_between: bool) -> None:
    bind_then_sync(setup, flush_between)
    setup.sync_and_flush()
    api = setup.api
    assert len(api.group_patches) == 1
    status = api.group_patches[0]
    assert (status["phase"], status["scheduled"], status["running"]) == ("Scheduled", 2, 0)
    assert status["scheduleStartTime"] == "2024-05-01T12:00:00Z"


def test_watch_confirming_the_bind_costs_no_write_and_keeps_the_start_time(
        setup: Setup) -> None:
    api, cache = setup.api, setup.cache
    bind_then_sync(setup, flush_between=True)
    # One member confirmed, then both (PodScheduled times a little after the bind): same
    # status every time, so nothing is written; partial confirmation never shows 1 of 2.
    cache.upsert_pod(member(0, node_name="n0", started_at=NOW + 0.7))
    setup.sync.sync()
    cache.upsert_pod(member(1, node_name="n1", started_at=NOW + 1.2))
    setup.sync_and_flush()
    assert len(api.group_patches) == 1
    # The pods start: a real change, written once, still with the bind's start time.
    for i, p in enumerate(PODS):
        cache.upsert_pod(dataclasses.replace(p, node_name=f"n{i}", phase=PodPhase.RUNNING,
                                             started_at=NOW + 5))
    setup.sync.sync()
    setup.sync_and_flush()
    assert [s["phase"] for s in api.group_patches] == ["Scheduled", "Running"]
    assert api.group_patches[1]["scheduleStartTime"] == "2024-05-01T12:00:00Z"


def test_a_failed_status_write_is_retried_by_the_next_sync(setup: Setup) -> None:
    api = setup.api
    api.fail_group_patches = 1
    bind_then_sync(setup, flush_between=True)
    assert api.group_patches == []  # the sync's write failed
    setup.sync_and_flush()
    assert len(api.group_patches) == 1  # the next sync wrote it
    setup.sync_and_flush()
    assert len(api.group_patches) == 1


def running_pods(s: Setup) -> None:
    for i, p in enumerate(PODS):
        s.cache.upsert_pod(dataclasses.replace(p, node_name=f"n{i}", phase=PodPhase.RUNNING,
                                               started_at=NOW + 5))
    s.sync_and_flush()


def test_a_preempted_gang_is_not_left_running(setup: Setup) -> None:
    """Issue 16: after preemption the PodGroup still said ``Running`` with no pods left.
    Terminating pods no longer count, and once no member is bound it is Pending again."""
    api, cache = setup.api, setup.cache
    bind_then_sync(setup, flush_between=True)
    running_pods(setup)
    assert api.group_patches[-1]["phase"] == "Running"
    # Evicted: both pods terminating (still on their nodes, still Running until they stop).
    for i, p in enumerate(PODS):
        cache.upsert_pod(dataclasses.replace(p, node_name=f"n{i}", phase=PodPhase.RUNNING,
                                             started_at=NOW + 5, terminating=True))
    setup.sync_and_flush()
    status = api.group_patches[-1]
    assert (status["phase"], status["running"]) == ("Pending", 0), status
    assert status["conditions"][0]["reason"] == "MembersGone"
    assert "2 terminating" in status["conditions"][0]["message"]
    # Then deleted, and recreated by their controller: pending, which is the plan's to
    # explain from now on; the sync writes nothing more.
    for p in PODS:
        cache.delete_pod(p.uid)
    cache.upsert_pod(member(2))
    writes = len(api.group_patches)
    setup.sync_and_flush()
    setup.sync_and_flush()
    assert len(api.group_patches) == writes


def test_a_finished_gang_stays_finished_when_its_pods_are_cleaned_up(setup: Setup) -> None:
    api, cache = setup.api, setup.cache
    bind_then_sync(setup, flush_between=True)
    for i, p in enumerate(PODS):
        cache.upsert_pod(dataclasses.replace(p, node_name=f"n{i}", phase=PodPhase.SUCCEEDED,
                                             started_at=NOW + 5))
    setup.sync_and_flush()
    assert api.group_patches[-1]["phase"] == "Finished"
    writes = len(api.group_patches)
    for p in PODS:
        cache.delete_pod(p.uid)
    setup.sync_and_flush()
    assert len(api.group_patches) == writes  # no pods left says nothing new about it
