"""The provision step inside ``decide``: a gang with no room in a pool that may scale up asks
for its nodes; off by default; a gang that fits binds as before."""

from __future__ import annotations

from dataclasses import replace

from policies.queues import PolicySet
from scheduler.decide.cycle import decide
from scheduler.decide.plan import PodSet, ScaleUp
from scheduler.model.node_groups import NodeGroup, ProvisioningState, Stage
from scheduler.model.nodes import Node
from scheduler.model.resources import GPU, Resources
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import POOL, gang, nodes, policies, queue

TEMPLATE = Node.build("a100-template", Resources({GPU: 8, "cpu": 64_000, "pods": 110}),
                      {POOL: "train"})
GROUPS = (NodeGroup("a100", TEMPLATE, 0, 4),)
BIG = gang("big", gpus=8, pods=4, pool="train")
NONE_IN_POOL = Snapshot(nodes("other", 1), [])


def scaling(*pools: str) -> PolicySet:
    pol = policies(queue("q", quota={"train": 64}))
    return replace(pol, scheduler=replace(pol.scheduler, scale_up_pools=frozenset(pools)))


def test_a_gang_on_a_pool_scaled_to_zero_asks_for_all_its_nodes() -> None:
    plan = decide(NONE_IN_POOL, [BIG], scaling("train"), 0.0, node_groups=GROUPS)
    assert plan.scale_ups == (ScaleUp("ns/big", "a100", 4, (PodSet("worker", 4),)),)
    assert plan.pending[BIG.id].message.endswith(
        "; waiting for 4 new nodes of node group a100 (autoscaler)")
    assert plan.binds == ()


def test_off_by_default_the_plan_is_the_one_without_node_groups() -> None:
    without = decide(NONE_IN_POOL, [BIG], scaling(), 0.0)
    assert decide(NONE_IN_POOL, [BIG], scaling(), 0.0, node_groups=GROUPS) == without
    assert without.scale_ups == ()


def test_a_gang_too_big_for_the_group_waits_with_the_reason() -> None:
    huge = gang("huge", gpus=8, pods=6, pool="train")
    plan = decide(NONE_IN_POOL, [huge], scaling("train"), 0.0, node_groups=GROUPS)
    assert plan.scale_ups == ()
    assert plan.pending[huge.id].message.endswith(
        "no node group can add the whole gang: group a100 can add 4 of the 6 nodes needed "
        "(max size 4)")


def test_the_autoscalers_answer_is_quoted() -> None:
    asked = {BIG.id: ProvisioningState(Stage.NOT_FOUND, "Capacity is not found, CA will try "
                                                         "to find it later.")}
    plan = decide(NONE_IN_POOL, [BIG], scaling("train"), 0.0, node_groups=GROUPS, asked=asked)
    assert plan.pending[BIG.id].message.endswith(
        "the autoscaler cannot add its nodes yet: Capacity is not found, CA will try to find "
        "it later.")
    assert len(plan.scale_ups) == 1  # kept while the autoscaler tries


def test_once_the_nodes_are_there_the_gang_binds_whole_and_no_longer_asks() -> None:
    ready = Snapshot(nodes("train", 4), [])
    plan = decide(ready, [BIG], scaling("train"), 0.0, node_groups=(replace(GROUPS[0], size=4),))
    bind = plan.bind_of(BIG.id)
    assert bind is not None and bind.placement.pods_placed() == 4
    assert plan.scale_ups == () and BIG.id not in plan.pending


def test_a_gang_of_several_bound_in_a_pool_that_may_scale_up_is_kept_from_scale_down() -> None:
    ready = Snapshot(nodes("train", 4), [])
    bind = decide(ready, [BIG], scaling("train"), 0.0).bind_of(BIG.id)
    assert bind is not None and bind.keep_from_scale_down


def test_a_gang_is_left_to_scale_down_where_no_autoscaler_runs_or_alone() -> None:
    ready = Snapshot(nodes("train", 4), [])
    elsewhere = decide(ready, [BIG], scaling("other"), 0.0).bind_of(BIG.id)
    assert elsewhere is not None and not elsewhere.keep_from_scale_down
    lone = gang("lone", gpus=8, pods=1, pool="train")
    alone = decide(ready, [lone], scaling("train"), 0.0).bind_of(lone.id)
    assert alone is not None and not alone.keep_from_scale_down
