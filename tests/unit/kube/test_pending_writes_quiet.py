"""A pending gang whose reason does not change costs no API writes (issue 16: 38 -> 68
events in 30 s, one per cycle, and a status write per cycle, because the countdown to the
estimated start was in the message).

Thirty one-second cycles of the real ``decide`` for a reserved gang with two pods and a
PodGroup, carried out by the real actuator against a fake apiserver: the first cycle writes
the PodGroup status (with ``estimatedStart``), each pod's condition and one event per object;
the other 29 write nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan, ReasonCategory
from scheduler.kube.client import Response
from scheduler.kube.events import EventRecorder
from scheduler.kube.write.actuator import KubeActuator
from scheduler.kube.write.binder import Binder
from scheduler.kube.write.status import StatusWriter
from scheduler.model.durations import format_time
from scheduler.model.workloads import ESTIMATE_TIME_ANNOTATION, ESTIMATED_START_ANNOTATION
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, policies
from tests.unit.test_answers_that_help import A100, BORROWERS, NOW, TEAMS


@dataclass
class Api:
    """Counts writes by what they touch."""

    writes: Counter[str] = field(default_factory=Counter)
    bodies: list[tuple[str, Any]] = field(default_factory=list)

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        kind = ("event" if "/events" in path else "podgroup" if "/podgroups/" in path
                else "pod" if "/pods/" in path else path)
        self.writes[f"{method} {kind}"] += 1
        self.bodies.append((kind, body))
        return Response(201 if method == "POST" else 200, b"{}")


@dataclass
class Clock:
    now: float = NOW

    def __call__(self) -> float:
        return self.now


def test_a_reserved_gang_is_written_once_in_thirty_cycles() -> None:
    api, clock = Api(), Clock()
    binder = Binder(api, concurrency=1)  # type: ignore[arg-type]
    actuator = KubeActuator(api, binder, StatusWriter(api, clock=clock),  # type: ignore[arg-type]
                            EventRecorder(api, clock=clock))  # type: ignore[arg-type]
    big = replace(gang("big", "a", pods=2, with_pods=True), pod_group=True)
    previous: CyclePlan | None = None
    per_cycle = []
    try:
        for second in range(30):
            clock.now = NOW + second
            plan = decide(Snapshot(A100, BORROWERS), [big], policies(*TEAMS), clock.now,
                          previous, solver=SOLVE)
            assert plan.pending[big.id].category is ReasonCategory.RESERVED
            before = sum(api.writes.values())
            actuator.apply(plan, clock.now)
            assert actuator.writer.flush()
            per_cycle.append(sum(api.writes.values()) - before)
            previous = plan
    finally:
        actuator.close()
        binder.close()
    # First cycle: PodGroup status, two pod conditions, the two pods' estimate annotations,
    # three events (PodGroup, two pods).
    assert api.writes == Counter({"PATCH podgroup": 1, "PATCH pod": 4, "POST event": 3}), \
        api.writes
    assert per_cycle == [8] + [0] * 29
    status = next(body for kind, body in api.bodies if kind == "podgroup")["status"]
    assert status["estimatedStart"] == format_time(NOW + 200)
    assert "estimated start in" not in status["conditions"][0]["message"]
    # The queue position is a field too: the message carries neither.
    assert status["queuePosition"] == 1
    assert "in queue order" not in status["conditions"][0]["message"]
    annotations = [body["metadata"]["annotations"] for kind, body in api.bodies
                   if kind == "pod" and "annotations" in (body.get("metadata") or {})]
    assert [a[ESTIMATED_START_ANNOTATION] for a in annotations] == [format_time(NOW + 200)] * 2
    assert [a[ESTIMATE_TIME_ANNOTATION] for a in annotations] == [format_time(NOW)] * 2
