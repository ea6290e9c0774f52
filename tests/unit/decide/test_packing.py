"""``spec.placement.packing``: the same cycle decides by best fit or by the least expected
fragmentation under the mix it observes (running and pending gangs), depending on the knob."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policies.queues import Packing, PolicySet
from scheduler.cli.policy import summarise
from scheduler.decide.cycle import decide
from scheduler.decide.recall import Recall
from scheduler.model import Gang, PodRequirements, Role
from scheduler.model.resources import Resources
from scheduler.placement import solve as placement_solve
from scheduler.placement.gpu_shares import Mix, ShareRequest
from scheduler.placement.observed_mix import observed_mix
from scheduler.placement.types import PlacementParams, PlacementResult
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

NODES = nodes("a100", 2)  # 8 GPUs and 64 CPUs each
#: 4 GPUs free on node 0, 5 on node 1: best fit takes node 0 for one GPU, and leaves 3 there,
#: too few for the 4-GPU pods the mix holds; node 1 keeps 4 free either way.
RUNNING = (running(gang("four", "q", gpus=4), {"a100-0000": 1}),
           running(gang("three", "q", gpus=3), {"a100-0001": 1}))
ONE_GPU = gang("one", "q", gpus=1)


def _policies(packing: Packing) -> PolicySet:
    return policies(queue("q", quota={"a100": 64}), packing=packing)


@pytest.mark.parametrize(("packing", "node"), [
    (Packing.BEST_FIT, "a100-0000"),
    (Packing.FRAGMENTATION, "a100-0001"),
])
def test_the_knob_decides_where_a_one_gpu_gang_goes(packing: Packing, node: str) -> None:
    plan = decide(Snapshot(NODES, RUNNING), [ONE_GPU], _policies(packing), 10.0, solver=SOLVE)
    assert [(b.gang_id, b.placement.nodes) for b in plan.binds] == [("ns/one", (node,))]


@pytest.mark.parametrize(("packing", "mixed"), [(Packing.BEST_FIT, False),
                                                (Packing.FRAGMENTATION, True)])
def test_the_solver_gets_the_observed_mix_only_when_on(packing: Packing, mixed: bool) -> None:
    """What CP-SAT reads (``fragmentation_mix``) is the mix of what the cycle sees."""
    seen: list[PlacementParams] = []

    def spy(g: Gang, snapshot: Snapshot, params: PlacementParams) -> PlacementResult:
        seen.append(params)
        return placement_solve(g, snapshot, params)

    decide(Snapshot(NODES, RUNNING), [ONE_GPU], _policies(packing), 10.0, solver=spy)
    want = Mix.observed([ShareRequest(1000, 0, 4), ShareRequest(1000, 0, 3),
                         ShareRequest(1000, 0, 1)]) if mixed else None
    assert seen and {p.fragmentation_mix for p in seen} == {want}


def test_an_equal_mix_keeps_the_same_policy_set() -> None:
    """The tables kept per placement knobs (compared by identity) hold while the mix stays."""
    recall = Recall(Snapshot(NODES).index)
    pol = _policies(Packing.FRAGMENTATION)
    mix = observed_mix(RUNNING, [ONE_GPU])
    first = recall.packing(pol, mix)
    assert recall.packing(pol, observed_mix(RUNNING, [ONE_GPU])) is first
    assert recall.packing(pol, observed_mix(RUNNING, [])) is not first


def test_a_share_of_a_gpu_counts_its_fraction() -> None:
    half = Role("w", 2, PodRequirements(Resources({"cpu": 500})), device_gpus=1,
                device_milli=500)
    g = replace(gang("half", "q"), roles=(half,))
    mix = observed_mix((), [g, gang("cpu", "q", gpus=0)])
    assert mix.kinds == ((ShareRequest(500, 0, 1, 500), 1.0),)


def test_policy_validate_says_the_packing_only_when_not_best_fit() -> None:
    assert "packing" not in summarise(_policies(Packing.BEST_FIT))
    assert ", packing fragmentation" in summarise(_policies(Packing.FRAGMENTATION))
