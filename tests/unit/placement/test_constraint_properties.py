"""Properties of placement with pod-level constraints, on small random clusters.

* Never violates a required constraint: every placement can be bound one member at a time
  with each bind passing an independent reading of kube-scheduler's filters
  (``kube_reference``), and fits the free resources.
* Greedy and CP-SAT agree on feasibility where both answer: CP-SAT never proves infeasible
  what the greedy pass placed, and what CP-SAT places passes the same checks.
* Complete with respect to its rules: when some assignment meets every rule (found by
  brute force over tiny instances), ``solve`` finds a placement.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.model import Gang, Node, PodRequirements, Role
from scheduler.model.constraints import (
    HostPort,
    PodAffinityTerm,
    PodConstraints,
    SpreadConstraint,
    Unsatisfiable,
)
from scheduler.model.labels import Labels, LabelSelector
from scheduler.model.resources import Resources
from scheduler.placement import Placement, PlacementParams, Unplaceable, UnplaceableReason, solve
from scheduler.placement.candidates import candidates
from scheduler.placement.cpsat import Budget, solve_counts
from scheduler.placement.eligibility import Problem, prepare
from scheduler.placement.rules import check_all
from scheduler.world.occupancy import Occupant
from scheduler.world.snapshot import Snapshot
from tests.unit.placement.builders import HOST, node
from tests.unit.placement.kube_reference import Pod, sequence

ZONE = "topology.kubernetes.io/zone"
NS = "ns"
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Instance:
    nodes: tuple[Node, ...]
    running: tuple[Pod, ...]
    gang: Gang

    def snapshot(self) -> Snapshot:
        usage: dict[str, Resources] = {}
        for p in self.running:
            usage[p.node] = usage.get(p.node, Resources()) + p.requirements.effective_requests
        occupants = [Occupant(p.node, p.namespace, p.labels, 1, p.requirements.constraints)
                     for p in self.running]
        return Snapshot(self.nodes, (), usage, other_pods=occupants)


def _selector(app: str) -> LabelSelector:
    return LabelSelector.equals({"app": app})


@st.composite
def constraints(draw: st.DrawFn, allow_ports: bool = True) -> PodConstraints:
    anti: tuple[PodAffinityTerm, ...] = ()
    affinity: tuple[PodAffinityTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    if draw(st.booleans()):
        anti = (PodAffinityTerm(_selector(draw(st.sampled_from("xy"))),
                                draw(st.sampled_from((HOST, ZONE))), frozenset({NS})),)
    if draw(st.integers(0, 3)) == 0:
        # One or two terms; two keys (host and zone) on nodes some of which lack a zone
        # exercise which running pods count and the first-pod exception.
        affinity = tuple(PodAffinityTerm(_selector(draw(st.sampled_from("xy"))),
                                         draw(st.sampled_from((ZONE, HOST))), frozenset({NS}))
                         for _ in range(draw(st.integers(1, 2))))
    if draw(st.booleans()):
        spread = (SpreadConstraint(draw(st.integers(1, 2)), draw(st.sampled_from((ZONE, HOST))),
                                   Unsatisfiable.DO_NOT_SCHEDULE,
                                   _selector(draw(st.sampled_from("xy"))),
                                   min_domains=draw(st.integers(1, 3))),)
    ports = (HostPort(80),) if allow_ports and draw(st.integers(0, 3)) == 0 else ()
    return PodConstraints(affinity=affinity, anti_affinity=anti, spread=spread, host_ports=ports)


@st.composite
def instances(draw: st.DrawFn, max_nodes: int = 6, max_count: int = 3) -> Instance:
    n = draw(st.integers(2, max_nodes))
    nodes = []
    for i in range(n):
        zone = draw(st.sampled_from(("a", "b", "c", None)))
        labels = {ZONE: zone} if zone else {}
        if draw(st.integers(0, 3)):
            labels[HOST] = f"n{i}"
        nodes.append(node(f"n{i}", gpu=draw(st.sampled_from((2, 4, 8))), cpu=8, labels=labels))
    running = []
    for _ in range(draw(st.integers(0, 3))):
        c = draw(constraints(allow_ports=True))
        keep = PodConstraints(anti_affinity=c.anti_affinity, host_ports=c.host_ports)
        running.append(Pod(draw(st.sampled_from((NS, "other"))),
                           Labels({"app": draw(st.sampled_from("xyz"))}),
                           PodRequirements(Resources({"nvidia.com/gpu": 1}), constraints=keep),
                           node=f"n{draw(st.integers(0, n - 1))}"))
    roles = []
    for r in range(draw(st.integers(1, 2))):
        gpu = draw(st.sampled_from((0, 1, 2)))
        req = PodRequirements(Resources({"nvidia.com/gpu": gpu, "cpu": 1000}),
                              constraints=draw(constraints()))
        roles.append(Role(f"r{r}", draw(st.integers(1, max_count)), req,
                          labels=Labels({"app": draw(st.sampled_from("xy"))})))
    gang = Gang(id=f"{NS}/g", uid="g", namespace=NS, name="g", queue="q", roles=tuple(roles))
    return Instance(tuple(nodes), tuple(running), gang)


def _members(inst: Instance, assign: dict[tuple[str, str], int]) -> list[tuple[Pod, str]]:
    out = []
    for (role, n), count in sorted(assign.items()):
        r = inst.gang.role(role)
        out += [(Pod(NS, r.labels, r.requirements), n)] * count
    return out


def _sound(inst: Instance, snap: Snapshot, assign: dict[tuple[str, str], int]) -> bool:
    """Fits the free resources, and some binding order passes kube-scheduler's filters."""
    used: dict[str, Resources] = {}
    for (role, n), count in assign.items():
        used[n] = used.get(n, Resources()) + inst.gang.role(role).requests * count
    if not all(u.fits_in(snap.free(n)) for n, u in used.items()):
        return False
    members = _members(inst, assign)
    return sequence(members, {nd.name: nd for nd in inst.nodes}, inst.running, {}) is not None


