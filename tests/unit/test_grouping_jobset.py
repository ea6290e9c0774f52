"""JobSet gangs: one gang across the replicated Jobs that start together, one per replicated
Job on request, behind ``dependsOn`` or with ``startupPolicy: InOrder`` (and a PodGroup over
such steps is the last step's gang), sized by what the Job controller runs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.decide.cycle import decide
from scheduler.feed.cache import ClusterCache
from scheduler.feed.grouping import GroupingConfig, build_gangs
from scheduler.feed.grouping_jobset import (
    GANG_SCOPE_ANNOTATION,
    JOBSET_NAME_LABEL,
    REPLICATED_JOB_LABEL,
)
from scheduler.model import PodRequirements, Resources
from scheduler.model.workloads import (
    POD_GROUP_LABEL,
    JobInfo,
    JobSetInfo,
    OwnerRef,
    PodGroupInfo,
    PodInfo,
    PodPhase,
    ReplicatedJobInfo,
)
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, nodes, policies, queue

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
IN_ORDER = dataclasses.replace(PAIR, in_order=True)
TRAINER = JobSetInfo("ns", "pair", "u", (
    ReplicatedJobInfo("dataset-initializer"),
    ReplicatedJobInfo("node", 1, 4, 4, depends_on=("dataset-initializer",))))
TRAINER_GROUP = PodGroupInfo("ns", "pair", "pg-uid", min_member=5, min_resources=Resources.of(
    gpu=4), schedule_timeout_seconds=120)


def labelled(p: PodInfo, group: str) -> PodInfo:
    """*p* with Trainer's coscheduling label naming PodGroup *group*."""
    return dataclasses.replace(p, labels={**p.labels, POD_GROUP_LABEL: group})
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
    groups: list[PodGroupInfo] = field(default_factory=list)


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
    Case("a JobSet not seen yet keeps its pods waiting", ALL_PODS, jobsets=[],
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
    # jobset's startup-driver-ready example: the workers' Jobs exist once the driver is ready.
    Case("in order: the driver is a whole gang alone, never waiting for its workers",
         ALL_PODS[:1], jobsets=[IN_ORDER], pending={"ns/pair": (1, 1)}),
    Case("in order: then the workers are a whole gang of their own",
         ALL_PODS, jobsets=[IN_ORDER], pending={"ns/pair": (1, 1), "ns/pair-workers": (4, 4)}),
    Case("in order, one gang per replicated Job on request: the same gangs",
         ALL_PODS, jobsets=[dataclasses.replace(IN_ORDER, annotations={
             GANG_SCOPE_ANNOTATION: "replicated-job"})],
         pending={"ns/pair-leader": (1, 1), "ns/pair-workers": (4, 4)}),
    # Trainer's coscheduling over an initializer: its PodGroup (named after the TrainJob, as
    # the JobSet) counts every step's pods; the initializer must not wait for the trainers.
    Case("a PodGroup over steps: the initializer is its own gang, never waiting",
         [labelled(pod("dataset-initializer", 0), "pair")], jobsets=[TRAINER],
         groups=[TRAINER_GROUP], jobs=[], pending={"ns/pair-dataset-initializer": (1, 1)}),
    Case("a PodGroup over steps: the trainer step is its gang, minMember less the initializer",
         [labelled(p, "pair") for p in (pod("dataset-initializer", 0, phase=PodPhase.SUCCEEDED),
                                        *(pod("node", 0, m) for m in range(4)))],
         jobsets=[TRAINER], groups=[TRAINER_GROUP], jobs=[], pending={"ns/pair": (4, 4)}),
    Case("a PodGroup over steps: the trainer step waits for all its own pods",
         [labelled(pod("node", 0, m), "pair") for m in range(3)], jobsets=[TRAINER],
         groups=[TRAINER_GROUP], jobs=[], pending={"ns/pair": (4, 3)}),
    Case("in order with a PodGroup: the last replicated Job is the group's gang",
         [labelled(p, "tj") for p in ALL_PODS], jobsets=[IN_ORDER],
         groups=[PodGroupInfo("ns", "tj", "pg-uid", min_member=5)],
         pending={"ns/pair-leader": (1, 1), "ns/tj": (4, 4)}),
    # A failure-policy restart: every old pod is being deleted, the new ones are the gang.
    Case("after a restart the new pods are a whole gang, the leaving ones count for nothing",
         [*(pod(p.labels[REPLICATED_JOB_LABEL], 0, node="n1", phase=PodPhase.RUNNING,
                terminating=True) for p in ALL_PODS[:3]),
          *ALL_PODS[:3]],
         pending={"ns/pair": (5, 3)}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_jobset_grouping(case: Case) -> None:
    out = build_gangs(case.pods, {g.key: g for g in case.groups},
                      {j.key: j for j in case.jobs}, GroupingConfig(),
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


@pytest.mark.parametrize(("jobset", "pods", "said"), [
    (IN_ORDER, ALL_PODS[:1], {"ns/pair": "JobSet ns/pair creates workers (4 pods) only once "
                              "every Job of leader is ready (startupPolicy InOrder), as a "
                              "gang of its own"}),
    (IN_ORDER, ALL_PODS, {"ns/pair": "workers (4 pods)", "ns/pair-workers": ""}),
    (PAIR, ALL_PODS, {"ns/pair": ""}),
    (TRAINER, [pod("dataset-initializer", 0)],
     {"ns/pair": "creates node (4 pods) only once dataset-initializer progressed (dependsOn)"}),
])
def test_a_gang_whose_jobset_keeps_later_steps_waiting_says_so(
        jobset: JobSetInfo, pods: list[PodInfo], said: dict[str, str]) -> None:
    out = build_gangs(pods, {}, {}, GroupingConfig(), jobsets={jobset.key: jobset})
    notes = {g.id: g.later_steps for g in out.pending}
    assert set(notes) == set(said)
    for gid, words in said.items():
        assert words in notes[gid] and bool(words) == bool(notes[gid]), notes[gid]


def test_the_startup_policy_is_in_the_pending_reason() -> None:
    """What the pods read: the driver waits for room, and the workers are said to come after."""
    (driver,) = build_gangs(ALL_PODS[:1], {}, {}, GroupingConfig(default_queue="q"),
                            jobsets={IN_ORDER.key: IN_ORDER}).pending
    plan = decide(Snapshot(nodes("a100", 1)), [driver], policies(queue("q", quota={"a100": 0})),
                  0.0, solver=SOLVE)
    reason = str(plan.pending["ns/pair"])
    assert reason.startswith("Quota: ") and reason.endswith(
        "; JobSet ns/pair creates workers (4 pods) only once every Job of leader is ready "
        "(startupPolicy InOrder), as a gang of its own"), reason


def test_the_podgroup_status_counts_the_last_steps_minimum() -> None:
    """The PodGroup's status follows its gang: 4 trainer pods running are Running, though
    Trainer's minMember (5) counts the initializer too."""
    cache = ClusterCache()
    cache.upsert_jobset(TRAINER)
    cache.upsert_group(TRAINER_GROUP)
    for m in range(4):
        cache.upsert_pod(labelled(pod("node", 0, m), "pair"))
    (group,) = cache.groups()
    assert (group.min_member, group.min_resources, group.schedule_timeout_seconds) == (
        4, None, 120)
    assert [g.id for g in cache.cycle_input(0.0).gangs.pending] == ["ns/pair"]


@st.composite
def jobsets_and_steps(draw: st.DrawFn) -> tuple[JobSetInfo, list[set[str]], bool]:
    """A JobSet of 2-4 replicated Jobs, in order or with ``dependsOn`` on earlier ones (as
    JobSet's validation allows), the steps its controller creates them in, and whether a
    PodGroup (counting every pod, as Trainer's) labels its pods."""
    in_order = draw(st.booleans())
    rjobs: list[ReplicatedJobInfo] = []
    for i in range(draw(st.integers(2, 4))):
        earlier = [r.name for r in rjobs]
        deps = () if in_order or not earlier else tuple(
            draw(st.lists(st.sampled_from(earlier), unique=True, max_size=len(earlier))))
        rjobs.append(ReplicatedJobInfo(f"r{i}", draw(st.integers(1, 2)), draw(st.integers(1, 3)),
                                       None, deps))
    steps: list[set[str]] = []
    if in_order:
        steps = [{r.name} for r in rjobs]
    else:
        done: set[str] = set()
        while len(done) < len(rjobs):
            step = {r.name for r in rjobs if r.name not in done and set(r.depends_on) <= done}
            steps.append(step)
            done |= step
    return (JobSetInfo("ns", "js", "u", tuple(rjobs), in_order=in_order), steps,
            draw(st.booleans()))


@settings(max_examples=200, deadline=None)
@given(jobsets_and_steps(), st.data())
def test_no_gang_ever_waits_for_pods_its_jobset_creates_after_it(
        case: tuple[JobSetInfo, list[set[str]], bool], data: st.DataObject) -> None:
    """Whatever steps the JobSet controller has taken so far, no gang of the pods that exist
    waits for pods that only come once it has run (the deadlock of issue 33: a driver waiting
    for workers created once it is ready, an initializer for the trainers created once it is
    done). Every gang is complete, except a PodGroup's over the JobSet's last steps (the
    replicated Jobs nobody depends on) still waiting for some of them: those come once
    *other* gangs have progressed, never its own."""
    jobset, steps, coscheduled = case
    taken = data.draw(st.integers(1, len(steps)))
    created = set().union(*steps[:taken])
    pods = [pod(r.name, i, m, jobset="js") for r in jobset.replicated_jobs if r.name in created
            for i in range(r.replicas) for m in range(r.pods_per_job)]
    groups = {}
    if coscheduled:
        pods = [labelled(p, "js") for p in pods]
        total = sum(r.replicas * r.pods_per_job for r in jobset.replicated_jobs)
        groups = {"ns/js": PodGroupInfo("ns", "js", "pg", min_member=total)}
    out = build_gangs(pods, groups, {}, GroupingConfig(), jobsets={jobset.key: jobset})
    assert out.problems == {}
    rjob_of = {p.name: p.labels[REPLICATED_JOB_LABEL] for p in pods}
    depends = {r.name: set(r.depends_on) for r in jobset.replicated_jobs}

    def ancestors(name: str) -> set[str]:
        found: set[str] = set()
        todo = list(depends[name])
        while todo:
            d = todo.pop()
            if d not in found:
                found.add(d)
                todo.extend(depends[d])
        return found

    to_come = {r.name for r in jobset.replicated_jobs} - created
    for g in out.pending:
        if g.is_complete:
            continue
        own = {rjob_of[p.name] for p in g.pods}
        waits_on_itself = [r for r in to_come if ancestors(r) & own]
        assert coscheduled and not waits_on_itself and not own & {
            d for r in jobset.replicated_jobs for d in r.depends_on}, (
            g.id, g.members_present, g.min_member, own, waits_on_itself)
    assert sum(g.members_present for g in out.pending) == len(pods)
