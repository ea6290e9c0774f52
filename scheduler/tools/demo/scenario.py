"""The demo's workloads: ``scheduler/examples/demo/jobs.yaml`` parsed, and the objects each job
is submitted as (a PodGroup and its pods), built as plain dicts.

Why a data file and pure builders: the story the demo tells (deadlock, reservation and
backfill, preemption) is easier to read and change as YAML than as code, and a unit test can
check every manifest without a cluster. Jobs are released by events ("b-llm submitted",
"a-ddp started") rather than fixed times, so the acts keep their order at any ``--speed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scheduler.model.nodes import DEFAULT_POOL_LABEL
from scheduler.model.resources import GPU
from scheduler.model.workloads import EXPECTED_RUNTIME_ANNOTATION, POD_GROUP_LABEL, QUEUE_LABEL
from scheduler.tools.devcluster.kwok import SIMULATED_RUNTIME

DEMO_DIR = Path(__file__).resolve().parents[2] / "examples" / "demo"
JOBS_FILE = DEMO_DIR / "jobs.yaml"
JOB_LABEL = "demo.gangscheduler.io/job"
ATTEMPT_LABEL = "demo.gangscheduler.io/attempt"
SCHEDULER_NAME = "gang-scheduler"
TRIGGERS = ("submitted", "started", "finished")


class ScenarioError(ValueError):
    """The jobs file is invalid; the message names the field path."""


@dataclass(frozen=True, slots=True)
class Trigger:
    job: str
    event: str  # one of TRIGGERS


@dataclass(frozen=True, slots=True)
class JobSpec:
    name: str
    team: str  # namespace and queue
    pool: str
    workers: int
    gpus_per_worker: int
    runtime: float  # seconds at speed 1
    expected: float
    priority: str = "gang-normal"
    after: tuple[Trigger, ...] = ()
    delay: float = 0.0
    story: str = ""

    @property
    def gpus(self) -> int:
        return self.workers * self.gpus_per_worker

    @property
    def shape(self) -> str:
        return f"{self.workers}×{self.gpus_per_worker}"


def load(path: Path = JOBS_FILE) -> tuple[JobSpec, ...]:
    return parse(yaml.safe_load(path.read_text(encoding="utf-8")))


def parse(data: Any) -> tuple[JobSpec, ...]:
    """Jobs from the file's mapping; every error names its field path."""
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise ScenarioError("jobs: must be a list")
    jobs: list[JobSpec] = []
    for i, raw in enumerate(data["jobs"]):
        where = f"jobs[{i}]"
        if not isinstance(raw, dict):
            raise ScenarioError(f"{where}: must be a mapping")
        try:
            runtime = float(raw["runtime"])
            job = JobSpec(
                name=str(raw["name"]), team=str(raw["team"]), pool=str(raw["pool"]),
                workers=int(raw["workers"]), gpus_per_worker=int(raw["gpusPerWorker"]),
                runtime=runtime, expected=float(raw.get("expected", runtime)),
                priority=str(raw.get("priority", "gang-normal")),
                after=tuple(_trigger(t, f"{where}.after[{k}]")
                            for k, t in enumerate(raw.get("after") or ())),
                delay=float(raw.get("delay", 0)), story=str(raw.get("story", "")))
        except KeyError as exc:
            raise ScenarioError(f"{where}.{exc.args[0]}: required") from None
        except (TypeError, ValueError) as exc:
            raise ScenarioError(f"{where}: {exc}") from None
        if job.workers < 1 or job.gpus_per_worker < 0 or job.runtime <= 0:
            raise ScenarioError(f"{where}: workers >= 1, gpusPerWorker >= 0, runtime > 0")
        jobs.append(job)
    names = [j.name for j in jobs]
    for i, job in enumerate(jobs):
        if names.count(job.name) > 1:
            raise ScenarioError(f"jobs[{i}].name: {job.name!r} is used twice")
        for k, t in enumerate(job.after):
            if t.job not in names or t.job == job.name:
                raise ScenarioError(f"jobs[{i}].after[{k}]: no other job named {t.job!r}")
    return tuple(jobs)


def _trigger(text: Any, where: str) -> Trigger:
    parts = str(text).split()
    if len(parts) != 2 or parts[1] not in TRIGGERS:
        raise ScenarioError(f"{where}: expected '<job> {'|'.join(TRIGGERS)}', got {text!r}")
    return Trigger(parts[0], parts[1])


def seconds(value: float) -> str:
    """An annotation value in seconds, short and exact enough (``"7.5"``, ``"12"``)."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def pod_group(job: JobSpec) -> dict[str, Any]:
    """The PodGroup of `job` (minMember = all workers), charged to the team's queue. The
    runtime estimate is on the pods only: a resumed attempt has less left than the first."""
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": job.name, "namespace": job.team,
                         "labels": {QUEUE_LABEL: job.team, JOB_LABEL: job.name}},
            "spec": {"minMember": job.workers}}


def pods(job: JobSpec, attempt: int, runtime: float, speed: float) -> list[dict[str, Any]]:
    """The worker pods of one attempt; `runtime` (speed 1 seconds) is what is left to run,
    and the estimate shrinks with it (a resumed run has less left to do)."""
    expected = job.expected * runtime / job.runtime
    prefix = job.name if attempt == 0 else f"{job.name}-r{attempt}"
    resources: dict[str, Any] = {"requests": {"cpu": "1", "memory": "4Gi"}}
    if job.gpus_per_worker:
        resources["requests"][GPU] = str(job.gpus_per_worker)
        resources["limits"] = {GPU: str(job.gpus_per_worker)}
    return [{
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"{prefix}-{i}", "namespace": job.team,
            "labels": {POD_GROUP_LABEL: job.name, QUEUE_LABEL: job.team, JOB_LABEL: job.name,
                       ATTEMPT_LABEL: str(attempt)},
            "annotations": {SIMULATED_RUNTIME: seconds(runtime / speed),
                            EXPECTED_RUNTIME_ANNOTATION: seconds(expected / speed)}},
        "spec": {
            "schedulerName": SCHEDULER_NAME, "priorityClassName": job.priority,
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "nodeSelector": {DEFAULT_POOL_LABEL: job.pool},
            "containers": [{"name": "trainer", "image": "registry.invalid/demo-trainer:1",
                            "resources": resources}]},
    } for i in range(job.workers)]
