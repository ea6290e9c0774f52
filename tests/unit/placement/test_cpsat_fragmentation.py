"""CP-SAT under the ``fragmentation`` packing policy: the term changes what it decides where
fragmentation and best fit disagree, and never what a placement may be (capacity, whole
gangs); without the policy the model is the one of before."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.model import Gang, Node
from scheduler.model.resources import Resources
from scheduler.placement import PlacementParams, Unplaceable
from scheduler.placement import cpsat_fragmentation as fragmentation
from scheduler.placement.candidates import candidates
from scheduler.placement.cpsat import Budget, solve_counts
from scheduler.placement.eligibility import prepare
from scheduler.placement.gpu_shares import Mix, ShareRequest
from scheduler.placement.greedy import Assign
from scheduler.world.snapshot import Snapshot
from tests.unit.placement.builders import gang, node, role
from tests.unit.placement.test_properties import (
    SETTINGS,
    Instance,
    _allowed,
    brute_force,
    instances,
)

AMPLE = Budget(10.0, 10.0)
FOUR_GPU_PODS = Mix.observed([ShareRequest(0, 0, 4)] * 3)
CPU_HUNGRY_ONE_GPU_PODS = Mix.observed([ShareRequest(8000, 0, 1)] * 3)
ONE_GPU_PODS = Mix.observed([ShareRequest(0, 0, 1)] * 3)


def gpus_cpus(name: str, used_gpus: int, used_cpus: int = 0) -> tuple[Node, Resources]:
    return node(name, gpu=8, cpu=64), Resources({"nvidia.com/gpu": used_gpus,
                                                  "cpu": 1000 * used_cpus})


def place(g: Gang, nodes: list[tuple[Node, Resources]], mix: Mix | None) -> Assign | None:
    snap = Snapshot([n for n, _ in nodes], (), {n.name: used for n, used in nodes})
    problem = prepare(g, snap, PlacementParams(fragmentation_mix=mix))
    assert not isinstance(problem, Unplaceable), problem
    cands = candidates(problem)
    return solve_counts(problem, cands, cands.nodes, AMPLE).assign


@dataclass(frozen=True)
class Row:
    why: str
    gang: Gang
    nodes: list[tuple[Node, Resources]]
    mix: Mix
    with_term: str  # the node CP-SAT chooses with the term
    best_fit: str  # and without it


ROWS = [
    Row("taking 2 of 5 free GPUs leaves no room for the mix's 4-GPU pods; 2 of 6 does",
        gang(role("w", 1, gpu=2)), [gpus_cpus("a", 3), gpus_cpus("b", 2)], FOUR_GPU_PODS,
        with_term="b", best_fit="a"),
    Row("a CPU-hungry pod on the tighter node leaves its last GPUs without CPU to feed them",
        gang(role("w", 1, gpu=1, cpu_m=24_000)), [gpus_cpus("a", 4), gpus_cpus("b", 5, 36)],
        CPU_HUNGRY_ONE_GPU_PODS, with_term="a", best_fit="b"),
    Row("one-GPU pods fit on what either node leaves: best fit decides, as without the term",
        gang(role("w", 1, gpu=2)), [gpus_cpus("a", 3), gpus_cpus("b", 2)], ONE_GPU_PODS,
        with_term="a", best_fit="a"),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.why for r in ROWS])
def test_the_term_decides_where_fragmentation_and_best_fit_disagree(row: Row) -> None:
    assert place(row.gang, row.nodes, row.mix) == {("w", row.with_term): 1}
    assert place(row.gang, row.nodes, None) == {("w", row.best_fit): 1}


@pytest.mark.parametrize("row", [r for r in ROWS if r.with_term != r.best_fit],
                         ids=[r.why for r in ROWS if r.with_term != r.best_fit])
def test_with_the_term_zeroed_the_decision_is_best_fit_again(
        row: Row, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fragmentation, "outcome_costs",
                        lambda frag, before, most, *_: (0,) * (most + 1))
    assert place(row.gang, row.nodes, row.mix) == {("w", row.best_fit): 1}


def test_without_the_policy_no_term_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("the fragmentation term was built without the policy")

    monkeypatch.setattr(fragmentation, "encode", refuse)
    row = ROWS[0]
    assert place(row.gang, row.nodes, None) == {("w", row.best_fit): 1}


def test_a_table_entry_per_gpu_count_from_the_share_rule() -> None:
    frag = fragmentation.Fragmentation(FOUR_GPU_PODS)
    before = fragmentation.NodeState(64_000, 512 << 10, (1000,) * 6)
    # 6 free: 4-GPU pods fit until fewer than 4 are left, then every free GPU is lost.
    assert fragmentation.outcome_costs(frag, before, 6, 0.0, 0.0) == (0, 0, 0, 3000, 2000, 1000, 0)


MIXES = st.lists(st.builds(ShareRequest, st.sampled_from((0, 1000, 4000)), st.just(0),
                           st.sampled_from((1, 2, 4, 8))), min_size=1, max_size=4).map(Mix.observed)


@SETTINGS
@given(instances(), MIXES)
def test_with_the_term_cpsat_stays_within_capacity_and_places_whole_gangs(
        inst: Instance, mix: Mix) -> None:
    g = replace(inst.gang, topology=None)
    inst = replace(inst, gang=g, params=replace(inst.params, fragmentation_mix=mix))
    snap = inst.snapshot()
    problem = prepare(g, snap, inst.params)
    if isinstance(problem, Unplaceable):
        return
    cands = candidates(problem)
    outcome = solve_counts(problem, cands, cands.nodes, AMPLE)
    if outcome.assign is None:
        assert outcome.infeasible
        assert not brute_force(inst, snap)
        return
    per_node: dict[str, Resources] = {}
    for (name, n), count in outcome.assign.items():
        assert count > 0 and n in _allowed(inst, snap, name)
        per_node[n] = per_node.get(n, Resources()) + g.role(name).requests * count
    for n, use in per_node.items():
        assert use.fits_in(snap.free(n)), (n, use, snap.free(n))
    for r in g.roles:
        assert sum(c for (name, _), c in outcome.assign.items() if name == r.name) == r.required
