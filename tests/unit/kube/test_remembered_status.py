"""Fair share with memory survives a restart through the Queue status: the leader writes the
remembered GPU-hours with their time (a new time alone is no write), every replica reads them
back, malformed ones are told and not used, and a new leader starts from them decayed to its
own time."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from structlog.testing import capture_logs

from policies.usage_memory import UsageMemory
from scheduler.kube.read import informer
from scheduler.kube.read.fields import FieldError
from scheduler.kube.read.policy_feed import LivePolicies
from scheduler.kube.read.remembered_status import saved_usage
from scheduler.kube.write.queue_status import QueueStatusPublisher, status_of
from scheduler.model.durations import format_time
from scheduler.run.remembered import RememberedUsage
from tests.unit.kube.test_queue_status import Api, Clock, queue_obj, reports
from tests.unit.policies.builders import policies, queue

H = 3600.0
T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


@pytest.mark.parametrize(("status", "saved"), [
    ({}, None),  # memory off, or never written
    ({"rememberedGPUHours": 2.5, "rememberedAt": format_time(T0)}, (2.5 * H, T0)),
    ({"rememberedGPUHours": 0, "rememberedAt": format_time(T0)}, (0.0, T0)),
])
def test_saved_usage(status: dict[str, Any], saved: tuple[float, float] | None) -> None:
    assert saved_usage(status) == saved


@pytest.mark.parametrize(("status", "path"), [
    ({"rememberedGPUHours": -1, "rememberedAt": format_time(T0)}, "status.rememberedGPUHours"),
    ({"rememberedGPUHours": "lots", "rememberedAt": format_time(T0)},
     "status.rememberedGPUHours"),
    ({"rememberedGPUHours": True, "rememberedAt": format_time(T0)}, "status.rememberedGPUHours"),
    ({"rememberedGPUHours": float("nan"), "rememberedAt": format_time(T0)},
     "status.rememberedGPUHours"),
    ({"rememberedGPUHours": 3.0}, "status.rememberedAt"),
    ({"rememberedGPUHours": 3.0, "rememberedAt": "yesterday"}, "status.rememberedAt"),
])
def test_a_malformed_status_names_the_field(status: dict[str, Any], path: str) -> None:
    with pytest.raises(FieldError) as err:
        saved_usage(status)
    assert err.value.path == path


def _report(hours: float, at: float) -> Any:
    (a, *_) = reports()
    return dataclasses.replace(a, remembered_gpu_hours=hours, remembered_at=at)


def test_the_status_carries_three_digits_and_their_time() -> None:
    status = status_of(_report(1234.5678, T0))
    assert status["rememberedGPUHours"] == 1230.0
    assert status["rememberedAt"] == "2027-01-15T08:00:00Z"
    assert "rememberedGPUHours" not in status_of(reports()[0])  # off: neither


def test_a_new_time_alone_is_no_write() -> None:
    api, clock = Api(), Clock()
    pub = QueueStatusPublisher(api, lambda: True, min_interval=3.0, monotonic=clock)
    assert pub.publish([_report(100.0, T0)]) == 1
    pub.flush()
    clock.now = 10.0
    assert pub.publish([_report(100.04, T0 + 10)]) == 0  # same three digits, later time
    assert pub.publish([_report(99.4, T0 + 20)]) == 1  # the figure changed: with its time
    pub.close()
    written = api.by_queue()["a"]
    assert [(s["rememberedGPUHours"], s["rememberedAt"]) for s in written] == [
        (100.0, format_time(T0)), (99.4, format_time(T0 + 20))]


def _with_status(name: str, status: dict[str, Any]) -> dict[str, Any]:
    return {**queue_obj(name), "status": status}


def test_every_replica_reads_them_back_and_tells_a_malformed_one() -> None:
    live = LivePolicies(write_status=lambda n, s: None)
    live.handle(informer.EventType.ADDED, _with_status("a", {"rememberedGPUHours": 5,
                                                              "rememberedAt": format_time(T0)}))
    with capture_logs() as logs:
        live.handle(informer.EventType.ADDED, _with_status("b", {"rememberedGPUHours": -2,
                                                                  "rememberedAt": "x"}))
    assert live.remembered() == {"a": (5 * H, T0)}
    assert [(e["queue"], e["field"]) for e in logs
            if e["event"] == "queue_status_malformed"] == [("b", "status.rememberedGPUHours")]
    live.handle(informer.EventType.MODIFIED, _with_status("a", {}))  # memory turned off
    assert live.remembered() == {}
    live.handle(informer.EventType.MODIFIED, _with_status("a", {"rememberedGPUHours": 1,
                                                                 "rememberedAt": format_time(T0)}))
    live.handle(informer.EventType.DELETED, _with_status("a", {}))
    assert live.remembered() == {}


def test_a_new_leader_starts_from_them_decayed_to_its_time() -> None:
    """The old leader remembered team-b for 8 GPUs borrowed over a half-life; it wrote that
    on the status, and died. A new leader a half-life later starts from half of it."""
    pol = policies(queue("org", quota={"p": 16}), queue("team-b", "org"),
                   usage_half_life_seconds=H)
    old = UsageMemory().observed(T0, H, {"team-b": 8.0}).observed(T0 + H, H, {})
    remembered = old.at(T0 + H, H)["team-b"]
    status = {"rememberedGPUHours": float(f"{remembered / 3600:.3g}"),
              "rememberedAt": format_time(T0 + H)}
    live = LivePolicies(write_status=lambda n, s: None)
    live.handle(informer.EventType.ADDED, _with_status("team-b", status))
    new = RememberedUsage()
    new.restore(live.remembered(), T0 + 2 * H, pol)
    assert new.on
    assert new.gpu_seconds(T0 + 2 * H)["team-b"] == pytest.approx(remembered / 2, rel=1e-3)
    assert new.gpu_seconds(T0 + 3 * H)["team-b"] == pytest.approx(remembered / 4, rel=1e-3)
    # Off in the new leader's policy: nothing is restored.
    new.restore(live.remembered(), T0 + 2 * H, policies(queue("org")))
    assert not new.on and new.gpu_seconds(T0 + 2 * H) == {}
    assert math.isclose(UsageMemory.restored({"q": (10.0, T0)}, T0 + H, H).gpu_seconds["q"], 5.0)
