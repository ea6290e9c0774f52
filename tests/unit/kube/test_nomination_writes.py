"""A preemptor's nominatedNodeName is never written once its pods are bound.

A nomination is written in the background; the preemptor is bound the cycle after its victims
are gone, often before the write runs. The apiserver then refuses the write with HTTP 422
("may not be set on pods that are already bound"), which the deploy e2e test saw in the log.
The bind drops the queued nomination; one running meanwhile skips the pods being bound.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduler.decide.plan import CyclePlan, Nomination
from scheduler.feed.cache import ClusterCache
from scheduler.kube.write.actuator import KubeActuator
from scheduler.model import PodRef
from tests.unit.kube.fakes import RecordingApi, recording_actuator, stalled
from tests.unit.kube.test_group_status_writes import PLAN, POD_NODES, PODS

Api = RecordingApi
Setup = tuple[Api, ClusterCache, KubeActuator]


@pytest.fixture
def setup() -> Iterator[Setup]:
    yield from recording_actuator(PODS)


def nominations(api: Api) -> list[str]:
    return [path for path, body in api.patches if "nominatedNodeName" in body["status"]]


def test_a_pending_preemptor_gets_its_nomination(setup: Setup) -> None:
    api, _, actuator = setup
    pod = PODS[0]
    actuator._nominate_pod(PodRef(pod.namespace, pod.name, pod.uid), "n0")
    assert nominations(api) == [f"/api/v1/namespaces/ns/pods/{pod.name}/status"]


def test_no_nomination_lands_on_a_pod_being_bound(setup: Setup) -> None:
    api, _, actuator = setup
    binding = PODS[0]
    with actuator._explain_lock:
        actuator._binding = {binding.uid: 0}  # handed to the binder, the watch not yet caught up
    actuator._nominate_pod(PodRef(binding.namespace, binding.name, binding.uid), "n0")
    assert nominations(api) == []


def test_a_nomination_queued_before_the_bind_is_dropped(setup: Setup) -> None:
    api, _, actuator = setup
    with stalled(actuator.writer):
        actuator.apply(CyclePlan(now=0.0, nominations=(Nomination(
            "ns/g", ("n0", "n1"), ("ns/low",), 0.0, pod_nodes=POD_NODES),)), 0.0)
        actuator.apply(PLAN, 1.0)  # the victims are gone: the preemptor binds
    assert nominations(api) == []
