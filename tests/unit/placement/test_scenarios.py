"""Table-driven placement scenarios: nodes, running work and a gang in; nodes or a reason out."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from scheduler.model import (
    Gang,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    RunningGang,
    SelectorOperator,
    Taint,
    TaintEffect,
    Toleration,
    TopologyMode,
)
from scheduler.model.resources import Resources
from scheduler.placement import (
    Placement,
    PlacementParams,
    Question,
    Unplaceable,
    UnplaceableReason,
    solve,
)
from scheduler.world.snapshot import Snapshot
from tests.unit.placement.builders import BLOCK, HOST, RACK, busy, gang, node, role

R = UnplaceableReason
NO_EXEC = TaintEffect.NO_EXECUTE


@dataclass(frozen=True, slots=True)
class Scenario:
    id: str
    nodes: tuple[Node, ...]
    gang: Gang
    running: tuple[RunningGang, ...] = ()
    other: dict[str, Resources] = field(default_factory=dict)
    params: PlacementParams = field(default_factory=PlacementParams)
    #: Expected pods per node (all roles), or per (role, node) when ``by_role``.
    expect: dict[str, int] | None = None
    by_role: dict[tuple[str, str], int] | None = None
    reason: UnplaceableReason | None = None
    message: str = ""  # fragment of the expected message
    solved_by: str | None = None
    domains_used: int | None = None


def term(key: str, op: SelectorOperator, *values: str) -> NodeSelectorTerm:
    return NodeSelectorTerm((NodeSelectorRequirement(key, op, tuple(values)),))


def nodes(*ns: Node) -> tuple[Node, ...]:
    return ns


TWO = nodes(node("n1"), node("n2"))
LABELLED = nodes(node("a", labels={"gpu": "a100", "gen": "3", "ib": "yes"}),
                 node("h", labels={"gpu": "h100", "gen": "4"}))
RACKS = nodes(*(node(f"r0-{i}", rack="r0", block="b0") for i in range(4)),
              *(node(f"r1-{i}", rack="r1", block="b0") for i in range(4)),
              *(node(f"r2-{i}", rack="r2", block="b1") for i in range(4)))
#: Racks a (8 nodes), b and c (5 each), h (10), all in one block.
SPREAD = nodes(*(node(f"{r}{i}", rack=r, block="b0")
                 for r, n in (("a", 8), ("b", 5), ("c", 5), ("h", 10)) for i in range(n)))
POOLS = nodes(node("a1", labels={"gangscheduler.io/pool": "a100"},
                   taints=(Taint("dedicated", "infer"),)),
              node("a2", labels={"gangscheduler.io/pool": "a100"},
                   taints=(Taint("dedicated", "infer"),)),
              node("h1", labels={"gangscheduler.io/pool": "h100"}))
A100 = {"gangscheduler.io/pool": "a100"}
TOLERATE = (Toleration("dedicated", "Equal", "infer", TaintEffect.NO_SCHEDULE),)

SCENARIOS = [
    # Capacity on each resource ---------------------------------------------------------------
    Scenario("best-fit-gpu", TWO, gang(role("w", 1, gpu=2)), (busy("n2", {"n2": 6}),),
             expect={"n2": 1}),
    Scenario("gpu-full-node-skipped", TWO, gang(role("w", 1, gpu=4)), (busy("n1", {"n1": 6}),),
             expect={"n2": 1}),
    Scenario("cpu-capacity", TWO, gang(role("w", 1, gpu=1, cpu_m=8000)),
             other={"n1": Resources.of(cpu=60_000)}, expect={"n2": 1}),
    Scenario("memory-capacity", TWO, gang(role("w", 1, mem_gi=100)),
             other={"n1": Resources.of(memory=500 << 30)}, expect={"n2": 1}),
    Scenario("pods-slot-capacity", nodes(node("n1", pods=1), node("n2")),
             gang(role("w", 1)), other={"n1": Resources.of(pods=1)}, expect={"n2": 1}),
    Scenario("cpu-never-fits", TWO, gang(role("w", 1, cpu_m=65_000)), reason=R.NEVER_FITS,
             message="role w: one pod needs 65 cpu"),
    # Selectors and every affinity operator --------------------------------------------------
    Scenario("node-selector", LABELLED, gang(role("w", 1, selector={"gpu": "h100"})),
             expect={"h": 1}),
    Scenario("node-selector-no-match", LABELLED,
             gang(role("worker", 1, selector={"gpu": "b200"})), reason=R.NO_ELIGIBLE_NODES,
             message="role worker: nodeSelector gpu=b200 matches no node"),
    Scenario("affinity-in", LABELLED,
             gang(role("w", 1, terms=(term("gpu", SelectorOperator.IN, "h100", "b200"),))),
             expect={"h": 1}),
    Scenario("affinity-not-in", LABELLED,
             gang(role("w", 1, terms=(term("gpu", SelectorOperator.NOT_IN, "a100"),))),
             expect={"h": 1}),
    Scenario("affinity-exists", LABELLED,
             gang(role("w", 1, terms=(term("ib", SelectorOperator.EXISTS),))), expect={"a": 1}),
    Scenario("affinity-does-not-exist", LABELLED,
             gang(role("w", 1, terms=(term("ib", SelectorOperator.DOES_NOT_EXIST),))),
             expect={"h": 1}),
    Scenario("affinity-gt", LABELLED,
             gang(role("w", 1, terms=(term("gen", SelectorOperator.GT, "3"),))), expect={"h": 1}),
    Scenario("affinity-lt", LABELLED,
             gang(role("w", 1, terms=(term("gen", SelectorOperator.LT, "4"),))), expect={"a": 1}),
    Scenario("affinity-terms-are-ored", LABELLED,
             gang(role("w", 2, gpu=8, terms=(term("gpu", SelectorOperator.IN, "a100"),
                                             term("gen", SelectorOperator.GT, "3")))),
             expect={"a": 1, "h": 1}),
    Scenario("affinity-no-match", LABELLED,
             gang(role("w", 1, terms=(term("gen", SelectorOperator.GT, "9"),))),
             reason=R.NO_ELIGIBLE_NODES,
             message="role w: node affinity gen Gt (9) matches no node"),
    # Taints, cordons, readiness, pools ------------------------------------------------------
    Scenario("untolerated-taint-avoided", POOLS, gang(role("w", 1, gpu=1)), expect={"h1": 1}),
    Scenario("pool-taint-not-tolerated", POOLS, gang(role("worker", 1, selector=A100)),
             reason=R.NO_ELIGIBLE_NODES,
             message="role worker: no node in pool a100 tolerates taint "
                     "dedicated=infer:NoSchedule"),
    Scenario("pool-taint-tolerated", POOLS,
             gang(role("w", 2, gpu=8, selector=A100, tolerations=TOLERATE)),
             expect={"a1": 1, "a2": 1}),
    Scenario("no-execute-untolerated", nodes(node("x", taints=(Taint("k", "", NO_EXEC),)),
                                             node("y")),
             gang(role("w", 2, gpu=8)), reason=R.NEVER_FITS, message="needs 16 nvidia.com/gpu"),
    Scenario("no-execute-tolerated-by-exists",
             nodes(node("x", taints=(Taint("k", "v", NO_EXEC),)), node("y")),
             gang(role("w", 2, gpu=8, tolerations=(Toleration("k", "Exists"),))),
             expect={"x": 1, "y": 1}),
    Scenario("toleration-for-other-effect-does-not-help",
             nodes(node("x", taints=(Taint("k", "v", NO_EXEC),))),
             gang(role("w", 1, tolerations=(Toleration("k", "Exists", "",
                                                       TaintEffect.NO_SCHEDULE),))),
             reason=R.NO_ELIGIBLE_NODES, message="tolerates taint k=v:NoExecute"),
    Scenario("prefer-no-schedule-ignored",
             nodes(node("x", taints=(Taint("k", "v", TaintEffect.PREFER_NO_SCHEDULE),))),
             gang(role("w", 1)), expect={"x": 1}),
    Scenario("unschedulable-avoided", nodes(node("x", unschedulable=True), node("y")),
             gang(role("w", 1, gpu=1)), (busy("y", {"y": 7}),), expect={"y": 1}),
    Scenario("all-cordoned", nodes(node("x", unschedulable=True), node("y", ready=False)),
             gang(role("w", 1)), reason=R.NO_ELIGIBLE_NODES,
             message="of 2 nodes in total, 1 cordoned (unschedulable); 1 not ready"),
    Scenario("excluded-nodes", TWO, gang(role("w", 1)),
             params=PlacementParams(excluded_nodes=frozenset({"n1"})), expect={"n2": 1}),
    Scenario("allowed-nodes", TWO, gang(role("w", 1)),
             params=PlacementParams(allowed_nodes=frozenset({"n2"})), expect={"n2": 1}),
    Scenario("all-excluded", TWO, gang(role("w", 1)),
             params=PlacementParams(excluded_nodes=frozenset({"n1", "n2"})),
             reason=R.NO_ELIGIBLE_NODES, message="all 2 eligible nodes are excluded"),
    # Capacity reasons -------------------------------------------------------------------------
    Scenario("never-fits-in-total", nodes(*(node(f"n{i}") for i in range(8))),
             gang(role("w", 9, gpu=8)), reason=R.NEVER_FITS,
             message="needs 72 nvidia.com/gpu in total; 64 are allocatable on eligible nodes "
                     "(never fits)"),
    Scenario("insufficient-names-holders", nodes(*(node(f"n{i}") for i in range(5))),
             gang(role("w", 2, gpu=8)),
             (busy("a", {"n0": 8, "n1": 8, "n2": 4}), busy("b", {"n3": 4, "n4": 4})),
             other={"n4": Resources.of(gpu=2)}, reason=R.INSUFFICIENT_CAPACITY,
             message="needs 16 nvidia.com/gpu; 10 free on eligible nodes (28 held by running "
                     "gangs, 2 by other pods)"),
    Scenario("insufficient-fragmented", TWO, gang(role("w", 2, gpu=4)),
             (busy("a", {"n1": 6, "n2": 2}),), reason=R.INSUFFICIENT_CAPACITY,
             message="role w: needs 2 pods of 4 nvidia.com/gpu, 1 cpu, 1Gi memory; free "
                     "capacity on eligible nodes holds only 1 (8 nvidia.com/gpu free, in pieces "
                     "too small)"),
    # Topology ---------------------------------------------------------------------------------
    Scenario("required-rack-tightest", RACKS, gang(role("w", 3, gpu=8), level=RACK),
             (busy("a", {"r0-0": 8, "r0-1": 8, "r1-0": 8}),),
             expect={"r1-1": 1, "r1-2": 1, "r1-3": 1}, domains_used=1),
    Scenario("required-rack-topology-reason", RACKS, gang(role("w", 4, gpu=8), level=RACK),
             (busy("a", {"r0-0": 8, "r1-0": 8, "r2-0": 4}),), reason=R.TOPOLOGY,
             message="needs 4 × 8 nvidia.com/gpu within one topology.gangscheduler.io/rack; "
                     "the largest rack has 28 nvidia.com/gpu free"),
    Scenario("required-rack-never-fits", RACKS, gang(role("w", 5, gpu=8), level=RACK),
             reason=R.NEVER_FITS, message="the largest rack has 32 nvidia.com/gpu allocatable"),
    Scenario("required-block", RACKS, gang(role("w", 6, gpu=8), level=BLOCK),
             (busy("a", {"r0-0": 8}),),
             expect={"r1-0": 1, "r1-1": 1, "r1-2": 1, "r1-3": 1, "r0-1": 1, "r0-2": 1},
             domains_used=1),
    Scenario("required-host", RACKS, gang(role("w", 2, gpu=2), level=HOST),
             (busy("a", {n.name: 7 for n in RACKS if n.name != "r2-3"}),),
             expect={"r2-3": 2}, domains_used=1),
    Scenario("preferred-one-rack-when-possible", RACKS,
             gang(role("w", 3, gpu=8), level=RACK, mode=TopologyMode.PREFERRED),
             (busy("a", {"r0-0": 8, "r1-0": 8, "r1-1": 8}),),
             expect={"r0-1": 1, "r0-2": 1, "r0-3": 1}, domains_used=1),
    Scenario("preferred-fewest-racks", RACKS,
             gang(role("w", 6, gpu=8), level=RACK, mode=TopologyMode.PREFERRED),
             (busy("a", {"r0-0": 8, "r0-1": 8, "r1-0": 8, "r2-0": 8}),), domains_used=2),
    Scenario("preferred-ranks-racks-by-members-not-gpus", SPREAD,
             gang(role("w", 20, gpu=4), level=RACK, mode=TopologyMode.PREFERRED),
             (busy("a", {n.name: 1 if n.name.startswith("a") else 8
                         for n in SPREAD if n.name[0] in "ah"}),),
             expect={n.name: 2 for n in SPREAD if n.name[0] in "bc"}, solved_by="greedy",
             domains_used=2),
    Scenario("preferred-cpsat-reduces-racks", SPREAD,
             gang(role("w", 20, gpu=4), role("helper", 2, cpu_m=1000),
                  level=RACK, mode=TopologyMode.PREFERRED),
             (busy("a", {n.name: 1 if n.name.startswith("a") else 8
                         for n in SPREAD if n.name[0] in "ah"}),),
             solved_by="cpsat", domains_used=2),
    Scenario("unconstrained-prefers-one-rack", RACKS, gang(role("w", 2, gpu=8)),
             (busy("a", {"r0-0": 8, "r1-0": 8, "r1-1": 8, "r2-0": 8, "r2-2": 8}),),
             expect={"r1-2": 1, "r1-3": 1}),
    Scenario("unknown-level", RACKS, gang(role("w", 2, gpu=8), level="example.com/zone"),
             reason=R.NEVER_FITS, message="topology level example.com/zone is not configured"),
    # minMember < size, multi-role ------------------------------------------------------------
    Scenario("optional-members-as-capacity-allows", nodes(*(node(f"n{i}") for i in range(3))),
             gang(role("w", 5, gpu=8, min_count=2)), expect={"n0": 1, "n1": 1, "n2": 1}),
    Scenario("optional-members-stay-in-the-required-rack", RACKS,
             gang(role("w", 8, gpu=8, min_count=2), level=RACK),
             (busy("a", {"r0-0": 8, "r1-0": 8, "r1-1": 8}),),
             expect={"r1-2": 1, "r1-3": 1}, domains_used=1),
    Scenario("optional-members-near-the-others", RACKS,
             gang(role("w", 3, gpu=8, min_count=1), level=RACK, mode=TopologyMode.PREFERRED),
             (busy("a", {"r0-0": 8, "r0-1": 8, "r0-2": 8, "r1-0": 8, "r1-1": 8, "r1-2": 8,
                        "r2-0": 4}),),
             expect={"r2-1": 1, "r2-2": 1, "r2-3": 1}, domains_used=1),
    Scenario("optional-members-added-as-room-allows", RACKS,
             gang(role("w", 4, gpu=8, min_count=1), level=RACK, mode=TopologyMode.PREFERRED),
             (busy("a", {n.name: 8 for n in RACKS if n.name not in ("r0-3", "r2-2")}),),
             expect={"r0-3": 1, "r2-2": 1}, domains_used=2),
    Scenario("required-members-must-fit", nodes(node("n0"), node("n1")),
             gang(role("w", 5, gpu=8, min_count=3)), reason=R.NEVER_FITS),
    Scenario("launcher-joins-a-worker-node", RACKS,
             gang(role("worker", 2, gpu=8, cpu_m=8000), role("launcher", 1, cpu_m=2000)),
             (busy("a", {n.name: 8 for n in RACKS if n.name not in ("r2-1", "r2-2")}),),
             by_role={("launcher", "r2-1"): 1, ("worker", "r2-1"): 1, ("worker", "r2-2"): 1}),
    Scenario("multi-role-greedy-fails-cpsat-places",
             nodes(node("n0", cpu=8), node("n1", cpu=8), node("n2", cpu=8)),
             gang(role("r0", 1, gpu=1, cpu_m=4000, mem_gi=0),
                  role("r1", 2, gpu=2, cpu_m=2000, mem_gi=0)),
             (busy("a", {"n2": 2}),),
             other={"n0": Resources.of(cpu=6000), "n1": Resources.of(cpu=2000),
                    "n2": Resources.of(cpu=6000)},
             by_role={("r0", "n1"): 1, ("r1", "n1"): 1, ("r1", "n2"): 1}, solved_by="cpsat"),
    Scenario("greedy-fails-no-cpsat-is-a-limit",
             nodes(node("n0", cpu=8), node("n1", cpu=8), node("n2", cpu=8)),
             gang(role("r0", 1, gpu=1, cpu_m=4000, mem_gi=0),
                  role("r1", 2, gpu=2, cpu_m=2000, mem_gi=0)),
             (busy("a", {"n2": 2}),),
             other={"n0": Resources.of(cpu=6000), "n1": Resources.of(cpu=2000),
                    "n2": Resources.of(cpu=6000)},
             params=PlacementParams(use_cpsat=False), reason=R.SOLVER_LIMIT),
    Scenario("cpsat-out-of-budget-is-a-limit",
             nodes(node("n0", cpu=8), node("n1", cpu=8), node("n2", cpu=8)),
             gang(role("r0", 1, gpu=1, cpu_m=4000, mem_gi=0),
                  role("r1", 2, gpu=2, cpu_m=2000, mem_gi=0)),
             (busy("a", {"n2": 2}),),
             other={"n0": Resources.of(cpu=6000), "n1": Resources.of(cpu=2000),
                    "n2": Resources.of(cpu=6000)},
             params=PlacementParams(cpsat_deterministic_limit=0.0), reason=R.SOLVER_LIMIT),
    Scenario("required-domain-cpsat-out-of-budget-is-a-limit",
             nodes(node("n0", cpu=8, rack="r", block="b"), node("n1", cpu=8, rack="r", block="b"),
                   node("n2", cpu=8, rack="r", block="b")),
             gang(role("r0", 1, gpu=1, cpu_m=4000, mem_gi=0),
                  role("r1", 2, gpu=2, cpu_m=2000, mem_gi=0), level=RACK),
             (busy("a", {"n2": 2}),),
             other={"n0": Resources.of(cpu=6000), "n1": Resources.of(cpu=2000),
                    "n2": Resources.of(cpu=6000)},
             params=PlacementParams(cpsat_deterministic_limit=0.0), reason=R.SOLVER_LIMIT,
             message="CP-SAT decided 0 of 1 candidate racks"),
    Scenario("required-domain-cpsat-places",
             nodes(node("n0", cpu=8, rack="r", block="b"), node("n1", cpu=8, rack="r", block="b"),
                   node("n2", cpu=8, rack="r", block="b")),
             gang(role("r0", 1, gpu=1, cpu_m=4000, mem_gi=0),
                  role("r1", 2, gpu=2, cpu_m=2000, mem_gi=0), level=RACK),
             (busy("a", {"n2": 2}),),
             other={"n0": Resources.of(cpu=6000), "n1": Resources.of(cpu=2000),
                    "n2": Resources.of(cpu=6000)},
             by_role={("r0", "n1"): 1, ("r1", "n1"): 1, ("r1", "n2"): 1}, solved_by="cpsat",
             domains_used=1),
    # Packing keeps whole nodes free -----------------------------------------------------------
    Scenario("small-pod-fills-a-partly-used-node", nodes(*(node(f"n{i}") for i in range(4))),
             gang(role("w", 1, gpu=1)), (busy("a", {"n2": 5, "n3": 6}),), expect={"n3": 1}),
    Scenario("small-gang-on-one-node-not-spread", nodes(*(node(f"n{i}") for i in range(4))),
             gang(role("w", 4, gpu=1)), (busy("a", {"n0": 7, "n1": 6, "n2": 4}),),
             expect={"n2": 4}),
    Scenario("multi-node-gang-takes-whole-nodes-then-best-fit", nodes(*(node(f"n{i}")
                                                                       for i in range(4))),
             gang(role("w", 10, gpu=1)), (busy("a", {"n0": 5, "n1": 1, "n3": 6}),),
             expect={"n2": 8, "n3": 2}),
]


def _run(sc: Scenario) -> Placement | Unplaceable:
    return solve(sc.gang, Snapshot(sc.nodes, sc.running, sc.other), sc.params)


@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_scenario(sc: Scenario) -> None:
    result = _run(sc)
    if sc.reason is not None:
        assert isinstance(result, Unplaceable), result
        assert result.reason is sc.reason, result.message
        assert sc.message in result.message
        assert result.preemption_may_help is (sc.reason in (R.INSUFFICIENT_CAPACITY, R.TOPOLOGY))
        return
    assert isinstance(result, Placement), result
    if sc.expect is not None:
        per_node: dict[str, int] = {}
        for a in result.assignments:
            per_node[a.node] = per_node.get(a.node, 0) + a.count
        assert per_node == {n: c for n, c in sc.expect.items() if c}
    if sc.by_role is not None:
        assert {(a.role, a.node): a.count for a in result.assignments} == sc.by_role
    if sc.solved_by is not None:
        assert result.solved_by == sc.solved_by
    if sc.domains_used is not None:
        assert result.domains_used == sc.domains_used
    assert list(result.assignments) == sorted(result.assignments, key=lambda a: (a.role, a.node))


@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_a_yes_or_no_solve_gives_the_same_answer_without_its_reason(sc: Scenario) -> None:
    """``Question.WHETHER`` (the searches' proofs) changes whether a failure's reason is
    worked out, never whether or where the gang is placed: a failure comes back unexplained,
    or exactly as before where its reason costs nothing more."""
    quiet = replace(sc, params=sc.params.asking(Question.WHETHER))
    explained, unexplained = _run(sc), _run(quiet)
    if isinstance(explained, Placement):
        assert unexplained == explained
        return
    assert isinstance(unexplained, Unplaceable)
    if unexplained.reason is not R.UNEXPLAINED:
        assert unexplained == explained


@pytest.mark.parametrize("name", ["insufficient-names-holders", "required-rack-topology-reason"])
def test_a_yes_or_no_solve_skips_the_reason_of_what_is_free_now(name: str) -> None:
    sc = next(s for s in SCENARIOS if s.id == name)
    result = _run(replace(sc, params=sc.params.asking(Question.WHETHER)))
    assert isinstance(result, Unplaceable)
    assert (result.reason, result.message) == (R.UNEXPLAINED, "")