def _assign(p: Placement) -> dict[tuple[str, str], int]:
    return {(a.role, a.node): a.count for a in p.assignments}


@SETTINGS
@given(instances())
def test_placements_never_violate_a_required_constraint(inst: Instance) -> None:
    snap = inst.snapshot()
    result = solve(inst.gang, snap)
    if isinstance(result, Placement):
        assert result.pods_placed() == sum(r.required for r in inst.gang.roles)
        assert _sound(inst, snap, _assign(result)), result


def _cpsat(problem: Problem) -> tuple[dict[tuple[str, str], int] | None, bool]:
    cands = candidates(problem)
    outcome = solve_counts(problem, cands, cands.nodes, Budget(20.0, 60.0))
    return outcome.assign, outcome.infeasible


@SETTINGS
@given(instances())
def test_greedy_and_cpsat_agree_on_feasibility(inst: Instance) -> None:
    snap = inst.snapshot()
    greedy = solve(inst.gang, snap, PlacementParams(use_cpsat=False))
    problem = prepare(inst.gang, snap, PlacementParams())
    if isinstance(problem, Unplaceable):
        assert not isinstance(greedy, Placement)
        return
    assign, infeasible = _cpsat(problem)
    if isinstance(greedy, Placement):
        assert not infeasible, greedy
    if assign is not None:
        assert check_all(problem.terms.rules, assign) is None
        assert _sound(inst, snap, assign), assign


def _valid_under_rules(problem: Problem, assign: dict[tuple[str, str], int]) -> bool:
    views = {rv.name: rv for rv in problem.roles}
    snap = problem.snapshot
    used: dict[str, Resources] = {}
    for (role, n), count in assign.items():
        rv = views[role]
        if n not in rv.nodes or (rv.limits.cap and count > rv.limits.cap):
            return False
        used[n] = used.get(n, Resources()) + rv.request * count
    return (all(u.fits_in(snap.free(n)) for n, u in used.items())
            and check_all(problem.terms.rules, assign) is None)


def _every_assignment(problem: Problem) -> Iterator[dict[tuple[str, str], int]]:
    per_role = []
    for rv in problem.roles:
        splits = [c for c in itertools.product(range(rv.required + 1), repeat=len(rv.nodes))
                  if sum(c) == rv.required]
        per_role.append([{(rv.name, n): k for n, k in zip(rv.nodes, c, strict=True) if k}
                         for c in splits])
    for combo in itertools.product(*per_role):
        out: dict[tuple[str, str], int] = {}
        for part in combo:
            out.update(part)
        yield out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_nodes=4, max_count=2))
def test_solve_finds_a_placement_whenever_one_meets_the_rules(inst: Instance) -> None:
    snap = inst.snapshot()
    problem = prepare(inst.gang, snap, PlacementParams())
    result = solve(inst.gang, snap)
    if isinstance(problem, Unplaceable):
        assert isinstance(result, Unplaceable)
        return
    exists = any(_valid_under_rules(problem, a) for a in _every_assignment(problem))
    if exists:
        assert isinstance(result, Placement) or result.reason is UnplaceableReason.SOLVER_LIMIT, \
            result
