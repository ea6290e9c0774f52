"""Gangs from Kubernetes' own gang API: a PodGroup named in ``spec.schedulingGroup``.

Through ``ClusterCache`` (what the live scheduler and the simulator use), so that a Workload
or Job arriving after its PodGroup, or changing, rebuilds the gang too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.feed.cache import ClusterCache
from scheduler.model import TopologyConstraint, TopologyMode
from scheduler.model.constraints import DeviceClaimUse
from scheduler.model.native import DisruptionMode, GroupPolicy, NativeGroupInfo, WorkloadInfo
from scheduler.model.pods import PreemptionPolicy
from scheduler.model.workloads import JobInfo, OwnerRef, PodGroupInfo, PodInfo, PodPhase
from tests.unit.test_grouping import pod

QUEUE = "gangscheduler.io/queue"
PG = "scheduling.x-k8s.io/pod-group"


def member(name: str, group: str = "g", **kw: object) -> PodInfo:
    return dataclasses.replace(pod(name, **kw), pod_group_name=group)  # type: ignore[arg-type]


def native_group(min_count: int | None = 4, name: str = "g", **kw: object) -> NativeGroupInfo:
    policy = kw.pop("policy", GroupPolicy(min_count=min_count))
    return NativeGroupInfo("ns", name, policy=policy, uid=f"uid-pg-{name}",  # type: ignore[arg-type]
                           **kw)  # type: ignore[arg-type]


@dataclass
class Case:
    name: str
    pods: list[PodInfo]
    groups: list[NativeGroupInfo] = field(default_factory=list)
    workloads: list[WorkloadInfo] = field(default_factory=list)
    jobs: list[JobInfo] = field(default_factory=list)
    plugin_groups: list[PodGroupInfo] = field(default_factory=list)
    # gang id -> (min_member, waiting pods, queue, priority)
    pending: dict[str, tuple[int, int, str, int]] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)  # gang id -> part of the message
    partial: set[str] = field(default_factory=set)


WORKERS = [member(f"w{i}") for i in range(4)]
CASES = [
    Case("minCount is the gang's minimum", WORKERS, [native_group(4)],
         pending={"ns/g": (4, 4, "default", 0)}),
    Case("fewer pods than minCount wait for members", WORKERS[:3], [native_group(4)],
         pending={"ns/g": (4, 3, "default", 0)}),
    Case("basic policy declares no gang: pod by pod", WORKERS, [native_group(None)],
         pending={"ns/g": (1, 4, "default", 0)}),
    Case("a Job's basic PodGroup (1.37's default) keeps the Job a gang of its parallelism",
         [dataclasses.replace(p, owner=OwnerRef("Job", "j", "juid")) for p in WORKERS],
         [native_group(None, owner_kind="Job", owner_name="j")],
         jobs=[JobInfo("ns", "j", "juid", parallelism=4)],
         pending={"ns/g": (4, 4, "default", 0)}),
    Case("basic policy with the min-member annotation",
         [dataclasses.replace(p, annotations={"gangscheduler.io/min-member": "3"})
          for p in WORKERS], [native_group(None)], pending={"ns/g": (3, 4, "default", 0)}),
    Case("a PodGroup not seen yet keeps its pods waiting", WORKERS,
         problems={"ns/g": "does not exist (yet)"}),
    Case("resourceClaims are the claims its pods share: a gang like any other", WORKERS,
         [native_group(policy=GroupPolicy(min_count=4, resource_claims=(
             DeviceClaimUse("ib", template="infiniband"),)))],
         pending={"ns/g": (4, 4, "default", 0)}),
    Case("the group's priority beats its pods'", WORKERS,
         [native_group(policy=GroupPolicy(min_count=4, priority=500))],
         pending={"ns/g": (4, 4, "default", 500)}),
    # On 1.36 the Job controller's PodGroup names no priorityClassName (admission writes 0):
    # the pods' class is the user's word, else a high-priority Job could never preempt.
    Case("a Job controller's PodGroup without a priority class: the members' priority",
         [dataclasses.replace(p, owner=OwnerRef("Job", "j", "juid"), priority=1000)
          for p in WORKERS],
         [native_group(policy=GroupPolicy(min_count=4, priority=0), owner_kind="Job",
                       owner_name="j")],
         jobs=[JobInfo("ns", "j", "juid", parallelism=4)],
         pending={"ns/g": (4, 4, "default", 1000)}),
    # Regression (issue 11, second stall, on 1.36 where the Job controller makes the group):
    # ranks 0-2 Succeeded, rank 3 is retried; minCount stays 4, the gang is 1.
    Case("a Job controller's PodGroup: completions done count, the retried rank runs alone",
         [dataclasses.replace(WORKERS[3], owner=OwnerRef("Job", "j", "juid"))],
         [native_group(4, owner_kind="Job", owner_name="j")],
         jobs=[JobInfo("ns", "j", "juid", parallelism=4, completions=4, succeeded=3)],
         pending={"ns/g": (1, 1, "default", 0)}),
    Case("a Job controller's PodGroup with a priority class: the group's",
         [dataclasses.replace(p, owner=OwnerRef("Job", "j", "juid"), priority=1000)
          for p in WORKERS],
         [native_group(policy=GroupPolicy(min_count=4, priority=50, priority_class_name="lo"),
                       owner_kind="Job", owner_name="j")],
         jobs=[JobInfo("ns", "j", "juid", parallelism=4)],
         pending={"ns/g": (4, 4, "default", 50)}),
    Case("queue from the PodGroup's label", WORKERS, [native_group(labels={QUEUE: "pg-q"})],
         pending={"ns/g": (4, 4, "pg-q", 0)}),
    Case("queue from the Workload's label", WORKERS, [native_group(workload="wl")],
         workloads=[WorkloadInfo("ns", "wl", labels={QUEUE: "wl-q"})],
         pending={"ns/g": (4, 4, "wl-q", 0)}),
    Case("queue from the Job that made the PodGroup",
         [dataclasses.replace(p, owner=OwnerRef("Job", "j", "juid")) for p in WORKERS],
         [native_group(owner_kind="Job", owner_name="j")],
         jobs=[JobInfo("ns", "j", "juid", parallelism=2, labels={QUEUE: "job-q"})],
         pending={"ns/g": (4, 4, "job-q", 0)}),  # minCount, not the Job's parallelism
    Case("a Job controller's PodGroup: the min-member annotation on the Job is its minimum "
         "(elastic)",
         [dataclasses.replace(p, owner=OwnerRef("Job", "j", "juid")) for p in WORKERS],
         [native_group(4, owner_kind="Job", owner_name="j")],
         jobs=[JobInfo("ns", "j", "juid", parallelism=4, completions=4,
                       annotations={"gangscheduler.io/min-member": "2"})],
         pending={"ns/g": (2, 4, "default", 0)}),
    Case("a PodGroup a user wrote: its minCount, whatever the annotation says",
         [dataclasses.replace(p, annotations={"gangscheduler.io/min-member": "2"})
          for p in WORKERS], [native_group(4)], pending={"ns/g": (4, 4, "default", 0)}),
    Case("the PodGroup's label beats the pods'",
         [dataclasses.replace(p, labels={QUEUE: "pod-q"}) for p in WORKERS],
         [native_group(labels={QUEUE: "pg-q"})], pending={"ns/g": (4, 4, "pg-q", 0)}),
    Case("a Job's Indexed PodGroup with 3 of 4 ranks Succeeded: the retried rank alone",
         [dataclasses.replace(WORKERS[3], owner=OwnerRef("Job", "j", "juid"))],
         [native_group(4, owner_kind="Job", owner_name="j")],
         jobs=[JobInfo("ns", "j", "juid", parallelism=4, completions=4, succeeded=3)],
         pending={"ns/g": (1, 1, "default", 0)}),
    Case("a group named by the scheduler-plugins label spans the Jobs' own PodGroups "
         "(Trainer's coscheduling on WorkloadWithJob)",
         [dataclasses.replace(member(f"w{i}", group=f"job{i % 2}"), labels={PG: "train"})
          for i in range(4)],
         [native_group(2, name="job0"), native_group(2, name="job1")],
         plugin_groups=[PodGroupInfo("ns", "train", min_member=4)],
         pending={"ns/train": (4, 4, "default", 0)}),
    Case("a scheduler-plugins namesake is not this gang's group", WORKERS, [native_group(4)],
         plugin_groups=[PodGroupInfo("ns", "g", min_member=9)],
         pending={"ns/g": (4, 4, "default", 0)}),
    Case("bound members count towards minCount (it grew, 1.37)",
         [*[member(f"b{i}", node="n1", phase=PodPhase.PENDING) for i in range(2)],
          *WORKERS[:2]], [native_group(4)], pending={"ns/g": (2, 2, "default", 0)},
         partial={"ns/g"}),
    Case("a running group is never rolled back because minCount grew",
         [*[dataclasses.replace(member(f"b{i}", node="n1", phase=PodPhase.RUNNING),
                                started_at=1.0) for i in range(2)], *WORKERS[:1]],
         [native_group(4)], pending={"ns/g": (2, 1, "default", 0)}),
    Case("minCount shrank below what runs: new members need nobody else",
         [*[member(f"b{i}", node="n1", phase=PodPhase.RUNNING) for i in range(4)],
          WORKERS[0]], [native_group(2)], pending={"ns/g": (0, 1, "default", 0)}),
]


def cache_of(case: Case) -> ClusterCache:
    cache = ClusterCache()
    for p in case.pods:
        cache.upsert_pod(p)
    for g in case.groups:
        cache.upsert_native_group(g)
    for w in case.workloads:
        cache.upsert_workload(w)
    for j in case.jobs:
        cache.upsert_job(j)
    for pg in case.plugin_groups:
        cache.upsert_group(pg)
    return cache


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_native_gangs(case: Case) -> None:
    gangs = cache_of(case).cycle_input(0.0).gangs
    got = {g.id: (g.min_member, g.members_present, g.queue, g.priority) for g in gangs.pending}
    assert got == case.pending
    assert set(gangs.problems) == set(case.problems)
    for gid, text in case.problems.items():
        assert text in gangs.problems[gid]
    assert set(gangs.partially_bound) == case.partial


def test_topology_key_is_a_required_level_and_never_preempts() -> None:
    policy = GroupPolicy(min_count=4, topology_key="topology.kubernetes.io/rack",
                         disruption=DisruptionMode.POD_GROUP,
                         preemption_policy=PreemptionPolicy.NEVER)
    cache = cache_of(Case("", WORKERS, [native_group(policy=policy)]))
    (gang,) = cache.cycle_input(0.0).gangs.pending
    assert gang.topology == TopologyConstraint("topology.kubernetes.io/rack",
                                               TopologyMode.REQUIRED)
    assert not gang.may_preempt
    assert gang.uid == "uid-pg-g"


def test_the_running_gang_carries_the_group_priority() -> None:
    running = [member(f"r{i}", node="n1", phase=PodPhase.RUNNING) for i in range(2)]
    cache = cache_of(Case("", running, [native_group(
        2, policy=GroupPolicy(min_count=2, priority=7))]))
    assert cache.cycle_input(0.0).gangs.running_by_id["ns/g"].gang.priority == 7


def test_a_workload_arriving_later_rebuilds_the_gang() -> None:
    cache = cache_of(Case("", WORKERS, [native_group(workload="wl")]))
    assert cache.cycle_input(0.0).gangs.pending[0].queue == "default"
    cache.upsert_workload(WorkloadInfo("ns", "wl", labels={QUEUE: "late"}))
    assert cache.cycle_input(0.0).gangs.pending[0].queue == "late"
    cache.delete_workload("ns/wl")
    assert cache.cycle_input(0.0).gangs.pending[0].queue == "default"


def test_a_deleted_podgroup_keeps_its_pods_waiting_again() -> None:
    cache = cache_of(Case("", WORKERS, [native_group()]))
    assert cache.cycle_input(0.0).gangs.pending
    cache.delete_native_group("ns/g")
    gangs = cache.cycle_input(0.0).gangs
    assert not gangs.pending and "ns/g" in gangs.problems


@settings(max_examples=60, deadline=None)
@given(min_count=st.integers(1, 8), bound=st.integers(0, 8), waiting=st.integers(0, 8),
       running=st.booleans())
def test_required_members_are_min_count_less_the_bound(min_count: int, bound: int,
                                                       waiting: int, running: bool) -> None:
    """Whatever minCount becomes, the pending part needs exactly what is missing, and a group
    with a running member is never offered for rollback."""
    phase = PodPhase.RUNNING if running else PodPhase.PENDING
    pods = [*[dataclasses.replace(member(f"b{i}", node="n1", phase=phase),
                                  started_at=1.0 if running else None) for i in range(bound)],
            *[member(f"w{i}") for i in range(waiting)]]
    gangs = cache_of(Case("", pods, [native_group(min_count)])).cycle_input(0.0).gangs
    if waiting:
        (gang,) = gangs.pending
        assert gang.min_member == max(0, min_count - bound)
    if running:
        assert not gangs.partially_bound
