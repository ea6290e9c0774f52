"""A gang whose own objects disagree (queue, priority) is scheduled by a documented precedence
and its user is told once, naming both values and the one used (issue 32, item 5)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from scheduler.feed.cache import ClusterCache
from scheduler.feed.grouping import GroupingConfig, build_gangs
from scheduler.kube.events import ObjectRef
from scheduler.kube.write.gang_notices import GangNotices
from scheduler.model import Gang
from scheduler.model.native import GroupPolicy, NativeGroupInfo
from scheduler.model.workloads import JobInfo, OwnerRef, PodGroupInfo, PodInfo
from tests.unit.test_grouping import pod

QUEUE = "gangscheduler.io/queue"
PG = "scheduling.x-k8s.io/pod-group"
PRECEDENCE = "the first found in its PodGroup or Workload, then its Job or JobSet, then its pods"


def members(*queues: str | None, priorities: tuple[int, ...] = ()) -> list[PodInfo]:
    """Pods g-0, g-1, ... of PodGroup g, each with the queue label given (None: none)."""
    out = []
    for i, q in enumerate(queues):
        labels = {PG: "g", **({QUEUE: q} if q else {})}
        p = pod(f"g-{i}", labels=labels)
        out.append(dataclasses.replace(p, priority=priorities[i]) if priorities else p)
    return out


@dataclass
class Case:
    name: str
    pods: list[PodInfo]
    group_queue: str | None = "team-a"
    queue: str = "team-a"
    priority: int = 0
    notices: tuple[str, ...] = ()
    jobs: dict[str, JobInfo] = field(default_factory=dict)


CASES = [
    Case("all agree: nothing to say", members("team-a", "team-a")),
    Case("pods without the label: the PodGroup's, nothing to say", members(None, None)),
    # Pods that agree are "its pods": the notice does not change as more of them arrive.
    Case("the PodGroup's queue wins over its pods'", members("team-b", "team-b"),
         notices=(f"label {QUEUE} differs (PodGroup: 'team-a'; its pods: 'team-b'); the "
                  f"gang uses 'team-a', {PRECEDENCE} by name",)),
    Case("no PodGroup label: the first pod by name", members("team-b", "team-c", "team-b"),
         group_queue=None, queue="team-b",
         notices=(f"label {QUEUE} differs (pods g-0, g-2: 'team-b'; pod g-1: 'team-c'); the "
                  f"gang uses 'team-b', {PRECEDENCE} by name",)),
    Case("many pods are named by their first three",
         members(*(["team-b"] * 4), "team-c"),
         notices=(f"label {QUEUE} differs (PodGroup: 'team-a'; pods g-0, g-1, g-2 and 1 more: "
                  f"'team-b'; pod g-4: 'team-c'); the gang uses 'team-a', {PRECEDENCE} by "
                  "name",)),
    Case("members' priorities differ: the highest", members(None, None, priorities=(0, 100)),
         priority=100,
         notices=("priority differs (pod g-0: 0; pod g-1: 100); the gang uses 100, the "
                  "highest",)),
    Case("both at once", members("team-b", None, priorities=(5, 0)), priority=5,
         notices=(f"label {QUEUE} differs (PodGroup: 'team-a'; its pods: 'team-b'); the gang "
                  f"uses 'team-a', {PRECEDENCE} by name",
                  "priority differs (pod g-1: 0; pod g-0: 5); the gang uses 5, the highest")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_grouping_picks_by_precedence_and_says_what_disagreed(case: Case) -> None:
    labels = {QUEUE: case.group_queue} if case.group_queue else {}
    group = PodGroupInfo("ns", "g", uid="pg-g", min_member=len(case.pods), labels=labels)
    (gang,) = build_gangs(case.pods, {"ns/g": group}, case.jobs, GroupingConfig()).pending
    assert (gang.queue, gang.priority, gang.notices) == (case.queue, case.priority,
                                                         case.notices)


def test_a_jobs_queue_comes_before_its_pods() -> None:
    owner = OwnerRef("Job", "j", "juid")
    pods = [pod(f"j-{i}", labels={QUEUE: "team-b"}, owner=owner) for i in range(2)]
    job = JobInfo("ns", "j", "juid", parallelism=2, labels={QUEUE: "team-a"})
    (gang,) = build_gangs(pods, {}, {"ns/j": job}, GroupingConfig()).pending
    assert gang.queue == "team-a"
    assert gang.notices == (f"label {QUEUE} differs (owner j: 'team-a'; its pods: "
                            f"'team-b'); the gang uses 'team-a', {PRECEDENCE} by name",)


def test_a_native_podgroups_priority_wins_and_is_said() -> None:
    cache = ClusterCache()
    cache.upsert_native_group(NativeGroupInfo(
        "ns", "g", policy=GroupPolicy(min_count=2, priority=500), uid="uid-pg-g"))
    for i in range(2):
        cache.upsert_pod(dataclasses.replace(pod(f"w{i}"), pod_group_name="g"))
    (gang,) = cache.cycle_input(0.0).gangs.pending
    assert gang.priority == 500
    assert gang.notices == ("priority differs (PodGroup: 500; its pods: 0); the gang uses "
                            "500, its PodGroup's",)


def test_the_notices_are_kept_on_the_running_gang() -> None:
    bound = [dataclasses.replace(p, node_name="n0") for p in members("team-b", "team-b")]
    group = PodGroupInfo("ns", "g", uid="pg-g", min_member=2, labels={QUEUE: "team-a"})
    running = build_gangs(bound, {"ns/g": group}, {}, GroupingConfig()).running_by_id["ns/g"]
    assert running.gang.queue == "team-a" and len(running.gang.notices) == 1


class Recorder:
    def __init__(self) -> None:
        self.emitted: list[tuple[ObjectRef, str, str]] = []

    def emit(self, ref: ObjectRef, reason: str, message: str, type_: str = "Normal") -> None:
        self.emitted.append((ref, reason, message))


def test_each_gang_is_told_once_until_what_it_is_told_changes() -> None:
    pods = members("team-b", "team-b")
    group = PodGroupInfo("ns", "g", uid="pg-g", min_member=2, labels={QUEUE: "team-a"})
    events = Recorder()
    notices = GangNotices(events, lambda gid: group, lambda gid: pods)  # type: ignore[arg-type]
    (gang,) = build_gangs(pods, {"ns/g": group}, {}, GroupingConfig()).pending
    for _ in range(3):  # every cycle
        notices.report([gang])
    (told,) = events.emitted
    assert told[0] == ObjectRef.podgroup("ns", "g", "pg-g") and told[1] == "InconsistentGang"
    assert told[2].startswith("gang ns/g: label gangscheduler.io/queue differs")
    notices.report([dataclasses.replace(gang, notices=())])  # fixed
    notices.report([gang])  # broken again: told again
    assert len(events.emitted) == 2


def test_a_gang_of_lone_pods_is_told_on_each_pod() -> None:
    pods = [pod("a", labels={QUEUE: "team-a"}), pod("b", labels={QUEUE: "team-b"})]
    gang = Gang(id="ns/x", uid="u", namespace="ns", name="x", queue="team-a", roles=(),
                notices=("label differs",))
    events = Recorder()
    GangNotices(events, lambda gid: None, lambda gid: pods).report([gang])  # type: ignore[arg-type]
    assert [(r.kind, r.name) for r, _, _ in events.emitted] == [("Pod", "a"), ("Pod", "b")]
