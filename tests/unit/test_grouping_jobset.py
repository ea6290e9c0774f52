"""JobSet gangs: one gang across the replicated Jobs that start together, one per replicated
Job on request or behind ``dependsOn``, sized by what the Job controller runs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from scheduler.cache import ClusterCache
from scheduler.grouping import GroupingConfig, build_gangs
from scheduler.grouping_jobset import GANG_SCOPE_ANNOTATION, JOBSET_NAME_LABEL, REPLICATED_JOB_LABEL
from scheduler.model import PodRequirements, Resources
from scheduler.model.workloads import (
    JobInfo,
    JobSetInfo,
    OwnerRef,
    PodInfo,
    PodPhase,
    ReplicatedJobInfo,
)

REQ = PodRequirements(requests=Resources.of(gpu=1, cpu=1000))
LEADER, WORKERS = ReplicatedJobInfo("leader"), ReplicatedJobInfo("workers", 2, 2, 2)
PAIR = JobSetInfo("ns", "pair", "js-uid", (LEADER, WORKERS), creation_time=7.0)


def pod(rjob: str, index: int, member: int = 0, jobset: str = "pair", *, node: str = "",
        phase: PodPhase = PodPhase.PENDING, terminating: bool = False) -> PodInfo:
    job = f"{jobset}-{rjob}-{index}"
    return PodInfo(uid=f"uid-{job}-{member}-{terminating}", namespace="ns",
                   name=f"{job}-{member}{'-old' if terminating else ''}", requirements=REQ,
                   scheduler_name="gang-scheduler", node_name=node, phase=phase,
                   labels={JOBSET_NAME_LABEL: jobset, REPLICATED_JOB_LABEL: rjob},
                   owner=OwnerRef("Job", job, f"uid-{job}"), terminating=terminating)


def job(rjob: str, index: int, parallelism: int = 1, succeeded: int = 0,
        jobset: str = "pair") -> JobInfo:
    name = f"{jobset}-{rjob}-{index}"
    return JobInfo("ns", name, f"uid-{name}", parallelism=parallelism,
                   completions=parallelism, succeeded=succeeded,
                   labels={JOBSET_NAME_LABEL: jobset, REPLICATED_JOB_LABEL: rjob})


ALL_PODS = [pod("leader", 0), *(pod("workers", i, m) for i in range(2) for m in range(2))]
ALL_JOBS = [job("leader", 0), job("workers", 0, 2), job("workers", 1, 2)]


@dataclass
class Case:
    name: str
    pods: list[PodInfo]
    jobsets: list[JobSetInfo] = field(default_factory=lambda: [PAIR])
    jobs: list[JobInfo] = field(default_factory=lambda: list(ALL_JOBS))
    # gang id -> (min_member, pods present)
    pending: dict[str, tuple[int, int]] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)  # gang id -> part of the message


CASES = [
    Case("leader and workers are one gang", ALL_PODS, pending={"ns/pair": (5, 5)}),
    Case("the leader alone waits for its workers", ALL_PODS[:1], pending={"ns/pair": (5, 1)}),
    # On 1.36 the Job controller gives each Indexed Job a scheduling.k8s.io PodGroup.
    Case("per-Job PodGroups of the Job controller do not split the JobSet",
         [dataclasses.replace(p, pod_group_name=f"{p.owner.name}-pg") for p in ALL_PODS
          if p.owner is not None], pending={"ns/pair": (5, 5)}),
    Case("a scheduler-plugins PodGroup label still names the gang (Trainer's coscheduling)",
         [dataclasses.replace(p, labels={**p.labels, "scheduling.x-k8s.io/pod-group": "tj"})
          for p in ALL_PODS], problems={"ns/tj": "PodGroup ns/tj does not exist"}),
    Case("Jobs not seen yet are sized by the JobSet's template", ALL_PODS, jobs=[],
         pending={"ns/pair": (5, 5)}),
    Case("a JobSet not seen yet holds its pods back", ALL_PODS, jobsets=[],
         problems={"ns/pair": "JobSet ns/pair is not known (yet)"}),
    Case("completions done count: a worker Job that succeeded is not waited for",
         [pod("leader", 0), pod("workers", 1, 0), pod("workers", 1, 1)],
         jobs=[job("leader", 0), job("workers", 0, 2, succeeded=2), job("workers", 1, 2)],
         pending={"ns/pair": (3, 3)}),
    Case("one gang per replicated Job on request",
         ALL_PODS, jobsets=[JobSetInfo("ns", "pair", "u", (LEADER, WORKERS),
                                       annotations={GANG_SCOPE_ANNOTATION: "replicated-job"})],
         pending={"ns/pair-leader": (1, 1), "ns/pair-workers": (4, 4)}),
    Case("a misspelt scope is refused with its field",
         ALL_PODS, jobsets=[JobSetInfo("ns", "pair", "u", (LEADER, WORKERS),
                                       annotations={GANG_SCOPE_ANNOTATION: "per-job"})],
         problems={"ns/pair": "gangscheduler.io/gang-scope: 'per-job' is not one of"}),
    # Trainer's runtimes: the trainer step dependsOn the initializers, so its Jobs come later.
    Case("initializers are one gang, the step that depends on them another",
         [pod("dataset-initializer", 0), pod("model-initializer", 0),
          *(pod("node", 0, m) for m in range(4))],
         jobsets=[JobSetInfo("ns", "pair", "u", (
             ReplicatedJobInfo("dataset-initializer"), ReplicatedJobInfo("model-initializer"),
             ReplicatedJobInfo("node", 1, 4, 4,
                               depends_on=("dataset-initializer", "model-initializer"))))],
         jobs=[],
         pending={"ns/pair": (2, 2), "ns/pair-node": (4, 4)}),
    # A failure-policy restart: every old pod is being deleted, the new ones are the gang.
    Case("after a restart the new pods are a whole gang, the leaving ones count for nothing",
         [*(pod(p.labels[REPLICATED_JOB_LABEL], 0, node="n1", phase=PodPhase.RUNNING,
                terminating=True) for p in ALL_PODS[:3]),
          *ALL_PODS[:3]],
         pending={"ns/pair": (5, 3)}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_jobset_grouping(case: Case) -> None:
    out = build_gangs(case.pods, {}, {j.key: j for j in case.jobs}, GroupingConfig(),
                      jobsets={s.key: s for s in case.jobsets})
    assert {g.id: (g.min_member, g.members_present) for g in out.pending} == case.pending
    assert set(out.problems) == set(case.problems)
    for gid, words in case.problems.items():
        assert words in out.problems[gid], out.problems[gid]


def test_the_cache_regroups_pods_when_their_jobset_arrives() -> None:
    """Pods seen before their JobSet wait; once it arrives (asking one gang per replicated
    Job), they are regrouped without any pod changing."""
    cache = ClusterCache()
    for p in ALL_PODS:
        cache.upsert_pod(p)
    for j in ALL_JOBS:
        cache.upsert_job(j)
    assert set(cache.cycle_input(0.0).gangs.problems) == {"ns/pair"}
    cache.upsert_jobset(JobSetInfo("ns", "pair", "u", (LEADER, WORKERS),
                                   annotations={GANG_SCOPE_ANNOTATION: "replicated-job"}))
    gangs = cache.cycle_input(0.0).gangs
    assert {g.id: g.min_member for g in gangs.pending} == {"ns/pair-leader": 1,
                                                           "ns/pair-workers": 4}
    assert gangs.problems == {}
    cache.upsert_job(job("workers", 0, 2, succeeded=2))  # a Job's progress resizes its gang
    gangs = cache.cycle_input(0.0).gangs
    assert {g.id: g.min_member for g in gangs.pending} == {"ns/pair-leader": 1,
                                                           "ns/pair-workers": 2}
    cache.delete_jobset("ns/pair")
    assert set(cache.cycle_input(0.0).gangs.problems) == {"ns/pair"}
