"""JobSet gangs: which of a JobSet's pods start together, and how many they are.

A JobSet (``jobset.x-k8s.io``) runs replicated Jobs that belong together, a leader and its
workers: by default they are **one gang across all its replicated Jobs**, so no worker keeps
GPUs while its leader cannot start. What the JobSet controller does decides the rest: a gang
never counts pods the controller will only create once that gang has run, or it would wait
for them forever. So the gangs follow the JobSet's *steps*, the replicated Jobs it creates
together:

* a replicated Job with ``dependsOn`` (Kubeflow Trainer's trainer step after its dataset and
  model initializers) has its Jobs created only once those it depends on have progressed, so
  it is a gang of its own, ``<jobset>-<replicatedJob>``;
* with ``startupPolicy: InOrder`` (jobset's ``startup-driver-ready`` example) the controller
  creates each replicated Job's Jobs only once every Job of the one before is ready, so each
  replicated Job is a whole gang of its own, in that order: the first is ``<jobset>`` (the
  driver alone), each later one ``<jobset>-<replicatedJob>`` (the 4 workers together);
* the annotation ``gangscheduler.io/gang-scope: replicated-job`` on the JobSet makes every
  replicated Job a gang of its own (``jobset``, the default, is the behaviour above);
* a failure-policy restart deletes every Job and recreates them (same names): the old pods
  are leaving and count for nothing (``grouping.build_gang``), so the new ones are a new
  gang, placed whole.

A gang whose step keeps later ones waiting says so in its pending reason (``later_steps``), so
a user looking for the workers learns that the startup policy keeps them, not the scheduler.

**A PodGroup over a JobSet's steps** (Trainer's coscheduling policy labels every pod of the
TrainJob with one PodGroup whose ``minMember`` counts the initializers' pods too): waiting for
the whole group would deadlock like the above, the initializer waiting for trainer pods that
come only after it. The PodGroup is the gang of the *last* step (the replicated Jobs nobody
depends on: Trainer's trainer step; with ``InOrder``, the last replicated Job), and needs
``minMember`` less the pods of the earlier steps (as the JobSet's template says); each earlier
replicated Job is a gang of its own, ``<jobset>-<replicatedJob>``, sized by its Jobs.

The gang's size is what the controller runs at once: per Job, ``JobInfo.remaining`` once the
Job is seen (parallelism, capped by the completions still to go), else what the JobSet's
template says. Pods of a JobSet not seen yet wait (never placed one Job at a time).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from scheduler.model.workloads import (
    JOBSET_NAME_LABEL,
    POD_GROUP_LABEL,
    JobInfo,
    JobSetInfo,
    PodGroupInfo,
    PodInfo,
    ReplicatedJobInfo,
)

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


def step_gang_id(namespace: str, labels: Mapping[str, str],
                 jobsets: Mapping[str, JobSetInfo]) -> str | None:
    """The gang of a pod that names a PodGroup, when its JobSet creates its replicated Jobs
    in steps and the pod's is not the last: its replicated Job's own. None: the PodGroup's."""
    name, rjob = labels.get(JOBSET_NAME_LABEL), labels.get(REPLICATED_JOB_LABEL)
    jobset = jobsets.get(f"{namespace}/{name}") if name else None
    if jobset is None or not rjob or rjob in _last_step(jobset):
        return None
    return f"{namespace}/{name}-{rjob}"


def step_group(group: PodGroupInfo, pods: Iterable[PodInfo],
               jobsets: Mapping[str, JobSetInfo]) -> PodGroupInfo:
    """*group* as the gang of its JobSet's last step sees it: ``minMember`` less the pods of
    the earlier steps (each a gang of its own), and no ``minResources`` (it counts them)."""
    jobset = _jobset_of(pods, jobsets)
    if jobset is None or not _stepped(jobset):
        return group
    last = _last_step(jobset)
    earlier = sum(r.replicas * r.pods_per_job for r in jobset.replicated_jobs
                  if r.name not in last)
    return replace(group, min_member=max(1, group.min_member - earlier), min_resources=None)


def gang_scope_problem(value: str) -> str | None:
    """Why *value* is not a gang scope (None: it is one); the grouping's reason on the pods
    and the admission webhook's refusal both say this."""
    return None if value in SCOPES else f"{value!r} is not one of {', '.join(SCOPES)}"


def _scope(jobset: JobSetInfo) -> str:
    value = jobset.annotations.get(GANG_SCOPE_ANNOTATION, SCOPE_JOBSET)
    return value if value in SCOPES else SCOPE_JOBSET


def _stepped(jobset: JobSetInfo) -> bool:
    """Does the controller create some replicated Jobs only after others have progressed?"""
    rjobs = jobset.replicated_jobs
    return (jobset.in_order and len(rjobs) > 1) or any(r.depends_on for r in rjobs)


