"""Issue 39, item 2 in the views: a gang's last failures in the gang tables (one line), in
the per-gang detail (each rank, as ``explain`` words it), on the dashboard (escaped), from
both sources: the live cache and the failed pods read through the apiserver."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from rich.console import Console

from scheduler.kube.read.convert import job_from_json, pod_from_json
from scheduler.model import PodRequirements, Resources
from scheduler.model.failures import Failure, FailureKind
from scheduler.model.workloads import JobInfo, PodInfo, PodPhase
from scheduler.views import apiserver, html, live, text
from scheduler.views.failures import failures_text, gang_failures
from scheduler.views.state import ClusterView
from tests.unit.test_views import _queue_objects, scene, scene_cycle

NOW = 10_000.0


def failure(rank: str, kind: FailureKind, code: int | None, reason: str, age: float,
            message: str = "") -> Failure:
    return Failure(uid=f"u-{rank}-{age}", pod=f"train-{rank}", rank=rank, kind=kind,
                   reason=reason, exit_code=code, container="trainer",
                   finished_at=NOW - age, message=message)


OOM = failure("3", FailureKind.OOM_KILLED, 137, "OOMKilled", 120)
EXIT = [failure("0", FailureKind.CRASHED, 1, "Error", 40),
        failure("1", FailureKind.CRASHED, 1, "Error", 50)]
PREEMPTED = failure("0", FailureKind.PREEMPTED, 137, "PreemptionByScheduler", 60)

#: (case, the gang's failures, its one-line summary, what its detail says of a rank, and
#: what it must never say).
CASES = [
    ("OOMKilled", [OOM], "rank 3: OOMKilled 2m ago",
     "rank 3: OOMKilled (exit code 137) in container trainer, 2m ago (pod train-3)", None),
    ("exit code", EXIT, "2 ranks failed: exit 1, newest 40s ago",
     "rank 1: exit code 1 (Error) in container trainer, 50s ago (pod train-1)", None),
    ("preempted", [PREEMPTED], "rank 0: preempted 1m ago",
     "rank 0: preempted (PreemptionByScheduler): not a failure of its code, 1m ago", "exit"),
    ("mixed", [OOM, PREEMPTED], "2 ranks: preempted, OOMKilled, newest 1m ago",
     "rank 0: preempted (PreemptionByScheduler): not a failure of its code, 1m ago", None),
    ("none", [], None, None, None),
]


def _with(view: ClusterView, failures: list[Failure]) -> ClusterView:
    """The scene with its running gang ns/train given *failures* (as of NOW)."""
    found = gang_failures(failures, lambda _job: None, NOW)
    running = tuple(dataclasses.replace(g, failures=found) if g.id == "ns/train" else g
                    for g in view.running)
    return dataclasses.replace(view, now=NOW, running=running)


def _text(renderable: Any) -> str:
    console = Console(record=True, width=240, color_system=None)
    console.print(renderable)
    return console.export_text()


@pytest.mark.parametrize(("case", "failures", "summary", "detail", "never"), CASES,
                         ids=[c[0] for c in CASES])
def test_rows_text_and_html(case: str, failures: list[Failure], summary: str | None,
                            detail: str | None, never: str | None) -> None:
    view = _with(scene(), failures)
    train = next(g for g in view.running if g.id == "ns/train")
    top, gangs, page = _text(text.top(view)), _text(text.gangs(view)), html.render(view)
    if summary is None:  # no failures: no column, no section
        assert train.failures is None
        assert "last failure" not in top + gangs + page and "Last failures" not in page
        return
    assert detail is not None
    assert train.failures is not None and train.failures.summary == summary, case
    assert "last failure" in top and summary in top  # the table's compact column
    assert summary not in _text(text.queues_table(view))
    assert summary in gangs and detail in gangs  # the per-gang detail, explain's words
    assert gangs.count("last failures (newest per rank)") == 1
    assert "<th>last failure</th>" in page and f">{summary}</td>" in page
    assert f">{detail.split(', ')[0].split(': ', 1)[1]}</td>" in page  # what happened
    if never is not None:  # a preempted pod never reads as a crash
        assert never not in summary and never not in detail
    assert ClusterView.from_dict(json.loads(json.dumps(view.to_dict()))) == view


def test_explain_and_the_views_say_one_thing() -> None:
    """``explain``'s section is the views' detail lines: one wording."""
    found = gang_failures(EXIT, lambda _job: None, NOW)
    assert found is not None
    section = failures_text(EXIT, lambda _job: None, NOW)
    gangs = _text(text.gangs(_with(scene(), EXIT)))
    for line in section.strip().splitlines():
        assert line.strip() in gangs, line


def test_the_dashboard_escapes_pod_messages_and_names() -> None:
    evil = dataclasses.replace(OOM, message="<img src=x onerror=alert(1)>",
                               rank="<b>3</b>", pod="<i>p</i>")
    page = html.render(_with(scene(), [evil]))
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<b>3</b>" not in page and "<i>p</i>" not in page
    assert "&lt;b&gt;3&lt;/b&gt;" in page


# Both sources ---------------------------------------------------------------------------


def _failed_pod_json(name: str, rank: int, *, job: str, reason: str = "OOMKilled",
                     code: int = 137, group: str = "") -> dict[str, Any]:
    """A failed pod as the apiserver lists it (what ``pod_failure`` reads)."""
    labels = {"batch.kubernetes.io/job-completion-index": str(rank)}
    if group:
        labels["scheduling.x-k8s.io/pod-group"] = group
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": labels,
                     "ownerReferences": [{"kind": "Job", "name": job, "uid": f"j-{job}",
                                          "controller": True}]},
        "spec": {"schedulerName": "gang-scheduler",
                 "containers": [{"name": "trainer", "resources": {
                     "requests": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Failed", "containerStatuses": [{"name": "trainer", "state": {
            "terminated": {"exitCode": code, "reason": reason,
                           "finishedAt": "1970-01-01T00:00:30Z"}}}]}}


def _job_json(name: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"j-{name}"},
            "spec": {"parallelism": 2, "completions": 2, "completionMode": "Indexed",
                     "backoffLimitPerIndex": 1},
            "status": status}


def test_both_sources_show_a_job_backing_off_and_a_running_gang_s_earlier_failure() -> None:
    sched, plan = scene_cycle()
    cache = sched.cache
    # A Job whose two ranks failed (OOMKilled, exit 3): no pods now, its controller backs off.
    cache.upsert_job(job_from_json(_job_json("ddp")))
    cache.upsert_pod(pod_from_json(_failed_pod_json("ddp-0-x", 0, job="ddp")))
    cache.upsert_pod(pod_from_json(_failed_pod_json("ddp-1-x", 1, job="ddp", reason="Error",
                                                    code=3)))
    # A Job that completed after a failure: not a failing gang any more.
    cache.upsert_job(job_from_json(_job_json("done", succeeded=2)))
    cache.upsert_pod(pod_from_json(_failed_pod_json("done-0-x", 0, job="done")))
    # The running gang ns/train lost a member to preemption earlier (its pod failed).
    cache.upsert_pod(PodInfo(
        uid="uid-train-old", namespace="ns", name="train-old",
        requirements=PodRequirements(Resources.of(gpu=2)), scheduler_name="gang-scheduler",
        phase=PodPhase.FAILED, labels={"scheduling.x-k8s.io/pod-group": "train"},
        failure=Failure("uid-train-old", "train-old", "train-old", FailureKind.PREEMPTED,
                        "PreemptionByScheduler", 137, finished_at=0.0)))
    last = sched.last_cycle
    assert last is not None
    inp, in_force = last
    now = 60.0  # 30 s after the Job's pods ended (finishedAt 30 s), 1 min after train-old
    views = [
        live.build(live.Cycle(inp, dataclasses.replace(plan, now=now), in_force,
                              sched.last_queues), cache.gang_pods, failures=cache),
        apiserver.build(inp.gangs, cache.gang_pods, {}, _queue_objects(sched), inp.snapshot,
                        now, failures=cache),
    ]
    for view in views:
        (ddp,) = view.failed
        assert (ddp.id, ddp.state, ddp.workload) == ("ns/ddp", "Failed", "Job/ddp")
        assert ddp.failures is not None
        assert ddp.failures.summary == "2 ranks: OOMKilled, exit 3, newest 30s ago"
        assert [r.retries for r in ddp.failures.ranks] == [
            "retry 1 of backoffLimitPerIndex 1 comes next (the last: one more failure fails "
            "rank 0)",
            "retry 1 of backoffLimitPerIndex 1 comes next (the last: one more failure fails "
            "rank 1)"]
        train = next(g for g in view.running if g.id == "ns/train")
        assert train.failures is not None
        assert train.failures.summary == "pod train-old: preempted 1m ago"
        assert all(g.failures is None for g in view.pending)
        page, top = html.render(view), _text(text.top(view))
        assert "<h2>Failed gangs</h2>" in page and "data-gang='ns/ddp'" in page
        assert "1 failed" in top and "ns/ddp (Job)" in top
        assert "ns/done" not in page
    assert views[0].for_namespaces(["other"]).failed == ()
    assert views[0].failed == views[1].failed


def test_a_job_wide_backoff_is_one_line_for_the_job() -> None:
    job = JobInfo("ns", "train", "j", parallelism=2, completions=2, backoff_limit=4, failed=2)
    records = [dataclasses.replace(f, job="train") for f in EXIT]
    found = gang_failures(records, {"train": job}.get, NOW)
    assert found is not None and [r.retries for r in found.ranks] == ["", ""]
    (line,) = found.jobs
    assert (line.job, line.retries) == ("ns/train",
                                        "retry 2 of backoffLimit 4 comes next (2 more after it)")
    # 10 s doubled once for its 2 failures, from the newest (40 s ago): over.
    assert line.next == "its backoff is over: the Job controller makes its pods again now"
    view = scene()
    view = dataclasses.replace(view, now=NOW, running=tuple(
        dataclasses.replace(g, failures=found) if g.id == "ns/train" else g
        for g in view.running))
    assert "<p class='why'>Job ns/train: retry 2 of backoffLimit 4" in html.render(view)
    assert "  Job ns/train: retry 2 of backoffLimit 4" in _text(text.gangs(view))
