"""PodGroup ``minResources``: a gang still waiting for members learns at once that it could
never fit (the cluster or its queue is too small), instead of after every pod was created;
otherwise it waits for members as before, and once they all exist its pods decide."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.decide.cycle import decide
from scheduler.decide.plan import ReasonCategory
from scheduler.feed.grouping import GroupingConfig, build_gangs
from scheduler.model import Gang, PodRequirements, Resources
from scheduler.model.workloads import PodGroupInfo, PodInfo, PodPhase
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import GPU, SOLVE, gang, nodes, policies, queue

R = ReasonCategory
NODES = nodes("a100", 2) + nodes("h100", 2)  # 16 GPUs in each pool, 32 in all
QUEUES = (queue("q", quota={"a100": 16}), queue("big", quota={"a100": 16, "h100": 16}))


def short_gang(min_gpus: int | None, queue_name: str = "q", present: int = 1) -> Gang:
    """A gang of 4 one-GPU members of which *present* exist, maybe with minResources."""
    g = gang("g", queue_name, gpus=1, pods=4, present=present)
    return replace(g, min_resources=None if min_gpus is None else Resources({GPU: min_gpus}))


@pytest.mark.parametrize(("min_gpus", "queue_name", "category", "words"), [
    (None, "q", R.WAITING_FOR_MEMBERS, "1 of 4 required members exist"),
    (4, "q", R.WAITING_FOR_MEMBERS, "1 of 4 required members exist"),
    (16, "q", R.WAITING_FOR_MEMBERS, "1 of 4 required members exist"),  # exactly the quota
    (17, "q", R.QUOTA, "17 nvidia.com/gpu asked, at most 16 ever available across pools a100"),
    (32, "big", R.WAITING_FOR_MEMBERS, "1 of 4 required members exist"),  # quota in two pools
    (33, "big", R.PLACEMENT, "33 nvidia.com/gpu asked, the cluster has 32"),
])
def test_a_gang_waiting_for_members_is_told_when_min_resources_can_never_be_met(
        min_gpus: int | None, queue_name: str, category: ReasonCategory, words: str) -> None:
    plan = decide(Snapshot(NODES, ()), [short_gang(min_gpus, queue_name)], policies(*QUEUES),
                  0.0, solver=SOLVE)
    reason = plan.pending["ns/g"]
    assert reason.category is category, reason
    assert words in reason.message, reason.message
    assert not plan.binds


def test_min_resources_are_judged_against_the_nodes_of_each_cycle() -> None:
    """Answers are cached per gang with the snapshot's nodes; new nodes, a new answer."""
    g = short_gang(40, "big")
    first = decide(Snapshot(NODES, ()), [g], policies(*QUEUES), 0.0, solver=SOLVE)
    assert "the cluster has 32" in first.pending["ns/g"].message
    more = NODES + nodes("b200", 2)  # 48 GPUs now; the queue's quota (32) is what says no
    second = decide(Snapshot(more, ()), [g], policies(*QUEUES), 1.0, solver=SOLVE)
    assert second.pending["ns/g"].category is R.QUOTA


def pod(name: str) -> PodInfo:
    return PodInfo(uid=f"uid-{name}", namespace="ns", name=name,
                   requirements=PodRequirements(Resources({GPU: 1})),
                   scheduler_name="gang-scheduler", phase=PodPhase.PENDING,
                   labels={"scheduling.x-k8s.io/pod-group": "g"})


@pytest.mark.parametrize(("pods", "expected"), [
    (3, Resources({GPU: 64})),  # short of members: carried, for the early check
    (4, None),  # all members exist: their own requests decide
])
def test_grouping_carries_min_resources_only_while_members_are_missing(
        pods: int, expected: Resources | None) -> None:
    group = PodGroupInfo("ns", "g", min_member=4, min_resources=Resources({GPU: 64}))
    out = build_gangs([pod(f"w{i}") for i in range(pods)], {"ns/g": group}, {},
                      GroupingConfig())
    (g,) = out.pending
    assert g.min_resources == expected


@pytest.mark.parametrize(("min_member", "category", "words"), [
    (440, R.WAITING_FOR_MEMBERS, "1 of 440 required members exist"),  # all 4 nodes can take
    (441, R.PLACEMENT, "minMember 441 can never be met: 1 of 441 members exist, and the "
                       "cluster's nodes hold at most 440 pods in all"),
    (999_999_999_999, R.PLACEMENT, "minMember 999999999999 can never be met"),
])
def test_a_minimum_more_members_than_the_nodes_can_take_is_said_unmeetable(
        min_member: int, category: ReasonCategory, words: str) -> None:
    """``min-member: 999999999999`` waited for members with no word that it never could
    (issue 32): more than the pods every node together can take is no wait, it is unmeetable."""
    g = replace(gang("g", "q", gpus=1, pods=1), declared_min_member=min_member,
                present_members=1)
    plan = decide(Snapshot(NODES, ()), [g], policies(*QUEUES), 0.0, solver=SOLVE)
    reason = plan.pending["ns/g"]
    assert (reason.category, words in reason.message) == (category, True), reason


@pytest.mark.parametrize("declared", ["min-member annotation", "PodGroup minMember"])
def test_an_absurd_min_member_from_grouping_is_said_unmeetable(declared: str) -> None:
    size = 999_999_999_999
    pods = [pod(f"w{i}") for i in range(2)]
    groups = {"ns/g": PodGroupInfo("ns", "g", min_member=size)}
    if declared == "min-member annotation":
        pods = [replace(p, labels={}, annotations={  # a Volcano group: no PodGroup read
            "scheduling.k8s.io/group-name": "g", "gangscheduler.io/min-member": str(size)})
            for p in pods]
        groups = {}
    out = build_gangs(pods, groups, {}, GroupingConfig())
    assert not out.problems, out.problems
    plan = decide(Snapshot(NODES, ()), list(out.pending), policies(*QUEUES), 0.0, solver=SOLVE)
    (reason,) = plan.pending.values()
    assert reason.category is R.PLACEMENT
    assert f"minMember {size} can never be met: 2 of {size} members exist" in reason.message
