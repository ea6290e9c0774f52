"""Kubernetes' own PodGroups get the condition kube-scheduler writes, through the actuator.

Bound: ``PodGroupScheduled`` (v1alpha2) / ``PodGroupInitiallyScheduled`` (v1beta1) True,
reason ``Scheduled``; waiting: False, ``Unschedulable`` with the pending reason; a group
that cannot be formed: False, ``SchedulerError``; never back to False once True; preempted:
``DisruptionTarget`` ``PreemptionByScheduler``. Events name the PodGroup in its own API version.

The actuator reads only the plan: its entries carry the group (``Members.native``,
``Bind.native``, ``Eviction.native``); the refused group goes through a whole cycle, from
the cache to the plan's ``unformed`` entry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from policies.queues import PolicySet, QueueSet
from scheduler.decide.plan import (
    Bind,
    CyclePlan,
    Eviction,
    Members,
    PendingReason,
    ReasonCategory,
)
from scheduler.feed.cache import ClusterCache
from scheduler.kube.write.actuator import KubeActuator
from scheduler.model import PodRef, PodRequirements, Resources
from scheduler.model.native import V1ALPHA2, V1BETA1, GroupPolicy, NativeGroupInfo
from scheduler.model.workloads import PodInfo
from scheduler.placement.types import Assignment, Placement
from scheduler.run.loop import Scheduler
from tests.unit.kube.fakes import RecordingApi, landed, recording_actuator
from tests.unit.policies.builders import victim

NOW = 1_714_564_800.0


Api = RecordingApi


def conditions(api: Api) -> list[tuple[str, str, str]]:
    """(type, status, reason) of every condition written on a scheduling.k8s.io PodGroup."""
    return [(c["type"], c["status"], c["reason"]) for path, body in api.patches
            if path.startswith("/apis/scheduling.k8s.io/") for c in body["status"]["conditions"]]


def member(i: int) -> PodInfo:
    return PodInfo(uid=f"u{i}", namespace="ns", name=f"g-{i}",
                   requirements=PodRequirements(Resources.of(gpu=8)),
                   scheduler_name="gang-scheduler", pod_group_name="g")


PODS = [member(0), member(1)]
POD_NODES = tuple((PodRef("ns", p.name, p.uid), f"n{i}") for i, p in enumerate(PODS))


def native(version: str = V1ALPHA2, **changes: Any) -> NativeGroupInfo:
    group = NativeGroupInfo("ns", "g", GroupPolicy(min_count=2), uid="pg-uid",
                            api_version=version, generation=3)
    return dataclasses.replace(group, **changes)


def bind(group: NativeGroupInfo) -> CyclePlan:
    return CyclePlan(now=NOW, binds=(Bind("ns/g", "team-a", Placement(
        "ns/g", (Assignment("", "n0", 1), Assignment("", "n1", 1))), POD_NODES,
        native=group),))


def wait(group: NativeGroupInfo) -> CyclePlan:
    return CyclePlan(now=NOW, pending={"ns/g": PendingReason(
        ReasonCategory.PLACEMENT, "needs 16 GPUs, 8 free")}, members={"ns/g": Members(
            tuple(ref for ref, _ in POD_NODES), native=group)})


class Fixed:
    def current(self) -> PolicySet:
        return PolicySet(QueueSet.of([]))


@pytest.fixture
def setup() -> Iterator[tuple[Api, ClusterCache, KubeActuator]]:
    yield from recording_actuator(PODS)


def apply(actuator: KubeActuator, plan: CyclePlan) -> None:
    landed(actuator.apply(plan, NOW))
    assert actuator.writer.flush()


@pytest.mark.parametrize(("version", "kind"), [(V1ALPHA2, "PodGroupScheduled"),
                                               (V1BETA1, "PodGroupInitiallyScheduled")])
def test_waiting_then_bound_in_the_object_own_version(
        setup: tuple[Api, ClusterCache, KubeActuator], version: str, kind: str) -> None:
    api, _, actuator = setup
    group = native(version)
    apply(actuator, wait(group))
    apply(actuator, wait(group))  # unchanged: not written again
    apply(actuator, bind(group))
    assert conditions(api) == [(kind, "False", "Unschedulable"), (kind, "True", "Scheduled")]
    path, body = next((p, b) for p, b in api.patches if "/podgroups/" in p)
    assert path == f"/apis/{version}/namespaces/ns/podgroups/g/status"
    condition = body["status"]["conditions"][0]
    assert "needs 16 GPUs, 8 free" in condition["message"]
    assert condition["observedGeneration"] == 3 and condition["lastTransitionTime"]
    assert body["metadata"] == {"uid": "pg-uid"}
    regarding = {(e["regarding"]["kind"], e["regarding"]["apiVersion"]) for e in api.events}
    assert regarding == {("PodGroup", version), ("Pod", "v1")}, \
        "events name the PodGroup in its own API version, and go on its pods too"


def test_never_back_to_false_once_scheduled(
        setup: tuple[Api, ClusterCache, KubeActuator]) -> None:
    api, _, actuator = setup
    apply(actuator, bind(native()))
    apply(actuator, wait(native()))  # e.g. a replacement member waits: the group was scheduled
    assert conditions(api) == [("PodGroupScheduled", "True", "Scheduled")]


def test_a_group_seen_scheduled_by_another_scheduler_is_not_marked_unschedulable(
        setup: tuple[Api, ClusterCache, KubeActuator]) -> None:
    api, _, actuator = setup
    apply(actuator, wait(native(scheduled=True)))
    assert conditions(api) == []


def test_a_refused_group_says_scheduler_error(
        setup: tuple[Api, ClusterCache, KubeActuator]) -> None:
    """A gang that cannot be formed (a member held back by a scheduling gate) is not
    merely unschedulable: ``SchedulerError``, with the reason."""
    api, cache, actuator = setup
    cache.upsert_native_group(native())
    cache.upsert_pod(dataclasses.replace(PODS[0], scheduling_gates=("example.com/hold",)))
    Scheduler(cache, Fixed(), lambda: NOW, actuator).run_once()
    assert actuator.writer.flush()
    assert conditions(api) == [("PodGroupScheduled", "False", "SchedulerError")]
    message = next(b for p, b in api.patches if "/podgroups/" in p)["status"]["conditions"][0][
        "message"]
    assert "scheduling gates (example.com/hold)" in message, message


def test_a_preempted_group_is_a_disruption_target(
        setup: tuple[Api, ClusterCache, KubeActuator]) -> None:
    api, _, actuator = setup
    apply(actuator, CyclePlan(now=NOW, evictions=(Eviction(
        victim("ns/g", tuple(ref for ref, _ in POD_NODES), native=native()), "ns/urgent",
        "higher priority"),)))
    assert ("DisruptionTarget", "True", "PreemptionByScheduler") in conditions(api)
