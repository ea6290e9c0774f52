"""The live actuator carries out a plan from the plan alone (it has no cache to read)."""

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
from scheduler.placement.types import Assignment, Placement
from scheduler.plan import (
    Bind,
    CyclePlan,
    GiveUp,
    Members,
    Nomination,
    PendingReason,
    ReasonCategory,
    Rollback,
    RollbackCause,
)
from tests.unit.kube.fakes import landed, stalled

PODS = (PodRef("ns", "g-0", "u0"), PodRef("ns", "g-1", "u1"))
WAITING = PendingReason(ReasonCategory.QUOTA, "queue q is full", 1)


@dataclass
class Api:
    calls: list[tuple[str, str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        with self.lock:
            self.calls.append((method, path, body))
        return Response(201 if method == "POST" else 200, b"{}")

    def paths(self, method: str, suffix: str = "") -> list[str]:
        with self.lock:
            return [p for m, p, _ in self.calls if m == method and p.endswith(suffix)]


@pytest.fixture
def actuator() -> Iterator[tuple[Api, KubeActuator]]:
    api = Api()
    binder = Binder(api, concurrency=2)  # type: ignore[arg-type]
    act = KubeActuator(api, binder, StatusWriter(api), EventRecorder(api))  # type: ignore[arg-type]
    yield api, act
    act.close()
    binder.close()


def test_nominations_pending_reasons_give_ups_and_rollbacks_come_from_the_plan(
        actuator: tuple[Api, KubeActuator]) -> None:
    api, act = actuator
    plan = CyclePlan(
        now=0.0,
        nominations=(Nomination("ns/g", ("n1",), ("ns/low",), 0.0,
                                pod_nodes=((PODS[0], "n1"), (PODS[1], "n1"))),),
        pending={"ns/g": WAITING}, members={"ns/g": Members(PODS, "pg-uid")},
        give_ups=(GiveUp("ns/late", "too late", Members((PodRef("ns", "late-0", "l0"),),
                                                        "late-uid")),),
        rollbacks=(Rollback("ns/half", (PodRef("ns", "half-0", "h0"),), "cannot finish",
                            RollbackCause.NO_ROOM),))
    landed(act.apply(plan, 0.0))
    assert act.writer.flush()
    pod_status = api.paths("PATCH", "/status")
    assert "/api/v1/namespaces/ns/pods/g-0/status" in pod_status  # nominated + reason
    assert "/api/v1/namespaces/ns/pods/late-0/status" in pod_status
    assert any(p.endswith("/podgroups/g/status") for p in pod_status)
    assert any(p.endswith("/podgroups/late/status") for p in pod_status)
    assert api.paths("DELETE") == ["/api/v1/namespaces/ns/pods/half-0"]


def test_a_reason_decided_before_a_bind_is_never_written_on_the_bound_pods(
        actuator: tuple[Api, KubeActuator]) -> None:
    api, act = actuator
    with stalled(act.writer):
        act.apply(CyclePlan(now=0.0, pending={"ns/g": WAITING},
                            members={"ns/g": Members(PODS)}), 0.0)  # queued behind the stall
        placement = Placement("ns/g", (Assignment("worker", "n1", 2),))
        landed(act.apply(CyclePlan(now=1.0, binds=(Bind("ns/g", "q", placement,
                                                        ((PODS[0], "n1"), (PODS[1], "n1"))),)),
                         1.0))
    assert len(api.paths("POST", "/binding")) == 2
    assert not [p for p in api.paths("PATCH", "/status") if "/pods/g-" in p]
