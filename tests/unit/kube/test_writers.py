"""Status and event writers: what they send, and that repeats are not re-sent."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.kube.client import Response, TransportError
from scheduler.kube.events import EventReason, EventRecorder, EventType, ObjectRef
from scheduler.kube.write.status import (
    PodGroupPhase,
    PodGroupStatus,
    StatusWriter,
    same_estimate,
)
from scheduler.model import PodRef

POD = PodRef("team-a", "train-0", "uid-0")


@dataclass
class Recorder:
    """Records requests; answers 200 unless ``answer`` says otherwise."""

    answer: Callable[[str, str], int | Exception] = lambda method, path: 200
    calls: list[tuple[str, str, Any, str]] = field(default_factory=list)

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        self.calls.append((method, path, body, content_type))
        code = self.answer(method, path)
        if isinstance(code, Exception):
            raise code
        return Response(code, b'{"message": "m"}')


@dataclass
class Clock:
    now: float = 1_714_564_800.0

    def __call__(self) -> float:
        return self.now


# Pod status --------------------------------------------------------------------------------
def test_unschedulable_condition_is_written_once_per_message() -> None:
    api, clock = Recorder(), Clock()
    writer = StatusWriter(api, clock=clock)
    assert writer.set_unschedulable(POD, "0/4 nodes: 4 Insufficient nvidia.com/gpu")
    assert not writer.set_unschedulable(POD, "0/4 nodes: 4 Insufficient nvidia.com/gpu")
    clock.now += 30
    assert writer.set_unschedulable(POD, "queue research over quota")
    assert len(api.calls) == 2
    method, path, body, ctype = api.calls[1]
    assert (method, path) == ("PATCH", "/api/v1/namespaces/team-a/pods/train-0/status")
    assert ctype == "application/strategic-merge-patch+json"
    cond = body["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("PodScheduled", "False",
                                                              "Unschedulable")
    assert cond["message"] == "queue research over quota"
    assert cond["lastTransitionTime"] == "2024-05-01T12:00:00Z"  # still False since the first
    assert body["metadata"] == {"uid": "uid-0"}


def test_failed_writes_are_retried_and_forget_resets() -> None:
    codes: list[int | Exception] = [500, TransportError("down"), 200, 200]
    api = Recorder(answer=lambda m, p: codes.pop(0))
    writer = StatusWriter(api, clock=Clock())
    assert not writer.set_unschedulable(POD, "x")
    assert not writer.set_unschedulable(POD, "x")
    assert writer.set_unschedulable(POD, "x")
    writer.forget_pod(POD.uid)
    assert writer.set_unschedulable(POD, "x")


def test_nominated_node() -> None:
    api = Recorder()
    writer = StatusWriter(api, clock=Clock())
    assert writer.set_nominated_node(POD, "gpu-3")
    assert not writer.set_nominated_node(POD, "gpu-3")
    assert writer.set_nominated_node(POD, "")
    assert [c[2]["status"] for c in api.calls] == [{"nominatedNodeName": "gpu-3"},
                                                   {"nominatedNodeName": None}]


# PodGroup status ---------------------------------------------------------------------------
PENDING = PodGroupStatus(PodGroupPhase.PENDING, reason="Unschedulable",
                         message="needs 8 GPUs in one rack", schedule_start_time=1_714_564_000)


def test_podgroup_status_body_and_dedup() -> None:
    api, clock = Recorder(), Clock()
    writer = StatusWriter(api, clock=clock)
    assert writer.set_podgroup_status("team-a", "train", PENDING)
    assert not writer.set_podgroup_status("team-a", "train", PENDING)
    _, path, body, ctype = api.calls[0]
    assert path == "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/team-a/podgroups/train/status"
    assert ctype == "application/merge-patch+json"
    assert body["status"] == {
        "phase": "Pending", "scheduled": 0, "running": 0, "succeeded": 0, "failed": 0,
        "scheduleStartTime": "2024-05-01T11:46:40Z",
        "estimatedStart": None, "estimateTime": None, "queuePosition": None,
        "conditions": [{"type": "Scheduled", "status": "False", "reason": "Unschedulable",
                        "message": "needs 8 GPUs in one rack",
                        "lastTransitionTime": "2024-05-01T12:00:00Z"}]}
    clock.now += 60
    running = PodGroupStatus(PodGroupPhase.RUNNING, scheduled=8, running=8, reason="Scheduled")
    assert writer.set_podgroup_status("team-a", "train", running)
    cond = api.calls[-1][2]["status"]["conditions"][0]
    assert (cond["status"], cond["lastTransitionTime"]) == ("True", "2024-05-01T12:01:00Z")


@pytest.mark.parametrize(("status", "scheduled"), [
    (PENDING, "False"),
    (PodGroupStatus(PodGroupPhase.SCHEDULED, scheduled=2, reason="Scheduled"), "True"),
    (PodGroupStatus(PodGroupPhase.FINISHED, scheduled=2, succeeded=2, reason="Finished"), "True"),
    # Members placed, then failed: it was scheduled.
    (PodGroupStatus(PodGroupPhase.FAILED, scheduled=2, failed=2, reason="MembersFailed"), "True"),
    # Failed with no member ever placed: never Scheduled=True (a timed-out group read so).
    (PodGroupStatus(PodGroupPhase.FAILED, reason="ScheduleTimeout"), "False"),
])
def test_the_scheduled_condition_says_whether_members_were_placed(
        status: PodGroupStatus, scheduled: str) -> None:
    (condition,) = status.to_json(0.0)["conditions"]
    assert condition["status"] == scheduled


def reserved(start: float, at: float) -> PodGroupStatus:
    return PodGroupStatus(PodGroupPhase.PENDING, reason="Unschedulable",
                          message="Reserved: needs 32 GPUs; reserved 4 node(s) and its quota",
                          estimated_start=start, estimate_time=at)


def test_estimated_start_is_a_field_written_only_when_it_moves() -> None:
    """Issue 16: the countdown was in the message, so a reserved gang's status was written
    every cycle. Now the estimate is a field (with when it was made), and a cycle whose
    estimate is the same (within a minute, or a tenth of the wait) writes nothing."""
    api, clock = Recorder(), Clock()
    writer = StatusWriter(api, clock=clock)
    start = clock.now + 3600
    assert writer.set_podgroup_status("ns", "pg", reserved(start, clock.now))
    body = api.calls[-1][2]["status"]
    assert (body["estimatedStart"], body["estimateTime"]) == (
        "2024-05-01T13:00:00Z", "2024-05-01T12:00:00Z")
    assert "in 3600s" not in body["conditions"][0]["message"]
    for cycle in range(1, 120):  # two minutes of one-second cycles, the estimate drifting
        clock.now += 1
        assert not writer.set_podgroup_status("ns", "pg", reserved(start + cycle, clock.now))
    assert len(api.calls) == 1
    assert writer.set_podgroup_status("ns", "pg", reserved(start + 900, clock.now))
    assert api.calls[-1][2]["status"]["estimateTime"] == "2024-05-01T12:01:59Z"
    # No estimate any more: the fields are removed (null in a merge patch).
    assert writer.set_podgroup_status("ns", "pg", PENDING)
    assert api.calls[-1][2]["status"]["estimatedStart"] is None


@pytest.mark.parametrize(("old", "new", "same"), [
    (None, None, True), (None, 100.0, False), (100.0, None, False),
    (1000.0, 1059.0, True), (1000.0, 1061.0, False),  # a minute of slack near the start
    (10_000.0, 10_900.0, True), (10_000.0, 11_100.0, False)])  # a tenth of a long wait
def test_same_estimate(old: float | None, new: float | None, same: bool) -> None:
    now = 900.0 if old == 1000.0 else 0.0
    assert same_estimate(old, new, now=now) is same


def test_podgroup_without_status_subresource_falls_back_to_the_object() -> None:
    api = Recorder(answer=lambda m, p: 404 if p.endswith("/status") else 200)
    writer = StatusWriter(api, clock=Clock())
    assert writer.set_podgroup_status("ns", "pg", PENDING)
    assert [(m, p.rsplit("/", 1)[-1]) for m, p, _, _ in api.calls] == [
        ("PATCH", "status"), ("GET", "pg"), ("PATCH", "pg")]
    assert not writer.status_subresource


def test_a_server_error_on_podgroup_status_keeps_the_subresource() -> None:
    """A transient 500 is not a missing subresource: no fallback, and the next try uses it."""
    codes = iter([500, 200])
    api = Recorder(answer=lambda m, p: next(codes) if p.endswith("/status") else 200)
    writer = StatusWriter(api, clock=Clock())
    assert not writer.set_podgroup_status("ns", "pg", PENDING)
    assert writer.status_subresource
    assert writer.set_podgroup_status("ns", "pg", PENDING)
    assert [(m, p.rsplit("/", 1)[-1]) for m, p, _, _ in api.calls] == [
        ("PATCH", "status"), ("PATCH", "status")]


def test_a_deleted_podgroup_is_not_written() -> None:
    api = Recorder(answer=lambda m, p: 404)
    writer = StatusWriter(api, clock=Clock())
    assert not writer.set_podgroup_status("ns", "pg", PENDING)
    assert writer.status_subresource


# Events ------------------------------------------------------------------------------------
def test_an_object_whose_events_keep_changing_is_rate_limited() -> None:
    """client-go's correlator: per object a burst of 25 writes, then one per 5 minutes."""
    api, clock = Recorder(), Clock()
    rec = EventRecorder(api, clock=clock, interval=60)
    ref = ObjectRef.pod(POD)
    written = [rec.emit(ref, EventReason.FAILED_SCHEDULING, f"reason {i}", EventType.WARNING)
               for i in range(40)]
    assert written == [True] * 25 + [False] * 15
    other = ObjectRef.pod(PodRef("team-a", "train-1", "uid-1"))
    assert rec.emit(other, EventReason.FAILED_SCHEDULING, "reason 0"), "a bucket per object"
    clock.now += 300
    assert rec.emit(ref, EventReason.FAILED_SCHEDULING, "reason 41")
    assert not rec.emit(ref, EventReason.FAILED_SCHEDULING, "reason 42")


