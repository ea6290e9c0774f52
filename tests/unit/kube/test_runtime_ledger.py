"""``gangscheduler.io/runtime-seconds``: written on a workload's owner when a run ends (gone,
or running again with a later start), read back into the gang, so a queue's
``maxRuntimeSeconds`` counts all its runs (``scheduler.kube.write.runtime_ledger``)."""

from __future__ import annotations

from dataclasses import replace

from policies.guards import Guards
from scheduler.feed.grouping import GroupingConfig, build_gangs
from scheduler.kube.write.runtime_ledger import RuntimeLedger
from scheduler.kube.write.status import StatusWriter
from scheduler.kube.write.writer import BackgroundWriter
from scheduler.model import RunningGang
from scheduler.model.workloads import (
    JOBSET_NAME_LABEL,
    RUNTIME_SECONDS_ANNOTATION,
    JobInfo,
    JobSetInfo,
    OwnerRef,
    PodPhase,
)
from tests.unit.kube.test_estimate_annotations import Api
from tests.unit.policies.builders import gang, policies, queue, running
from tests.unit.test_grouping import pod

NOW = 1_800_000_000.0
JOBSET = OwnerRef("JobSet", "train", "js-uid")
LIMITED = policies(replace(queue("q", quota={"a": 64}),
                           guards=Guards(max_runtime_seconds=3600))).queues
UNLIMITED = policies(queue("q", quota={"a": 64})).queues


def run_of(start: float, before: float = 0.0) -> RunningGang:
    g = replace(gang("train"), ran_before=before, owner=JOBSET)
    return running(g, {"a-0000": 1}, start=start)


def cycles(queues: object, *seen: tuple[float, dict[str, RunningGang]]) -> Api:
    api = Api()
    writer = BackgroundWriter()
    ledger = RuntimeLedger(StatusWriter(api), writer)  # type: ignore[arg-type]
    try:
        for now, run in seen:
            ledger.observe(run, queues, now)  # type: ignore[arg-type]
        writer.flush(5.0)
    finally:
        writer.stop()
    return api


def test_a_run_that_ends_adds_its_seconds_to_the_earlier_runs_on_the_owner() -> None:
    api = cycles(LIMITED, (NOW, {"ns/train": run_of(NOW - 100, before=500)}),
                 (NOW + 200, {}))
    ((path, body),) = api.patches
    assert path == "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/train"
    assert body == {"metadata": {"uid": "js-uid",
                                 "annotations": {RUNTIME_SECONDS_ANNOTATION: "800"}}}


def test_a_restart_between_cycles_ends_the_run_at_the_new_start() -> None:
    """Its JobSet recreated the pods: the gang runs again, started later."""
    api = cycles(LIMITED, (NOW, {"ns/train": run_of(NOW - 100)}),
                 (NOW + 60, {"ns/train": run_of(NOW + 30)}))
    ((_, body),) = api.patches
    assert body["metadata"]["annotations"] == {RUNTIME_SECONDS_ANNOTATION: "130"}


def test_a_run_going_on_writes_nothing_nor_does_a_gang_without_a_limit() -> None:
    assert cycles(LIMITED, (NOW, {"ns/train": run_of(NOW)}),
                  (NOW + 60, {"ns/train": run_of(NOW)})).patches == []
    assert cycles(UNLIMITED, (NOW, {"ns/train": run_of(NOW)}), (NOW + 60, {})).patches == []


def test_the_owner_is_the_jobset_and_the_written_value_is_read_back() -> None:
    labels = {JOBSET_NAME_LABEL: "train", "jobset.sigs.k8s.io/replicatedjob-name": "w"}
    pods = [pod(f"train-w-0-{i}", labels=labels, owner=OwnerRef("Job", "train-w-0", "j"),
                node="n1", phase=PodPhase.RUNNING) for i in range(2)]
    jobset = JobSetInfo("ns", "train", "js-uid", annotations={RUNTIME_SECONDS_ANNOTATION: "800"})
    jobs = {"ns/train-w-0": JobInfo("ns", "train-w-0", "j", parallelism=2)}
    out = build_gangs(pods, {}, jobs, GroupingConfig(), jobsets={"ns/train": jobset})
    (rg,) = out.running_by_id.values()
    assert rg.gang.owner == JOBSET and rg.gang.ran_before == 800.0
