"""A rollback releases the bound members of a gang the core gave up: ``DisruptionTarget``
first (what a Job's podFailurePolicy can ignore), then the delete, counted by cause; a pod
whose condition got no answer is not deleted bare (the next cycle tries again)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.decide.plan import Rollback, RollbackCause
from scheduler.kube.client import Response, TransportError
from scheduler.kube.write.binder import Binder
from scheduler.kube.write.rollback import GANG_ROLLED_BACK, Releaser
from scheduler.kube.write.status import StatusWriter
from scheduler.model import PodRef
from scheduler.run.metrics import SchedulerMetrics
from tests.unit.kube.test_binder import PodStore


@dataclass
class Unanswered(PodStore):
    """Status writes of the pods in ``silent`` get no reply (the apiserver restarting)."""

    silent: set[str] = field(default_factory=set)

    def request(self, method: str, path: str, **kw: Any) -> Response:
        if method == "PATCH" and path.split("/")[6] in self.silent:
            raise TransportError("connection refused")
        return super().request(method, path, **kw)


@pytest.fixture
def store() -> Unanswered:
    return Unanswered()


@pytest.fixture
def released(store: Unanswered) -> Iterator[tuple[Releaser, SchedulerMetrics,
                                                  list[tuple[str, tuple[PodRef, ...], str]]]]:
    binder = Binder(store, concurrency=2)  # type: ignore[arg-type]
    metrics = SchedulerMetrics()
    told: list[tuple[str, tuple[PodRef, ...], str]] = []
    yield (Releaser(binder, StatusWriter(store),  # type: ignore[arg-type]
                    lambda *a: told.append(a), metrics), metrics, told)
    binder.close()


def deleted(m: SchedulerMetrics, cause: str) -> float:
    return m.registry.get_sample_value("gang_scheduler_pods_deleted_total",
                                       {"cause": cause}) or 0.0


def test_each_pod_is_marked_then_deleted_and_counted_by_cause(
        store: Unanswered, released: tuple[Releaser, SchedulerMetrics, list[Any]]) -> None:
    releaser, metrics, told = released
    pods = tuple(store.add("h0", "h1", node="n0"))
    releaser.roll_back([Rollback("ns/h", pods, "Placement: no room", RollbackCause.NO_ROOM)])
    assert sorted(name for name, _ in store.patched) == ["h0", "h1"]
    (condition,) = store.patched[0][1]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionTarget", "True", GANG_ROLLED_BACK)
    assert condition["message"] == "gang ns/h rolled back (NoRoom): Placement: no room"
    order = [(m, n) for m, n in store.calls if n == "h0"]
    assert order == [("PATCH status", "h0"), ("DELETE", "h0")]  # the condition first
    assert store.pods == {}
    assert deleted(metrics, "NoRoom") == 2
    assert told == [("ns/h", pods, condition["message"])]


def test_a_pod_whose_condition_got_no_answer_is_not_deleted_bare(
        store: Unanswered, released: tuple[Releaser, SchedulerMetrics, list[Any]]) -> None:
    releaser, metrics, _ = released
    pods = tuple(store.add("h0", "h1", node="n0"))
    store.silent.add("h1")
    releaser.roll_back([Rollback("ns/h", pods, "short", RollbackCause.MEMBER_GONE)])
    assert set(store.pods) == {"h1"} and ("DELETE", "h1") not in store.calls
    assert deleted(metrics, "MemberGone") == 1


def test_a_pod_gone_or_recreated_since_is_left_alone(
        store: Unanswered, released: tuple[Releaser, SchedulerMetrics, list[Any]]) -> None:
    releaser, metrics, _ = released
    (h0,) = store.add("h0", node="n0")
    store.pods["h0"]["uid"] = "reborn"  # the patch's uid precondition answers 409
    releaser.roll_back([Rollback("ns/h", (h0, PodRef("ns", "gone", "g")), "short",
                                 RollbackCause.MEMBER_GONE)])
    assert "h0" in store.pods and not [c for c in store.calls if c[0] == "DELETE"]
    assert deleted(metrics, "MemberGone") == 0