def test_event_body() -> None:
    api = Recorder(answer=lambda m, p: 201)
    rec = EventRecorder(api, clock=Clock(), instance="gs-0")
    assert rec.emit(ObjectRef.pod(POD), EventReason.FAILED_SCHEDULING, "no fit",
                    EventType.WARNING)
    method, path, body, _ = api.calls[0]
    assert (method, path) == ("POST", "/apis/events.k8s.io/v1/namespaces/team-a/events")
    assert body["metadata"]["name"].startswith("train-0.")
    assert body["regarding"] == {"kind": "Pod", "namespace": "team-a", "name": "train-0",
                                 "uid": "uid-0", "apiVersion": "v1"}
    assert (body["reason"], body["type"], body["note"]) == ("FailedScheduling", "Warning",
                                                            "no fit")
    assert body["eventTime"] == "2024-05-01T12:00:00.000000Z"
    assert (body["reportingController"], body["reportingInstance"]) == (
        "gangscheduler.io/gang-scheduler", "gs-0")


def test_repeats_become_a_series_at_most_once_per_interval() -> None:
    api, clock = Recorder(answer=lambda m, p: 201 if m == "POST" else 200), Clock()
    rec = EventRecorder(api, clock=clock, interval=60)
    ref = ObjectRef.podgroup("team-a", "train", "pg-uid")
    sent = []
    for _ in range(10):  # one cycle every 10 s, same message
        sent.append(rec.emit(ref, EventReason.FAILED_SCHEDULING, "no fit"))
        clock.now += 10
    assert sent == [True] + [False] * 5 + [True] + [False] * 3
    assert [c[0] for c in api.calls] == ["POST", "PATCH"]
    assert api.calls[1][2]["series"]["count"] == 7
    assert api.calls[1][1].endswith(api.calls[0][2]["metadata"]["name"])
    # a different message is a new event; another reason is tracked separately
    assert rec.emit(ref, EventReason.FAILED_SCHEDULING, "over quota")
    assert rec.emit(ref, EventReason.SCHEDULED, "over quota")
    assert [c[0] for c in api.calls] == ["POST", "PATCH", "POST", "POST"]


