"""A preemptor's nominatedNodeName is never written once its pods are bound.

A nomination is written in the background; the preemptor is bound the cycle after its victims
are gone, often before the write runs. The apiserver then refuses the write with HTTP 422
("may not be set on pods that are already bound"), which the deploy e2e test saw in the log.
The bind drops the queued nomination; one running meanwhile skips the pods being bound.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.kube.actuator import KubeActuator
from scheduler.kube.binder import Binder
from scheduler.kube.client import Response
from scheduler.kube.events import EventRecorder
from scheduler.kube.status import StatusWriter
from scheduler.model import PodRef
from scheduler.plan import CyclePlan, Nomination
from tests.unit.kube.test_group_status_writes import PLAN, POD_NODES, PODS


@dataclass
class Api:
    patches: list[tuple[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        with self.lock:
            if method == "PATCH" and path.endswith("/status"):
                self.patches.append((path, body))
        return Response(201 if method == "POST" else 200, b"{}")


@pytest.fixture
def setup() -> Iterator[tuple[Api, KubeActuator]]:
    api = Api()
    binder = Binder(api, concurrency=2)  # type: ignore[arg-type]
    actuator = KubeActuator(api, binder, StatusWriter(api), EventRecorder(api))  # type: ignore[arg-type]
    yield api, actuator
    actuator.close()
    binder.close()


def nominations(api: Api) -> list[str]:
    return [path for path, body in api.patches if "nominatedNodeName" in body["status"]]


def test_a_pending_preemptor_gets_its_nomination(setup: tuple[Api, KubeActuator]) -> None:
    api, actuator = setup
    pod = PODS[0]
    actuator._nominate_pod(PodRef(pod.namespace, pod.name, pod.uid), "n0")
    assert nominations(api) == [f"/api/v1/namespaces/ns/pods/{pod.name}/status"]


def test_no_nomination_lands_on_a_pod_being_bound(setup: tuple[Api, KubeActuator]) -> None:
    api, actuator = setup
    binding = PODS[0]
    with actuator._explain_lock:
        actuator._binding = {binding.uid: 0}  # handed to the binder, the watch not yet caught up
    actuator._nominate_pod(PodRef(binding.namespace, binding.name, binding.uid), "n0")
    assert nominations(api) == []


def test_a_nomination_queued_before_the_bind_is_dropped(setup: tuple[Api, KubeActuator]) -> None:
    api, actuator = setup
    held, release = threading.Event(), threading.Event()

    def stall() -> None:
        held.set()
        release.wait(10)
    actuator.writer.submit("stall", stall)
    assert held.wait(10)
    actuator.apply(CyclePlan(now=0.0, nominations=(Nomination(
        "ns/g", ("n0", "n1"), ("ns/low",), 0.0, pod_nodes=POD_NODES),)), 0.0)
    actuator.apply(PLAN, 1.0)  # the victims are gone: the preemptor binds
    release.set()
    assert actuator.writer.flush()
    assert nominations(api) == []
