"""``solve``: all members of a gang on nodes, or none and a reason.

The stages, cheapest first, each skipped when an earlier one answers:

1. eligibility per role (cached per requirements) -> ``NO_ELIGIBLE_NODES``; the gang's
   pod-level constraints compiled (``terms``): nodes they rule out, per-node caps, rules
   coupling members, preferences -> ``UNSUPPORTED`` / ``VOLUMES`` / ``POD_CONSTRAINTS``;
2. the whole gang on one best-fit node, through the free-GPU index (the common case;
   skipped when rules couple the members or preferences order the nodes);
3. candidate nodes with room per role, and totals against free and allocatable
   -> ``NEVER_FITS`` / ``INSUFFICIENT_CAPACITY``;
4. a required topology: candidate domains that could take the gang, tightest first
   -> ``TOPOLOGY`` / ``NEVER_FITS`` when none; greedy in each, then CP-SAT in each;
5. otherwise greedy over the tightest domain that fits the gang, CP-SAT when greedy fails
   or, under a preferred topology, spreads over more domains than needed;
6. members beyond the required ones, as capacity allows (an elastic gang first tries to
   place every member at once, greedy only, so that all of them land close together).

Gangs whose members are coupled by rules, or that prefer nodes, are placed by the
constructive pass (``constrained``) wherever the packing greedy would run; CP-SAT encodes
the same rules. Every result is checked against the rules before it is returned, and
carries the decisions for the gang's unbound claims and its device claims' allocations.

CP-SAT answering "unknown" within its limits gives ``SOLVER_LIMIT``; there is never a
partial placement.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from scheduler.model import Gang, TopologyMode
from scheduler.model.prebind import PreBind
from scheduler.placement import constrained, greedy, reasons
from scheduler.placement.candidates import Candidates, candidates, domain_loads
from scheduler.placement.cpsat import Budget, solve_counts
from scheduler.placement.device_outcome import DeviceMisfit
from scheduler.placement.diagnose import rule_shortfall
from scheduler.placement.eligibility import Problem, prepare
from scheduler.placement.greedy import Assign
from scheduler.placement.never_placeable import unknown_level
from scheduler.placement.rules import check_all
from scheduler.placement.types import (
    Assignment,
    Placement,
    PlacementParams,
    PlacementResult,
    Unplaceable,
    UnplaceableReason,
)
from scheduler.world.snapshot import Snapshot
from scheduler.world.topology import Topology

#: Domains greedy tries under a required topology before CP-SAT takes over.
GREEDY_DOMAINS = 16

_DEFAULT_PARAMS = PlacementParams()


def solve(gang: Gang, snapshot: Snapshot, params: PlacementParams = _DEFAULT_PARAMS,
          ) -> PlacementResult:
    """Place every required member of *gang* on *snapshot*, or explain why not."""
    problem = prepare(gang, snapshot, params)
    if isinstance(problem, Unplaceable):
        return problem
    constraint = gang.topology
    if constraint is not None and not snapshot.topology.has_level(constraint.level):
        return unknown_level(gang, snapshot, constraint.level)
    if any(rv.optional for rv in problem.roles):
        whole = _whole_gang(gang, snapshot, params)
        if whole is not None:
            return whole
    required = constraint is not None and constraint.mode is TopologyMode.REQUIRED
    if not any(rv.required for rv in problem.roles):
        return _finish(problem, {}, "greedy", _largest_domain(problem) if required else None)
    fast = None if problem.coupled and not problem.packs else greedy.single_node(problem)
    if fast is not None and problem.coupled and _broken(problem, fast) is not None:
        fast = None
    if fast is not None:
        scope = None
        if required and constraint is not None:
            node = next(iter(fast))[1]
            topology = snapshot.topology
            scope = topology.domains(constraint.level)[topology.domain_of(node, constraint.level)]
        return _finish(problem, fast, "greedy", scope)
    cands = candidates(problem)
    short = reasons.capacity_shortfall(problem, cands)
    if short is None and problem.terms.rules:
        short = rule_shortfall(problem, cands)
    if short is not None:
        return short
    if required and constraint is not None:
        return _solve_required(problem, cands, constraint.level)
    topology = snapshot.topology
    assign = _greedy(problem, cands, topology, topology.levels[:-1])
    budget = Budget(params.cpsat_deterministic_limit, params.cpsat_time_limit)
    if assign is None:
        if not params.use_cpsat or budget.exhausted:
            why = "is disabled" if not params.use_cpsat else "has no time budget"
            return _limit(problem, f"greedy found no packing and CP-SAT {why}")
        outcome = solve_counts(problem, cands, cands.nodes, budget)
        if outcome.assign is None:
            if outcome.infeasible:
                return _infeasible(problem, within="")
            return _limit(problem, "CP-SAT found no placement within its limits")
        return _finish(problem, outcome.assign, "cpsat", None)
    if constraint is not None and params.use_cpsat:
        better = _fewer_domains(problem, cands, topology, constraint.level, assign, budget)
        if better is not None:
            return _finish(problem, better, "cpsat", None)
    return _finish(problem, assign, "greedy", None)


def _whole_gang(gang: Gang, snapshot: Snapshot, params: PlacementParams) -> Placement | None:
    """All members of an elastic gang, where they fit together (greedy only), if anywhere.

    Choosing a node or domain for the required members alone and adding the others
    afterwards would scatter them when a domain exists that fits every member.
    """
    full = replace(gang, roles=tuple(replace(r, min_count=None) for r in gang.roles))
    result = solve(full, snapshot, replace(params, use_cpsat=False))
    return result if isinstance(result, Placement) else None


def _solve_required(problem: Problem, cands: Candidates, level: str) -> PlacementResult:
    """Tightest domain of *level* that fits the gang: greedy in each, then CP-SAT in each."""
    params = problem.params
    topology = problem.snapshot.topology
    loads = domain_loads(problem, cands, topology, level)
    fitting = sorted((ld for ld in loads if ld.may_fit(problem)),
                     key=lambda ld: (ld.primary_free, ld.name))
    if not fitting:
        return reasons.topology_shortfall(problem, topology, level, loads)
    domains = topology.domains(level)
    inner = topology.levels[topology.level_index(level) + 1:-1]
    for load in fitting[:GREEDY_DOMAINS]:
        scope = domains[load.name]
        assign = _greedy(problem, cands, topology, inner, frozenset(scope))
        if assign is not None:
            return _finish(problem, assign, "greedy", scope)
    if not params.use_cpsat:
        return _limit(problem, f"greedy found no packing in {min(len(fitting), GREEDY_DOMAINS)} "
                               f"candidate {reasons.level_name(level)}s and CP-SAT is disabled")
    budget = Budget(params.cpsat_deterministic_limit, params.cpsat_time_limit)
    undecided = 0
    tried = 0
    for load in fitting[:max(params.cpsat_max_domains, 1)]:
        if budget.exhausted:
            break
        tried += 1
        nodes = [n for n in domains[load.name] if n in cands.members]
        outcome = solve_counts(problem, cands, nodes, budget)
        budget = outcome.budget
        if outcome.assign is not None:
            return _finish(problem, outcome.assign, "cpsat", domains[load.name])
        undecided += not outcome.infeasible
    if undecided or tried < len(fitting):
        return _limit(problem, f"no placement proven within one {level}: CP-SAT decided "
                               f"{tried - undecided} of {len(fitting)} candidate "
                               f"{reasons.level_name(level)}s within its limits")
    return _infeasible(problem, within=level)


def _greedy(problem: Problem, cands: Candidates, topology: Topology, levels: tuple[str, ...],
            scope: frozenset[str] | None = None) -> Assign | None:
    """The packing greedy, or the constructive pass when members are coupled (unless only
    their device claims couple them and the packing meets them: ``Problem.packs``)."""
    if problem.coupled:
        if problem.packs:
            assign = greedy.place(problem, cands, topology, levels, scope)
            if assign is not None and _broken(problem, assign) is None:
                return assign
        return constrained.place(problem, cands, topology, levels, scope)
    return greedy.place(problem, cands, topology, levels, scope)


def _infeasible(problem: Problem, within: str) -> Unplaceable:
    """CP-SAT proved no placement: the rules, when there are any, are what is in the way."""
    if problem.terms.rules:
        return reasons.constraint_failure(problem, within)
    return reasons.packing_failure(problem, within=within)


def _fewer_domains(problem: Problem, cands: Candidates, topology: Topology, level: str,
                   assign: Assign, budget: Budget) -> Assign | None:
    """A CP-SAT placement over fewer domains of *level* than greedy's, if one exists."""
    depth = topology.level_index(level)
    used = {topology.path(n)[depth] for _, n in assign}
    loads = domain_loads(problem, cands, topology, level)
    bound = 1
    for i, rv in enumerate(problem.roles):
        if rv.required:
            sizes = sorted((ld.pods[i] for ld in loads), reverse=True)
            acc, m = 0, 0
            while acc < rv.required and m < len(sizes):
                acc, m = acc + sizes[m], m + 1
            bound = max(bound, m)
    if len(used) <= bound:
        return None
    ranked = sorted(loads, key=lambda ld: (-ld.primary_free, ld.name))
    keep = used | {ld.name for ld in ranked[:2 * len(used)]}
    nodes = [n for n in cands.nodes if topology.path(n)[depth] in keep]
    domain_of = {n: topology.path(n)[depth] for n in nodes}
    outcome = solve_counts(problem, cands, nodes, budget, domain_of=domain_of, hint=assign)
    if outcome.assign is None:
        return None
    if len({domain_of[n] for _, n in outcome.assign}) >= len(used):
        return None
    return outcome.assign


