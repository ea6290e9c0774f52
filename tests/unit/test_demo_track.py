"""The demo tracker: when jobs are due, and what a poll of pods means (started, waiting,
preempted, finished), without a cluster."""

from __future__ import annotations

from scheduler.tools.demo.scenario import JobSpec, Trigger
from scheduler.tools.demo.track import (
    PodObs,
    Tracker,
    compact_reason,
    observe_pod,
    reason_key,
)


def job(name: str, workers: int = 2, after: tuple[Trigger, ...] = (), delay: float = 0,
        runtime: float = 20) -> JobSpec:
    return JobSpec(name, "team-a", "a100", workers, 1, runtime=runtime, expected=runtime,
                   after=after, delay=delay)


def pod(job: str, i: int, node: str = "", phase: str = "Pending", attempt: int = 0,
        deleting: bool = False, message: str = "") -> PodObs:
    return PodObs(f"{job}-{i}", job, attempt, "team-a", node, phase, 1, deleting, message)


def test_jobs_are_due_after_their_triggers_plus_the_scaled_delay() -> None:
    t = Tracker([job("a"), job("b", after=(Trigger("a", "started"),), delay=4)], speed=2)
    assert [j.name for j in t.due(0)] == ["a"]
    t.submitted("a", 0)
    assert t.due(1) == []
    t.update([pod("a", 0, "n1", "Running"), pod("a", 1, "n1", "Running")], 3.0)
    assert t.due(4.9) == []  # started at 3, delay 4 s at speed 2 = 2 s
    assert [j.name for j in t.due(5.0)] == ["b"]


def test_a_gang_starts_when_every_member_is_bound_and_partial_moments_are_measured() -> None:
    t = Tracker([job("a", workers=3)], speed=1)
    t.submitted("a", 0)
    assert t.update([pod("a", i) for i in range(2)], 1) == []  # members still being created
    waiting = t.update([pod("a", i, message="Queued (#1 in queue order): needs 3 GPUs; x")
                        for i in range(3)], 2)
    assert [e.kind for e in waiting] == ["waiting"]
    assert "needs 3 GPUs" in waiting[0].text and "; x" not in waiting[0].text
    # The same kind of wait with another queue position is not news.
    assert t.update([pod("a", i, message="Queued (#2 in queue order): needs 3 GPUs")
                     for i in range(3)], 3) == []
    t.update([pod("a", 0, "n1"), pod("a", 1, "n1"), pod("a", 2)], 4.0)
    started = t.update([pod("a", i, "n1") for i in range(3)], 4.5)
    assert [e.kind for e in started] == ["started"] and "waited 4s" in started[0].text
    p = t.jobs["a"]
    assert p.state == "Running" and p.longest_partial == 0.5


def test_a_running_gang_that_loses_pods_was_preempted_and_resumes_with_what_was_left() -> None:
    t = Tracker([job("a", runtime=20)], speed=2)
    t.submitted("a", 0)
    t.update([pod("a", i, "n1", "Running") for i in range(2)], 1)
    events = t.update([pod("a", 0, "n1", "Running", deleting=True,
                           message="preempted by team-a/urgent"), pod("a", 1, "n1", "Running")],
                      4)
    assert [e.kind for e in events] == ["preempted"]
    assert "team-a/urgent" in events[0].text
    p = t.jobs["a"]
    assert p.attempt == 1 and p.state == "Not yet"
    assert p.remaining == 14  # ran 3 s at speed 2 = 6 of 20 s of work
    assert t.submitted("a", 4).text.startswith("resubmitted a (attempt 2")
    assert p.state == "Requeued"
    # Pods of the old attempt are ignored; the new attempt runs and finishes.
    t.update([pod("a", i, "n2", "Running", attempt=1) for i in range(2)], 5)
    done = t.update([pod("a", i, "n2", "Succeeded", attempt=1) for i in range(2)], 12)
    assert [e.kind for e in done] == ["finished"]
    assert t.finished() and t.counts() == (1, 1) and len(p.preemptions) == 1


def test_observe_pod_reads_labels_requests_and_conditions() -> None:
    raw = {"metadata": {"name": "x-0", "namespace": "team-b", "deletionTimestamp": "t",
                        "labels": {"demo.gangscheduler.io/job": "x",
                                   "demo.gangscheduler.io/attempt": "2"}},
           "spec": {"nodeName": "h100-0001", "containers": [
               {"resources": {"requests": {"nvidia.com/gpu": "8"}}}]},
           "status": {"phase": "Running", "conditions": [
               {"type": "DisruptionTarget", "status": "True", "message": "by y"}]}}
    assert observe_pod(raw) == PodObs("x-0", "x", 2, "team-b", "h100-0001", "Running", 8,
                                      True, "by y")
    assert observe_pod({"metadata": {"name": "other", "labels": {}}}) is None


RESERVED = ("Reserved (#1 in queue order): queue team-b in pool h100: needs 32 nvidia.com/gpu, "
            "16 available (nominal 16, in use 0); beyond its nominal quota it can only borrow "
            "what queues under research leave idle; wait for gangs to finish, or raise the "
            "quota; reserved 4 node(s) and its quota until running gangs are expected to end or "
            "be reclaimed")
BEHIND = ("Queued (#2 in queue order): queue team-a in pool h100: needs 8 nvidia.com/gpu, -16 "
          "available (nominal 16, in use 16); beyond its nominal quota it can only borrow what "
          "queues under research leave idle; wait for gangs to finish, or raise the quota; the "
          "nodes and quota reserved for team-b/b-llm are not usable by "
          "a gang that would still run then")


def test_compact_reasons_keep_kind_figures_and_reservation() -> None:
    assert compact_reason(RESERVED) == ("Reserved: needs 32 h100 GPUs, 16 available to team-b; "
                                        "reserved 4 node(s)")
    assert compact_reason(BEHIND) == ("Queued: needs 8 h100 GPUs, 0 available to team-a; "
                                      "behind the reservation of team-b/b-llm")
    assert compact_reason("WaitingForMembers: 3 of 4 exist; x") == "WaitingForMembers: 3 of 4 exist"
    # Only the estimate moves from cycle to cycle: not a new wait.
    assert reason_key(RESERVED) == reason_key(RESERVED.replace("in 5s", "in 4s"))
    assert reason_key(RESERVED) != reason_key(RESERVED.replace("16 available", "8 available"))