def _first_gang(jobset: JobSetInfo) -> set[str]:
    """The replicated Jobs that are the JobSet's own gang (created together, at once)."""
    if _scope(jobset) == SCOPE_REPLICATED_JOB:
        return set()
    if jobset.in_order:
        return {r.name for r in jobset.replicated_jobs[:1]}
    return {r.name for r in jobset.replicated_jobs if not r.depends_on}


def _last_step(jobset: JobSetInfo) -> set[str]:
    """The replicated Jobs created last: the last one in order, else those that depend on
    others and nobody depends on (all of them if the JobSet has no steps)."""
    rjobs = jobset.replicated_jobs
    if not _stepped(jobset):
        return {r.name for r in rjobs}
    if jobset.in_order:
        return {r.name for r in rjobs[-1:]}
    needed = {d for r in rjobs for d in r.depends_on}
    return {r.name for r in rjobs if r.depends_on and r.name not in needed}


def _members(gid: str, jobset: JobSetInfo, by_group: bool) -> tuple[ReplicatedJobInfo, ...]:
    """The replicated Jobs of gang *gid*; *by_group*: its pods are a PodGroup's."""
    rjobs = jobset.replicated_jobs
    own = tuple(r for r in rjobs if gid == f"{jobset.key}-{r.name}")
    if own:
        return own
    if by_group:
        last = _last_step(jobset)
        return tuple(r for r in rjobs if r.name in last)
    first = _first_gang(jobset)
    return tuple(r for r in rjobs if r.name in first) if gid == jobset.key else ()


def _later_steps(members: tuple[ReplicatedJobInfo, ...], jobset: JobSetInfo) -> str:
    """What the JobSet creates only after *members* have progressed, in the words of its
    spec (for the gang's pending reason); "" if nothing."""
    names = {r.name for r in members}
    rjobs = jobset.replicated_jobs
    if jobset.in_order and names:
        last = max(i for i, r in enumerate(rjobs) if r.name in names)
        later, why = rjobs[last + 1:], "startupPolicy InOrder"
        after = "every Job of " + ", ".join(sorted(names)) + " is ready"
    else:
        later = tuple(r for r in rjobs if set(r.depends_on) & names)
        why, after = "dependsOn", ", ".join(sorted(names)) + " progressed"
    if not later:
        return ""
    what = ", ".join(f"{r.name} ({r.replicas * r.pods_per_job} pods)" for r in later)
    return f"JobSet {jobset.key} creates {what} only once {after} ({why}), as a gang of its own"


def _jobset_of(pods: Iterable[PodInfo], jobsets: Mapping[str, JobSetInfo]) -> JobSetInfo | None:
    labelled = next((p for p in pods if p.labels.get(JOBSET_NAME_LABEL)), None)
    if labelled is None:
        return None
    return jobsets.get(f"{labelled.namespace}/{labelled.labels[JOBSET_NAME_LABEL]}")


def set_job(gid: str, pods: Iterable[PodInfo], jobsets: Mapping[str, JobSetInfo],
            jobs: Mapping[str, JobInfo]) -> JobInfo | None:
    """The JobSet gang *gid* as one Job of its combined size (what ``build_gang`` sizes a
    gang by); None if *pods* are not a JobSet's. ``unknown`` says why it cannot be sized."""
    pods = list(pods)
    labelled = next((p for p in pods if p.labels.get(JOBSET_NAME_LABEL)), None)
    if labelled is None:
        return None
    ns, name = labelled.namespace, labelled.labels[JOBSET_NAME_LABEL]
    jobset = jobsets.get(f"{ns}/{name}")
    if jobset is None:
        return JobInfo(ns, gid.split("/", 1)[1], "", unknown=(
            f"JobSet {ns}/{name} is not known (yet); its pods wait for it so that the gang "
            "(all its replicated Jobs that start together) is known"))
    problem = gang_scope_problem(jobset.annotations.get(GANG_SCOPE_ANNOTATION, SCOPE_JOBSET))
    unknown = "" if problem is None else (
        f"JobSet {jobset.key}: annotation {GANG_SCOPE_ANNOTATION}: {problem}")
    by_group = any(f"{p.namespace}/{p.labels.get(POD_GROUP_LABEL)}" == gid for p in pods)
    members = _members(gid, jobset, by_group)
    size = 0
    for rjob in members:
        for index in range(rjob.replicas):
            job = jobs.get(f"{ns}/{name}-{rjob.name}-{index}")
            size += job.remaining if job is not None else rjob.pods_per_job
    return JobInfo(ns, gid.split("/", 1)[1], jobset.uid, parallelism=max(1, size),
                   creation_time=jobset.creation_time, labels=jobset.labels,
                   annotations=jobset.annotations, unknown=unknown,
                   later_steps=_later_steps(members, jobset))
