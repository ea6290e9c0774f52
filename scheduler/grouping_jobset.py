"""JobSet gangs: which of a JobSet's pods start together, and how many they are.

A JobSet (``jobset.x-k8s.io``) runs replicated Jobs that belong together, a leader and its
workers: by default they are **one gang across all its replicated Jobs**, so no worker holds
GPUs while its leader cannot start. What the JobSet controller does decides the rest:

* a replicated Job with ``dependsOn`` (Kubeflow Trainer's trainer step after its dataset and
  model initializers) has its Jobs created only once those it depends on have progressed, so
  it is a gang of its own, ``<jobset>-<replicatedJob>``; counting it in the first gang would
  make that gang wait for pods that cannot exist yet;
* the annotation ``gangscheduler.io/gang-scope: replicated-job`` on the JobSet makes every
  replicated Job a gang of its own (``jobset``, the default, is the behaviour above);
* a failure-policy restart deletes every Job and recreates them (same names): the old pods
  are leaving and count for nothing (``grouping.build_gang``), so the new ones are a new
  gang, placed whole.

The gang's size is what the controller runs at once: per Job, ``JobInfo.remaining`` once the
Job is seen (parallelism, capped by the completions still to go), else what the JobSet's
template says. Pods of a JobSet not seen yet wait (never placed one Job at a time).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduler.model.workloads import JobInfo, JobSetInfo, PodInfo, ReplicatedJobInfo

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
GANG_SCOPE_ANNOTATION = "gangscheduler.io/gang-scope"
SCOPE_JOBSET = "jobset"
SCOPE_REPLICATED_JOB = "replicated-job"
SCOPES = (SCOPE_JOBSET, SCOPE_REPLICATED_JOB)


def set_gang_id(namespace: str, labels: Mapping[str, str],
                jobsets: Mapping[str, JobSetInfo]) -> str | None:
    """The gang of a pod or Job the JobSet controller made (by its labels), or None."""
    name = labels.get(JOBSET_NAME_LABEL)
    if not name:
        return None
    jobset = jobsets.get(f"{namespace}/{name}")
    rjob = labels.get(REPLICATED_JOB_LABEL, "")
    if jobset is None or not rjob or rjob in _first_gang(jobset):
        return f"{namespace}/{name}"
    return f"{namespace}/{name}-{rjob}"


def _scope(jobset: JobSetInfo) -> str:
    value = jobset.annotations.get(GANG_SCOPE_ANNOTATION, SCOPE_JOBSET)
    return value if value in SCOPES else SCOPE_JOBSET


def _first_gang(jobset: JobSetInfo) -> set[str]:
    """The replicated Jobs that are the JobSet's own gang (created together, at once)."""
    if _scope(jobset) == SCOPE_REPLICATED_JOB:
        return set()
    return {r.name for r in jobset.replicated_jobs if not r.depends_on}


def _members(gid: str, jobset: JobSetInfo) -> tuple[ReplicatedJobInfo, ...]:
    first = _first_gang(jobset)
    if gid == jobset.key:
        return tuple(r for r in jobset.replicated_jobs if r.name in first)
    return tuple(r for r in jobset.replicated_jobs
                 if r.name not in first and gid == f"{jobset.key}-{r.name}")


def set_job(gid: str, pods: Iterable[PodInfo], jobsets: Mapping[str, JobSetInfo],
            jobs: Mapping[str, JobInfo]) -> JobInfo | None:
    """The JobSet gang *gid* as one Job of its combined size (what ``build_gang`` sizes a
    gang by); None if *pods* are not a JobSet's. ``unknown`` says why it cannot be sized."""
    labelled = next((p for p in pods if p.labels.get(JOBSET_NAME_LABEL)), None)
    if labelled is None:
        return None
    ns, name = labelled.namespace, labelled.labels[JOBSET_NAME_LABEL]
    jobset = jobsets.get(f"{ns}/{name}")
    if jobset is None:
        return JobInfo(ns, gid.split("/", 1)[1], "", unknown=(
            f"JobSet {ns}/{name} is not known (yet); its pods wait for it so that the gang "
            "(all its replicated Jobs that start together) is known"))
    scope = jobset.annotations.get(GANG_SCOPE_ANNOTATION, SCOPE_JOBSET)
    unknown = "" if scope in SCOPES else (
        f"JobSet {jobset.key}: annotation {GANG_SCOPE_ANNOTATION}: {scope!r} is not one of "
        f"{', '.join(SCOPES)}")
    size = 0
    for rjob in _members(gid, jobset):
        for index in range(rjob.replicas):
            job = jobs.get(f"{ns}/{name}-{rjob.name}-{index}")
            size += job.remaining if job is not None else rjob.pods_per_job
    return JobInfo(ns, gid.split("/", 1)[1], jobset.uid, parallelism=max(1, size),
                   creation_time=jobset.creation_time, labels=jobset.labels,
                   annotations=jobset.annotations, unknown=unknown)
