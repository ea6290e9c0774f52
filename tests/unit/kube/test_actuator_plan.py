"""The live actuator carries out a plan from the plan alone (it has no cache to read)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.decide.plan import (
    Bind,
    CyclePlan,
    Members,
    Nomination,
    PendingReason,
    ReasonCategory,
    Rollback,
    RollbackCause,
)
from scheduler.kube.client import Response
from scheduler.kube.events import EventRecorder
from scheduler.kube.write.actuator import KubeActuator
from scheduler.kube.write.binder import Binder
from scheduler.kube.write.status import StatusWriter
from scheduler.model import PodRef
from scheduler.model.workloads import SAFE_TO_EVICT_ANNOTATION
from scheduler.placement.types import Assignment, Placement
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


def test_nominations_pending_reasons_and_rollbacks_come_from_the_plan(
        actuator: tuple[Api, KubeActuator]) -> None:
    api, act = actuator
    plan = CyclePlan(
        now=0.0,
        nominations=(Nomination("ns/g", ("n1",), ("ns/low",), 0.0,
                                pod_nodes=((PODS[0], "n1"), (PODS[1], "n1"))),),
        pending={"ns/g": WAITING}, members={"ns/g": Members(PODS, "pg-uid")},
        rollbacks=(Rollback("ns/half", (PodRef("ns", "half-0", "h0"),), "cannot finish",
                            RollbackCause.NO_ROOM),))
    landed(act.apply(plan, 0.0))
    assert act.writer.flush()
    pod_status = api.paths("PATCH", "/status")
    assert "/api/v1/namespaces/ns/pods/g-0/status" in pod_status  # nominated + reason
    assert any(p.endswith("/podgroups/g/status") for p in pod_status)
    assert api.paths("DELETE") == ["/api/v1/namespaces/ns/pods/half-0"]


@dataclass
class Refusing(Api):
    """Answers every DELETE with 500: a rollback that does not happen."""

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        if method == "DELETE":
            with self.lock:
                self.calls.append((method, path, body))
            return Response(500, b"{}")
        return super().request(method, path, query=query, body=body,
                               content_type=content_type, timeout=timeout)


def test_a_rollback_that_failed_asks_for_a_cycle_to_retry_it() -> None:
    # Nothing may change that would run a cycle (the pod stays as it was): the actuator
    # says when it wants another plan, to delete it again.
    rollback = CyclePlan(now=0.0, rollbacks=(Rollback(
        "ns/half", (PodRef("ns", "half-0", "h0"),), "stuck", RollbackCause.NO_ROOM),))
    for api, retry in ((Api(), None), (Refusing(), 5.0)):
        binder = Binder(api, concurrency=2)  # type: ignore[arg-type]
        act = KubeActuator(api, binder, StatusWriter(api), EventRecorder(api))  # type: ignore[arg-type]
        try:
            assert act.apply(rollback, 0.0).retry_in == retry
            assert act.apply(CyclePlan(now=1.0), 1.0).retry_in is None
        finally:
            act.close()
            binder.close()


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


@pytest.mark.parametrize("category", [ReasonCategory.QUOTA, ReasonCategory.PLACEMENT,
                                      ReasonCategory.RESERVED, ReasonCategory.QUEUED,
                                      ReasonCategory.WAITING_FOR_MEMBERS])
def test_a_pending_podgroup_says_its_reason_category(
        actuator: tuple[Api, KubeActuator], category: ReasonCategory) -> None:
    """Issue 32: ``kubectl get podgroups`` showed REASON ``Unschedulable`` for every waiting
    gang. The PodGroup's condition carries the category (the column reads it); the pods keep
    kube-scheduler's ``Unschedulable``, which autoscalers and kubectl key on."""
    api, act = actuator
    plan = CyclePlan(now=0.0, pending={"ns/g": PendingReason(category, "why", 1)},
                     members={"ns/g": Members(PODS, "pg-uid")})
    landed(act.apply(plan, 0.0))
    assert act.writer.flush()
    with api.lock:
        conditions = {p.rsplit("/", 2)[-2]: b["status"]["conditions"][0] for m, p, b in api.calls
                      if m == "PATCH" and p.endswith("/status") and "conditions" in b["status"]}
    assert conditions["g"]["reason"] == str(category)  # the PodGroup
    assert conditions["g"]["message"] == f"{category}: why"
    assert {conditions[p.name]["reason"] for p in PODS} == {"Unschedulable"}


@pytest.mark.parametrize("keep", [True, False])
def test_members_kept_from_scale_down_are_marked_before_any_binds(
        actuator: tuple[Api, KubeActuator], keep: bool) -> None:
    api, act = actuator
    placement = Placement("ns/g", (Assignment("worker", "n1", 2),))
    landed(act.apply(CyclePlan(now=0.0, binds=(Bind(
        "ns/g", "q", placement, ((PODS[0], "n1"), (PODS[1], "n1")),
        keep_from_scale_down=keep),)), 0.0))
    with api.lock:
        order = [(m, p) for m, p, _ in api.calls if "/pods/g-" in p]
        marks = [b for m, p, b in api.calls if m == "PATCH" and "/pods/g-" in p]
    marked = [("PATCH", f"/api/v1/namespaces/ns/pods/{p.name}") for p in PODS] if keep else []
    assert order[:len(marked)] == marked  # every member marked before the first binds
    assert len(api.paths("POST", "/binding")) == 2
    assert marks == [{"metadata": {"annotations": {SAFE_TO_EVICT_ANNOTATION: "false"}}}] * \
        len(marked)


def test_a_gang_whose_members_could_not_be_marked_does_not_bind() -> None:
    class Refusing(Api):
        def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                    content_type: str = "", timeout: Any = None) -> Response:
            if method == "PATCH" and "/pods/g-" in path:
                with self.lock:
                    self.calls.append((method, path, body))
                return Response(500, b'{"message": "etcd unavailable"}')
            return super().request(method, path, query=query, body=body)

    api = Refusing()
    binder = Binder(api, concurrency=2)  # type: ignore[arg-type]
    act = KubeActuator(api, binder, StatusWriter(api), EventRecorder(api))  # type: ignore[arg-type]
    try:
        placement = Placement("ns/g", (Assignment("worker", "n1", 2),))
        result = landed(act.apply(CyclePlan(now=0.0, binds=(Bind(
            "ns/g", "q", placement, ((PODS[0], "n1"), (PODS[1], "n1")),
            keep_from_scale_down=True),)), 0.0))
    finally:
        act.close()
        binder.close()
    assert api.paths("POST", "/binding") == []
    assert "not marked safe from scale-down" in result.failed["ns/g"]
