"""`explain` says which layer holds a Job back: Kueue's, in its own words, while it is
suspended waiting for admission (the words are pure; the Workloads are given)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.cli import explain_workload as ew
from scheduler.cli.explain_kueue import held_by_kueue, hold_text, workload_of
from scheduler.model.workloads import JobInfo

LQ = {"kueue.x-k8s.io/queue-name": "team"}
JOB = JobInfo("ns", "train", "uid-1", parallelism=8, completions=8, labels=LQ, suspended=True)
NO_ROOM = ("couldn't assign flavors to pod set main: insufficient unused quota for "
           "nvidia.com/gpu in flavor gpu, 8 more needed")


def workload(*conditions: dict[str, str], uid: str = "uid-1") -> dict[str, Any]:
    return {"metadata": {"name": "job-train-abc12",
                         "ownerReferences": [{"kind": "Job", "name": "train", "uid": uid}]},
            "status": {"conditions": list(conditions)}}


@pytest.mark.parametrize(("job", "held"), [
    (JOB, True),
    (JobInfo("ns", "train", "u", labels=LQ), False),  # running: Kueue admitted it
    (JobInfo("ns", "train", "u", suspended=True), False),  # suspended by hand, not Kueue's
])
def test_which_jobs_kueue_holds(job: JobInfo, held: bool) -> None:
    assert held_by_kueue(job) is held


@pytest.mark.parametrize(("wl", "text"), [
    (None, "held by Kueue: not admitted yet (no Workload for it yet: Kueue has not taken it "
           "up; is LocalQueue team there?)"),
    (workload({"type": "QuotaReserved", "status": "False", "reason": "Pending",
               "message": NO_ROOM}),
     f"held by Kueue: not admitted yet (Workload job-train-abc12: {NO_ROOM})"),
    (workload({"type": "Evicted", "status": "True", "message": "Preempted to accommodate a "
               "workload (UID: u2) due to prioritization in the ClusterQueue"}),
     "held by Kueue: not admitted yet (Workload job-train-abc12: Preempted to accommodate a "
     "workload (UID: u2) due to prioritization in the ClusterQueue)"),
    (workload({"type": "QuotaReserved", "status": "False", "message": NO_ROOM},
              {"type": "Evicted", "status": "True", "reason": "Preempted",
               "message": "Preempted to accommodate a higher priority workload"}),
     f"held by Kueue: not admitted yet (Workload job-train-abc12: {NO_ROOM}); Kueue evicted "
     "it before: Preempted to accommodate a higher priority workload"),
    (workload({"type": "Admitted", "status": "True", "message": "admitted"}),
     "held by Kueue: Workload job-train-abc12 is admitted; its Job is resumed next (Kueue "
     "unsuspends it)"),
    (workload(), "held by Kueue: not admitted yet (Workload job-train-abc12: no condition yet)"),
])
def test_the_hold_in_kueues_words(wl: dict[str, Any] | None, text: str) -> None:
    assert hold_text(JOB, wl) == text


def test_the_workload_is_found_by_the_jobs_uid() -> None:
    mine, other = workload(), workload(uid="uid-2")
    assert workload_of(JOB, [other, mine]) is mine
    assert workload_of(JOB, [other]) is None


def test_the_gap_of_a_held_job_names_kueue_not_the_pods() -> None:
    wl = ew.Workload("Job", "ns/train", ("ns/train",), (JOB,))
    text = ew.gap_text(wl, "ns/train", None, 0.0, held=hold_text(JOB, None))
    assert "why" in text and "held by Kueue: not admitted yet" in text
    assert "recreate" not in text  # not the Job controller's backoff