@pytest.mark.parametrize(("patch_answer", "expected"), [(404, ["POST", "PATCH", "POST"]),
                                                        (500, ["POST", "PATCH"])])
def test_expired_event_is_recreated(patch_answer: int, expected: list[str]) -> None:
    api = Recorder(answer=lambda m, p: 201 if m == "POST" else patch_answer)
    clock = Clock()
    rec = EventRecorder(api, clock=clock, interval=60)
    rec.emit(ObjectRef.pod(POD), "Preempted", "by team-b/big")
    clock.now += 61
    rec.emit(ObjectRef.pod(POD), "Preempted", "by team-b/big")
    assert [c[0] for c in api.calls] == expected


def test_tracking_is_bounded_and_forgettable() -> None:
    api = Recorder(answer=lambda m, p: 201)
    rec = EventRecorder(api, clock=Clock(), max_tracked=2)
    for i in range(3):
        rec.emit(ObjectRef("Pod", "ns", f"p{i}", f"u{i}"), "Scheduled", "ok")
    rec.emit(ObjectRef("Pod", "ns", "p0", "u0"), "Scheduled", "ok")  # evicted: sent again
    assert len(api.calls) == 4
    rec.forget("u2")
    rec.emit(ObjectRef("Pod", "ns", "p2", "u2"), "Scheduled", "ok")
    assert len(api.calls) == 5
