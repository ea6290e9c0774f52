"""How a failed pod's status becomes its failure record (issue 39: a Job failing in a backoff
loop is explained with its ranks' exit reasons): table-driven, raw pod JSON in, record out.
A status this cannot read never costs the pod its record, nor the pod its conversion."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.kube.read.convert import job_from_json, pod_from_json
from scheduler.kube.read.pod_failure import MESSAGE_CHARS, failure_rules, pod_failure
from scheduler.model.failures import FailureKind, RuleAction

FINISHED = "2026-03-01T10:00:00Z"
FINISHED_TS = 1772359200.0


def terminated(code: Any, reason: str = "Error", name: str = "trainer",
               finished: Any = FINISHED, **extra: Any) -> dict[str, Any]:
    return {"name": name, "state": {"terminated": {"exitCode": code, "reason": reason,
                                                   "finishedAt": finished, **extra}}}


def pod(status: Any, rank: str | None = "3", job: str | None = "train",
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "train-3-x7k2p", "namespace": "ns", "uid": "u3",
                            "labels": {}, "annotations": dict(annotations or {})}
    if rank is not None:
        meta["labels"]["batch.kubernetes.io/job-completion-index"] = rank
    if job is not None:
        meta["ownerReferences"] = [{"kind": "Job", "name": job, "uid": "j", "controller": True}]
    return {"metadata": meta, "spec": {"schedulerName": "gang-scheduler",
                                       "containers": [{"name": "trainer"}]}, "status": status}


def failed(*containers: Any, **status: Any) -> dict[str, Any]:
    return {"phase": "Failed", "containerStatuses": list(containers), **status}


DISRUPTED = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
             "message": "preempted by team-b/llm to start it whole",
             "lastTransitionTime": "2026-03-01T09:59:50Z"}


@dataclass(frozen=True)
class Case:
    name: str
    status: Any
    kind: FailureKind
    reason: str = ""
    exit_code: int | None = None
    container: str = ""
    init: bool = False
    finished_at: float | None = FINISHED_TS
    rank: str = "3"
    extra: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("OOMKilled", failed(terminated(137, "OOMKilled")), FailureKind.OOM_KILLED,
         "OOMKilled", 137, "trainer"),
    Case("exit 1, Error", failed(terminated(1)), FailureKind.CRASHED, "Error", 1, "trainer"),
    Case("the failed container is named, not the first one",
         failed(terminated(0, "Completed", name="sidecar"), terminated(2, name="trainer")),
         FailureKind.CRASHED, "Error", 2, "trainer"),
    Case("evicted by the kubelet (node pressure): no container status",
         {"phase": "Failed", "reason": "Evicted", "message": "The node was low on memory.",
          "conditions": [{"type": "Ready", "status": "False",
                          "lastTransitionTime": FINISHED}]},
         FailureKind.EVICTED, "Evicted", finished_at=FINISHED_TS),
    Case("activeDeadlineSeconds", failed(terminated(137), reason="DeadlineExceeded"),
         FailureKind.DEADLINE, "DeadlineExceeded", 137, "trainer"),
    Case("preempted: the 137 of its kill is not a crash",
         failed(terminated(137), conditions=[DISRUPTED]), FailureKind.PREEMPTED,
         "PreemptionByScheduler", 137, "trainer"),
    Case("drained through the Eviction API",
         failed(terminated(143), conditions=[{**DISRUPTED, "reason": "EvictionByEvictionAPI"}]),
         FailureKind.EVICTED, "EvictionByEvictionAPI", 143, "trainer"),
    Case("an init container failed: the app container never ran",
         failed({"name": "trainer", "state": {"waiting": {"reason": "PodInitializing"}}},
                initContainerStatuses=[terminated(3, name="fetch-data")]),
         FailureKind.CRASHED, "Error", 3, "fetch-data", init=True),
    Case("a restarted container's last state",
         failed({"name": "trainer", "lastState": {"terminated": {
             "exitCode": 1, "reason": "Error", "finishedAt": FINISHED}}}),
         FailureKind.CRASHED, "Error", 1, "trainer"),
    Case("a bare pod without rank: the rank is its name", failed(terminated(1)),
         FailureKind.CRASHED, "Error", 1, "trainer", rank="train-3-x7k2p",
         extra={"rank": None, "job": None}),
    # Malformed or missing: a record all the same, with what could be read.
    Case("no status beyond the phase", {"phase": "Failed"}, FailureKind.UNKNOWN,
         finished_at=None),
    Case("containerStatuses not a list", {"phase": "Failed", "containerStatuses": "x"},
         FailureKind.UNKNOWN, finished_at=None),
    Case("entries not objects, exit code a string, a time unreadable",
         failed(None, "x", terminated("1", finished="yesterday")), FailureKind.UNKNOWN,
         "Error", None, "trainer", finished_at=None),
    Case("terminated with exit code 0 yet Failed", failed(terminated(0, "Completed")),
         FailureKind.UNKNOWN, "Completed", 0, "trainer"),
    Case("conditions malformed", failed(terminated(1), conditions=[None, "x", {"type": 3}]),
         FailureKind.CRASHED, "Error", 1, "trainer"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_failed_pod_becomes_one_record(case: Case) -> None:
    kwargs = {"rank": "3", "job": "train", **case.extra}
    record = pod_failure(pod(case.status, **kwargs))
    assert record is not None
    assert (record.kind, record.reason, record.exit_code, record.container,
            record.init_container, record.finished_at, record.rank) == (
        case.kind, case.reason, case.exit_code, case.container, case.init, case.finished_at,
        case.rank), case.name
    assert record.pod == "train-3-x7k2p" and record.uid == "u3"
    assert record.job == ("train" if kwargs["job"] else "")
    assert record.disrupted is (case.kind in (FailureKind.PREEMPTED, FailureKind.EVICTED))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_converting_the_pod_keeps_the_record_and_never_fails(case: Case) -> None:
    kwargs = {"rank": "3", "job": "train", **case.extra}
    info = pod_from_json(pod(case.status, **kwargs))
    assert info.failure == pod_failure(pod(case.status, **kwargs))


@pytest.mark.parametrize("phase", ["Running", "Succeeded", "Pending", None])
def test_only_a_failed_pod_has_a_record(phase: str | None) -> None:
    assert pod_failure(pod({"phase": phase, "containerStatuses": [terminated(1)]})) is None
    assert pod_from_json(pod({"phase": phase} if phase else {})).failure is None


@pytest.mark.parametrize("raw", [None, "pod", {"metadata": "x", "status": {"phase": "Failed"}}])
def test_not_even_an_object(raw: Any) -> None:
    record = pod_failure(raw)
    assert record is None or (record.kind is FailureKind.UNKNOWN and record.pod == "?")


def test_the_message_is_kept_short_and_on_one_line() -> None:
    long = "Traceback:\n" + "x" * 1000
    record = pod_failure(pod(failed(terminated(1, message=long))))
    assert record is not None and len(record.message) == MESSAGE_CHARS
    assert "\n" not in record.message and record.message.startswith("Traceback: x")


def test_the_job_controller_s_per_index_counts_are_read() -> None:
    record = pod_failure(pod(failed(terminated(1)), annotations={
        "batch.kubernetes.io/job-index-failure-count": "2",
        "batch.kubernetes.io/job-index-ignored-failure-count": "1"}))
    assert record is not None and (record.index_failures, record.index_ignored_failures,
                                   record.index) == (2, 1, 3)


def test_every_non_zero_exit_is_kept_for_the_pod_failure_policy() -> None:
    record = pod_failure(pod(failed(terminated(0, "Completed", name="a"), terminated(42),
                                    initContainerStatuses=[terminated(0, name="i")])))
    assert record is not None and record.exits == (("trainer", 42, False),)


JOB: dict[str, Any] = {"metadata": {"name": "train", "namespace": "ns", "uid": "j"},
       "spec": {"parallelism": 2, "completions": 2, "completionMode": "Indexed",
                "backoffLimit": 3, "podFailurePolicy": {"rules": [
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                    {"action": "FailJob", "onExitCodes": {"containerName": "trainer",
                                                          "operator": "In", "values": [42]}},
                    {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [0]}},
                    {"action": "Bogus", "onExitCodes": {"operator": "In", "values": [1]}},
                    "not a rule", {"action": "Ignore"}]}},
       "status": {"failed": 4, "failedIndexes": "0,2-3", "conditions": [
           {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}}


def test_a_job_s_failure_counts_and_rules() -> None:
    job = job_from_json(JOB)
    assert (job.backoff_limit, job.failed, job.failed_indexes, job.failed_reason) == (
        3, 4, frozenset({0, 2, 3}), "BackoffLimitExceeded")
    assert [(r.action, sorted(r.exit_codes), r.not_in, r.container, sorted(r.conditions))
            for r in job.failure_rules] == [
        (RuleAction.IGNORE, [], False, "", ["DisruptionTarget"]),
        (RuleAction.FAIL_JOB, [42], False, "trainer", []),
        (RuleAction.COUNT, [0], True, "", [])]


def test_a_job_s_malformed_failure_status_is_no_reason_to_skip_it() -> None:
    raw = copy.deepcopy(JOB)
    raw["status"] = {"failed": "many", "failedIndexes": "x-y", "conditions": "no"}
    raw["spec"]["podFailurePolicy"] = {"rules": "none"}
    job = job_from_json(raw)
    assert (job.failed, job.failed_indexes, job.failed_reason, job.failure_rules) == (
        0, frozenset(), "", ())
    assert failure_rules({}) == ()
