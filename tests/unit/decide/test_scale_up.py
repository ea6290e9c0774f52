"""The "provision" step: which node group is asked for a whole gang's nodes, or why none."""

from __future__ import annotations

import pytest

from scheduler.decide.plan import PendingReason, PodSet, ReasonCategory, ScaleUp
from scheduler.decide.scale_up import NoScaleUp, ScaleUps, nodes_for, plan_scale_up, provision
from scheduler.model.node_groups import NodeGroup, ProvisioningState, Stage
from scheduler.model.nodes import Node, Taint, TaintEffect
from scheduler.model.resources import GPU, Resources
from tests.unit.policies.builders import POOL, gang

EIGHT_GPU_NODE = Resources({GPU: 8, "cpu": 64000, "pods": 110})


def group(name: str = "a100", *, pool: str = "train", size: int = 0, max_size: int = 4,
          node: Resources = EIGHT_GPU_NODE, taints: tuple[Taint, ...] = ()) -> NodeGroup:
    template = Node.build(f"{name}-template", node, {POOL: pool}, taints)
    return NodeGroup(name, template, size, max_size)


def test_a_four_by_eight_gpu_gang_asks_for_four_nodes_of_its_pool_at_once() -> None:
    plan = plan_scale_up(gang("big", gpus=8, pods=4, pool="train"), (group(),))
    assert plan == ScaleUp("ns/big", "a100", 4, (PodSet("worker", 4),))
    assert plan.message == "waiting for 4 new nodes of node group a100 (autoscaler)"


def test_members_that_share_a_node_are_packed() -> None:
    assert nodes_for(gang("small", gpus=2, pods=5), group()) == 2


def test_a_gang_beyond_the_groups_max_size_gets_a_reason_naming_the_limit() -> None:
    plan = plan_scale_up(gang("huge", gpus=8, pods=6), (group(size=1),))
    assert plan == NoScaleUp("ns/huge", "no node group can add the whole gang: group a100 can "
                             "add 3 of the 6 nodes needed (max size 4)")


def test_a_member_larger_than_a_node_is_named() -> None:
    plan = plan_scale_up(gang("wide", gpus=16), (group(),))
    assert isinstance(plan, NoScaleUp)
    assert "a member does not fit on one node of group a100" in plan.message


def test_only_a_group_whose_nodes_the_pods_may_use_is_grown() -> None:
    tainted = Taint("gpu", "reserved", TaintEffect.NO_SCHEDULE)
    groups = (group("other-pool", pool="infer"), group("tainted", taints=(tainted,)))
    plan = plan_scale_up(gang("big", gpus=8, pods=2, pool="train"), groups)
    assert plan == NoScaleUp("ns/big", "no node group the autoscaler can grow takes its pods "
                             "(node selector, affinity or taints)")


def test_the_group_needing_fewest_nodes_wins_then_by_name() -> None:
    sixteen = Resources({GPU: 16, "cpu": 64000, "pods": 110})
    groups = (group("z-big", node=sixteen), group("a-small"), group("b-big", node=sixteen))
    plan = plan_scale_up(gang("big", gpus=8, pods=4), groups)
    assert isinstance(plan, ScaleUp)
    assert (plan.group, plan.nodes) == ("b-big", 2)


def test_a_group_too_small_is_skipped_for_one_that_can_take_the_gang() -> None:
    groups = (group("a-full", size=4), group("b-empty"))
    plan = plan_scale_up(gang("big", gpus=8, pods=4), groups)
    assert isinstance(plan, ScaleUp) and plan.group == "b-empty"


@pytest.mark.parametrize(("size", "max_size", "field"), [(-1, 4, "negative"), (5, 4, "below")])
def test_a_bad_node_group_is_refused_naming_the_field(size: int, max_size: int,
                                                      field: str) -> None:
    with pytest.raises(ValueError, match=field):
        group(size=size, max_size=max_size)


NO_ROOM = PendingReason(ReasonCategory.PLACEMENT, "no room")
BIG = gang("big", gpus=8, pods=4, pool="train")


def test_a_gang_without_room_in_an_enabled_pool_is_asked_for_and_told_so() -> None:
    out = provision([BIG], {BIG.id: NO_ROOM}, (group(),), frozenset({"train"}), {})
    assert out.requests == (ScaleUp("ns/big", "a100", 4, (PodSet("worker", 4),)),)
    assert out.pending is not None
    assert out.pending[BIG.id].message == ("no room; waiting for 4 new nodes of node group "
                                           "a100 (autoscaler)")


def test_without_enabled_pools_nothing_changes() -> None:
    out = provision([BIG], {BIG.id: NO_ROOM}, (group(),), frozenset(), {})
    assert out == ScaleUps()


def test_a_gang_pending_for_another_reason_is_not_asked_for_but_held() -> None:
    quota = PendingReason(ReasonCategory.QUOTA, "over quota")
    out = provision([BIG], {BIG.id: quota}, (group(),), frozenset({"train"}), {})
    assert out.requests == () and out.pending == {BIG.id: quota}
    assert out.held == (BIG.id,)  # kept out of the autoscaler's own scale-up


def test_a_gang_no_group_can_take_whole_is_held_and_an_asked_one_is_not() -> None:
    small = group(max_size=3)
    out = provision([BIG], {BIG.id: NO_ROOM}, (small,), frozenset({"train"}), {})
    assert out.requests == () and out.held == (BIG.id,)
    out = provision([BIG], {BIG.id: NO_ROOM}, (group(),), frozenset({"train"}), {})
    assert out.held == ()


@pytest.mark.parametrize(("state", "asks", "said"), [
    (ProvisioningState(Stage.PROVISIONED, "Capacity is provisioned"), True,
     "the autoscaler is adding its nodes: Capacity is provisioned"),
    (ProvisioningState(Stage.NOT_FOUND, "Capacity is not found, CA will try to find it later."),
     True, "the autoscaler cannot add its nodes yet: Capacity is not found, CA will try to "
     "find it later."),
    (ProvisioningState(Stage.FAILED, "request expired"), False,
     "the autoscaler gave up on its nodes: request expired"),
    (ProvisioningState(Stage.EXPIRED, "booking expired"), True,
     "waiting for 4 new nodes of node group a100 (autoscaler)"),
])
def test_an_earlier_request_is_kept_and_its_answer_quoted(state: ProvisioningState, asks: bool,
                                                          said: str) -> None:
    out = provision([BIG], {BIG.id: NO_ROOM}, (group(),), frozenset({"train"}), {BIG.id: state})
    assert bool(out.requests) is asks
    assert out.pending is not None and out.pending[BIG.id].message == f"no room; {said}"
