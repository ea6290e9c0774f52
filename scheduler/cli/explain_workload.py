"""`explain` by what the user created: a Job, JobSet or TrainJob maps to its gang(s), and a
gang with no pods right now says why instead of "not found".

Why: people name their Job, not its gang. On 1.36 an Indexed Job's gang is named after the
PodGroup its controller made (``WorkloadWithJob``), a JobSet may be several gangs, and a
TrainJob runs as a JobSet of its own name. And between a preemption and the pods its
controller recreates (the Job controller's pod-failure backoff: ``scheduler.model.
job_backoff``), the gang has no pods at all: that gap deserves its reason ("preempted at T
by X; waiting for the Job controller to recreate its pods, not before ~T'"), read from the
``Preempted`` event the evictor leaves on the Job.

The mapping and the words are pure (a cache, the event); ``last_preemption`` reads the
events through the caller's client.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduler.cli._rows import row
from scheduler.feed.cache import ClusterCache
from scheduler.feed.grouping_jobset import JOBSET_NAME_LABEL
from scheduler.kube.client import KubeClient
from scheduler.kube.client import path_segment as seg
from scheduler.model import job_backoff
from scheduler.model.durations import format_time
from scheduler.model.workloads import JobInfo, PodInfo, PodPhase

TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1"


@dataclass(frozen=True, slots=True)
class Workload:
    """A workload by the name its user gave it, and the gangs it runs as."""

    kind: str  # Job, JobSet or TrainJob
    key: str  # namespace/name
    gangs: tuple[str, ...]
    #: Its Jobs (one for a Job; a JobSet's that exist now), for their controller's backoff.
    jobs: tuple[JobInfo, ...] = ()
    #: Its pods that failed and are still there (evicted ones waiting for replacements).
    failed: tuple[PodInfo, ...] = ()

    @property
    def via(self) -> str:
        word = "gang" if len(self.gangs) == 1 else "gangs"
        return f"{self.kind} {self.key} runs as {word} {', '.join(self.gangs)}"


def find(target: str, cache: ClusterCache, trainjob: bool = False) -> Workload | None:
    """The Job or JobSet *target* (``namespace/name``) with its gangs, or the JobSet of the
    TrainJob *target* when *trainjob* says one exists; None when neither is known."""
    ns, _, name = target.partition("/")
    job = cache.job(target)
    if job is not None:
        pods = [p for p in cache.pods() if p.namespace == ns and p.owner is not None
                and p.owner.kind == "Job" and p.owner.name == name]
        # The PodGroup the Job controller made is the gang, unless a JobSet's gang has
        # the Job's pods (``grouping`` puts a JobSet before a native PodGroup).
        natives = ([] if JOBSET_NAME_LABEL in job.labels else
                   [g.key for g in cache.native_groups() if g.job_key == target])
        return _workload("Job", target, cache, pods, natives, (job,))
    if cache.jobset(target) is None and not trainjob:
        return None
    pods = [p for p in cache.pods()
            if p.namespace == ns and p.labels.get(JOBSET_NAME_LABEL) == name]
    jobs = tuple(j for j in cache.jobs()
                 if j.namespace == ns and j.labels.get(JOBSET_NAME_LABEL) == name)
    return _workload("TrainJob" if trainjob else "JobSet", target, cache, pods, (), jobs)


def _workload(kind: str, key: str, cache: ClusterCache, pods: list[PodInfo],
              natives: Iterable[str], jobs: tuple[JobInfo, ...]) -> Workload:
    # A failed pod's gang too: its failures are what explains a Job in a backoff loop.
    gangs = {g for p in pods if (not p.is_finished or p.phase is PodPhase.FAILED)
             and (g := cache.gang_of_pod(p.namespace, p.name)) is not None}
    gangs |= set(natives)
    failed = tuple(sorted((p for p in pods if p.phase is PodPhase.FAILED), key=lambda p: p.name))
    return Workload(kind, key, tuple(sorted(gangs)) or (key,), jobs, failed)


@dataclass(frozen=True, slots=True)
class Preemptions:
    """What the ``Preempted`` events on a workload's Jobs say: the newest (when, its words)
    and how many pods they evicted in all (the Job controller counts each as a failure)."""

    at: float
    note: str
    evicted: int = 0


def gap_text(workload: Workload, gang_id: str, preempted: Preemptions | None,
             now: float, held: str | None = None) -> str:
    """The report for a gang of *workload* that has no pods right now; *preempted*: the
    preemptions its events record (None: no such event seen); *held*: the layer above that
    holds it back (Kueue: ``explain_kueue.kueue_hold``), which then is the whole answer."""
    lines = [f"gang {gang_id}", row("state", "no pods right now")]
    if held is not None:
        lines += [row("why", held),
                  row("next", "once Kueue admits it, its Job controller creates its pods and "
                      "gang-scheduler places them whole")]
        return "\n".join(lines)
    if preempted is not None:
        lines.append(row("why", f"{preempted.note} (at {format_time(preempted.at)})"))
    elif workload.failed:
        lines.append(row("why", "its last pods failed (see last failures)"))
    else:
        lines.append(row("why", "its pods are gone (evicted, deleted) or not created yet"))
    controller = "the Job controller" if workload.kind == "Job" else "its Jobs' controller"
    if not workload.jobs:
        lines.append(row("next", f"waiting for {controller} to create its pods"))
        return "\n".join(lines)
    if all(j.remaining == 0 for j in workload.jobs):
        lines.append(row("next", "nothing: its completions are all done"))
        return "\n".join(lines)
    evicted = preempted.evicted if preempted is not None else 0
    delay, how = max(job_backoff.least_delay(j, workload.failed, evicted)
                     for j in workload.jobs)
    next_line = f"waiting for {controller} to recreate its pods: {how}"
    if preempted is not None:
        due = preempted.at + delay
        next_line += (f"; at least {delay:.0f}s after the eviction, so not before "
                      f"~{format_time(due)} (in {max(0.0, due - now):.0f}s)")
    lines += [row("next", next_line),
              row("then", "its new pods are a new gang, placed whole once they all exist")]
    return "\n".join(lines)


#: How the evictor's note on a Job says how many of its pods went.
EVICTED = re.compile(r"\((\d+) pod\(s\) evicted")


def last_preemption(client: KubeClient, workload: Workload) -> Preemptions | None:
    """The ``Preempted`` events the evictor left on the workload's Jobs (events live an
    hour by default); None without one (or when events may not be read)."""
    ns = workload.key.split("/", 1)[0]
    names = {j.name for j in workload.jobs}
    resp = client.request("GET", f"/api/v1/namespaces/{seg(ns)}/events", query={
        "fieldSelector": "involvedObject.kind=Job,reason=Preempted"})
    if not resp.ok:
        return None
    found: list[tuple[float, str]] = []
    evicted = 0
    for event in (resp.json() or {}).get("items") or ():
        if (event.get("involvedObject") or {}).get("name") not in names:
            continue
        at, note = _event_time(event), str(event.get("message") or "")
        if at is None:
            continue
        found.append((at, note))
        if (pods := EVICTED.search(note)) is not None:
            evicted += int(pods.group(1)) * max(1, int(event.get("count") or 1),
                                                int((event.get("series") or {}).get("count") or 1))
    if not found:
        return None
    at, note = max(found)
    return Preemptions(at, note, evicted)


def _event_time(event: dict[str, Any]) -> float | None:
    """The last time the event was observed (its series, else its own time)."""
    for value in ((event.get("series") or {}).get("lastObservedTime"), event.get("eventTime"),
                  event.get("lastTimestamp"), event.get("firstTimestamp")):
        if value:
            try:
                return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


def trainjob_exists(client: KubeClient, target: str) -> bool:
    """Is there a TrainJob *target* (Kubeflow Trainer installed, and readable)?"""
    ns, _, name = target.partition("/")
    resp = client.request("GET", f"{TRAINJOBS}/namespaces/{seg(ns)}/trainjobs/{seg(name)}")
    return resp.ok
