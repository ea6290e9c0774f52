"""A preemptor's nominatedNodeName is never written once its pods are bound.

A nomination is written in the background; the preemptor is bound the cycle after its victims
are gone, often before the write runs. The apiserver then refuses the write with HTTP 422
("may not be set on pods that are already bound"), which the deploy e2e test saw in the log.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.cache import ClusterCache
from scheduler.kube.actuator import KubeActuator
from scheduler.kube.binder import Binder
from scheduler.kube.client import Response
from scheduler.kube.events import EventRecorder
from scheduler.kube.status import StatusWriter
from scheduler.model import PodRef
from tests.unit.kube.test_group_status_writes import PODS


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
def setup() -> Iterator[tuple[Api, ClusterCache, KubeActuator]]:
    api, cache = Api(), ClusterCache()
    for p in PODS:
        cache.upsert_pod(p)
    binder = Binder(api, concurrency=2)  # type: ignore[arg-type]
    actuator = KubeActuator(api, cache, binder, StatusWriter(api), EventRecorder(api))  # type: ignore[arg-type]
    yield api, cache, actuator
    actuator.close()
    binder.close()


def nominations(api: Api) -> list[str]:
    return [path for path, body in api.patches if "nominatedNodeName" in body["status"]]


def test_a_pending_preemptor_gets_its_nomination(setup: tuple[Api, ClusterCache, KubeActuator]
                                                 ) -> None:
    api, _, actuator = setup
    pod = PODS[0]
    actuator._nominate_pod(PodRef(pod.namespace, pod.name, pod.uid), "n0")
    assert nominations(api) == [f"/api/v1/namespaces/ns/pods/{pod.name}/status"]


def test_no_nomination_lands_on_a_pod_being_bound_or_bound(
        setup: tuple[Api, ClusterCache, KubeActuator]) -> None:
    import dataclasses

    api, cache, actuator = setup
    binding, bound = PODS
    with actuator._explain_lock:
        actuator._binding = {binding.uid}  # handed to the binder, the watch not yet caught up
    cache.upsert_pod(dataclasses.replace(bound, node_name="n1"))  # the watch saw it bound
    for pod in PODS:
        actuator._nominate_pod(PodRef(pod.namespace, pod.name, pod.uid), "n0")
    assert nominations(api) == []