def _largest_domain(problem: Problem) -> tuple[str, ...] | None:
    """Scope for a required topology when no member is required: the roomiest domain."""
    constraint = problem.gang.topology
    assert constraint is not None
    topology = problem.snapshot.topology
    free_gpus = problem.snapshot.free_gpus
    best: tuple[int, str] | None = None
    for name, members in topology.domains(constraint.level).items():
        room = sum(free_gpus(n) for n in members)
        if best is None or (-room, name) < best:
            best = (-room, name)
    return topology.domains(constraint.level)[best[1]] if best else None


def _limit(problem: Problem, message: str) -> Unplaceable:
    return Unplaceable(problem.gang.id, UnplaceableReason.SOLVER_LIMIT, message)


def _finish(problem: Problem, assign: Assign, solved_by: str,
            scope: Collection[str] | None) -> Placement | Unplaceable:
    """Add the optional members, check the constraints, decide the claims, then freeze the
    result (sorted, counts > 0)."""
    snapshot = problem.snapshot
    terms = problem.terms
    if any(rv.optional for rv in problem.roles):
        within = frozenset(scope) if scope is not None else None
        assign = (constrained.add_optional(problem, assign, within) if problem.coupled
                  else greedy.add_optional(problem, assign, snapshot.topology, within))
    prebinds: tuple[PreBind, ...] = ()
    first = False
    if terms.devices is not None:
        decided_devices = terms.devices.decide(assign)
        if isinstance(decided_devices, DeviceMisfit):
            return Unplaceable(problem.gang.id, UnplaceableReason.DEVICES,
                               f"no devices for every member: {decided_devices.describe()}")
        prebinds = decided_devices
    if terms.active:
        broken = _broken(problem, assign)
        if broken is not None:
            return Unplaceable(problem.gang.id, UnplaceableReason.POD_CONSTRAINTS,
                               f"no placement found that meets the constraints ({broken})")
        if terms.claims is not None:
            decided = terms.claims.decide(assign)
            if decided is None:
                return Unplaceable(problem.gang.id, UnplaceableReason.VOLUMES,
                                   "no PV or provisioning reaches every member's node")
            first = terms.claims.provision_first(assign, decided)
            prebinds = tuple(sorted(prebinds + decided))
    constraint = problem.gang.topology
    domains_used = 0
    if constraint is not None and assign:
        topology = snapshot.topology
        depth = topology.level_index(constraint.level)
        domains_used = len({topology.path(n)[depth] for _, n in assign})
    assignments = tuple(Assignment(role, node, count)
                        for (role, node), count in sorted(assign.items()) if count > 0)
    return Placement(problem.gang.id, assignments, solved_by, domains_used, prebinds, first)


def _broken(problem: Problem, assign: Assign) -> str | None:
    """The first constraint *assign* violates: a ruled-out node, a cap, or a rule."""
    views = {rv.name: rv for rv in problem.roles}
    for (role, node), count in sorted(assign.items()):
        rv = views[role]
        if count and not rv.allowed(node):
            return f"role {role} on ruled-out node {node}"
        if rv.limits.cap and count > rv.limits.cap:
            return f"role {role}: {count} members on {node}, {rv.limits.cap_why} allows " \
                   f"{rv.limits.cap}"
    return check_all(problem.terms.rules, assign)
