"""Why a gang does not fit, in words a person can act on, and whether preemption could help.

The split that matters to callers: checked against *allocatable* (an empty cluster), a gang
that still does not fit ``NEVER_FITS`` and no preemption will help; checked against *free*,
it is ``INSUFFICIENT_CAPACITY`` (or ``TOPOLOGY`` when the capacity exists but not inside one
required domain) and the message says how much is allocated to running gangs. These functions run
only once a solve has failed, so they may scan the eligible nodes; nothing here is on the
path of a successful placement.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from scheduler.model import HOSTNAME_LABEL
from scheduler.model.resources import (
    CPU,
    GPU,
    Resources,
    format_amount,
    total,
)
from scheduler.placement.allocatable import alloc_view, domain_view, free_sum
from scheduler.placement.candidates import Candidates, DomainLoad, primary_resource
from scheduler.placement.eligibility import Problem, RoleView
from scheduler.placement.types import Question, Unplaceable, UnplaceableReason
from scheduler.world.topology import Topology


def level_name(level: str) -> str:
    """``topology.gangscheduler.io/rack`` -> ``rack``; the host level is ``node``."""
    return "node" if level == HOSTNAME_LABEL else level.rsplit("/", 1)[-1]


def describe_need(problem: Problem) -> str:
    """``64 × 8 nvidia.com/gpu``; per role when several: ``1 × 4 cpu (launcher) + ...``."""
    parts = []
    active = [rv for rv in problem.roles if rv.required]
    for rv in sorted(active, key=lambda r: r.name):
        res = GPU if rv.gpus else CPU
        text = f"{rv.required} × {format_amount(res, rv.request.get(res, 0))} {res}"
        parts.append(text if len(active) == 1 else f"{text} ({rv.name})")
    return " + ".join(parts)


def _allocated_to_gangs(problem: Problem, nodes: Iterable[str], resource: str) -> int:
    scope = set(nodes)
    return sum(res.get(resource, 0) for rg in problem.snapshot.running.values()
               for name, res in rg.allocations if name in scope)


def _resources_first_gpu(need: Resources) -> list[str]:
    return sorted(need, key=lambda k: (k != GPU, k))


def _n_pods(n: int) -> str:
    return f"{n} pod" if n == 1 else f"{n} pods"


def _fail(problem: Problem, reason: UnplaceableReason, message: str) -> Unplaceable:
    return Unplaceable(problem.gang.id, reason, message)


def is_short(problem: Problem, cands: Candidates) -> bool:
    """Is the free capacity of the candidate nodes too small in total for the gang?"""
    if any(sum(cands.caps[rv.name].values()) < rv.required for rv in problem.roles):
        return True
    if len(problem.roles) > 1:
        return not problem.required_total.fits_in(total(cands.free[n] for n in cands.nodes))
    return False


def unexplained(problem: Problem) -> Unplaceable:
    """A failure whose reason was not asked for (``Question.WHETHER``)."""
    return _fail(problem, UnplaceableReason.UNEXPLAINED, "")


def capacity_shortfall(problem: Problem, cands: Candidates) -> Unplaceable | None:
    """``None`` when the free capacity suffices in total; else why not (never vs not now)."""
    if not is_short(problem, cands):
        return None
    if problem.params.question is Question.WHETHER:
        return unexplained(problem)
    need = problem.required_total
    static = alloc_view(problem)
    for res in _resources_first_gpu(need):
        if static.totals.get(res, 0) < need[res]:
            return _fail(problem, UnplaceableReason.NEVER_FITS,
                         f"needs {format_amount(res, need[res])} {res} in total; "
                         f"{format_amount(res, static.totals.get(res, 0))} are allocatable on "
                         f"eligible nodes (never fits)")
    for rv, fit in zip(problem.roles, static.pods, strict=True):
        if rv.limits.cap and rv.required and fit < rv.required:
            return _fail(problem, UnplaceableReason.NEVER_FITS,
                         f"{_capped(rv, _fitting_one(problem, rv, rv.open))} eligible (never fits)")
        if fit == 0 and rv.required:
            return _fail(problem, UnplaceableReason.NEVER_FITS,
                         f"role {rv.name}: one pod needs {rv.request_text}; no eligible node "
                         f"has that much allocatable (never fits)")
        if fit < rv.required:
            return _fail(problem, UnplaceableReason.NEVER_FITS,
                         f"role {rv.name}: needs {_n_pods(rv.required)} of "
                         f"{rv.request_text}; eligible nodes hold at most {fit} "
                         f"even when empty (never fits)")
    for res in _resources_first_gpu(need):
        have = free_sum(problem, static.union, res)
        if have < need[res]:
            allocated = _allocated_to_gangs(problem, static.union, res)
            other = static.totals.get(res, 0) - have - allocated
            tail = f", {format_amount(res, other)} by other pods" if other > 0 else ""
            return _fail(problem, UnplaceableReason.INSUFFICIENT_CAPACITY,
                         f"needs {format_amount(res, need[res])} {res}; "
                         f"{format_amount(res, have)} free on eligible nodes "
                         f"({format_amount(res, allocated)} held by running gangs{tail})")
    primary = primary_resource(problem)
    for rv in problem.roles:
        fit = sum(cands.caps[rv.name].values())
        if fit < rv.required and rv.limits.cap:
            return _fail(problem, _constrained(rv),
                         f"{_capped(rv, len(cands.caps[rv.name]))} match{_ruled(rv)}")
        if fit < rv.required:
            have = free_sum(problem, static.union, primary)
            return _fail(problem, UnplaceableReason.INSUFFICIENT_CAPACITY,
                         f"role {rv.name}: needs {_n_pods(rv.required)} of {rv.request_text}; "
                         f"free capacity on eligible nodes holds only {fit} "
                         f"({format_amount(primary, have)} {primary} free"
                         f"{'' if rv.limits.blocked else ', in pieces too small'}){_ruled(rv)}")
    return packing_failure(problem, within="")


def _fitting_one(problem: Problem, rv: RoleView, nodes: Iterable[str]) -> int:
    allocatable = problem.snapshot.nodes
    return sum(1 for n in nodes if rv.request.copies_in(allocatable[n].allocatable))


def _capped(rv: RoleView, nodes: int) -> str:
    """``role worker: anti-affinity app=trainer per kubernetes.io/hostname: 8 members need
    8 nodes, 5`` (the caller says of what)."""
    cap = rv.limits.cap
    need = -(-rv.required // cap)
    return (f"role {rv.name}: {rv.limits.cap_why}: {rv.required} members need {need} "
            f"node{'s' if need > 1 else ''}, {nodes}")


def _ruled(rv: RoleView) -> str:
    """``; 3 more nodes are ruled out: 2 by ...`` when constraints rule some out."""
    why = rv.limits.why
    if not why:
        return ""
    parts = "; ".join(f"{n} by {text}" for text, n in why)
    return f" ({len(rv.limits.blocked & set(rv.open))} eligible nodes are ruled out: {parts})"


def _constrained(rv: RoleView) -> UnplaceableReason:
    """Running pods are in the way (preemption may help), or only capacity is."""
    return (UnplaceableReason.POD_CONSTRAINTS if rv.limits.by_running
            else UnplaceableReason.INSUFFICIENT_CAPACITY)


def constraint_failure(problem: Problem, within: str = "") -> Unplaceable:
    """Capacity suffices, but no placement meets the rules coupling the members."""
    rules = "; ".join(r.describe() for r in problem.terms.rules)
    where = f" within any one {within}" if within else " on the free capacity of eligible nodes"
    reason = (UnplaceableReason.POD_CONSTRAINTS
              if any(rv.limits.by_running for rv in problem.roles)
              else UnplaceableReason.INSUFFICIENT_CAPACITY)
    return _fail(problem, reason,
                 f"needs {describe_need(problem)}; no placement{where} meets the members' "
                 f"constraints ({rules})")


def packing_failure(problem: Problem, within: str) -> Unplaceable:
    """Each role fits on its own but not all of them together (proven by CP-SAT)."""
    reason = UnplaceableReason.TOPOLOGY if within else UnplaceableReason.INSUFFICIENT_CAPACITY
    names = ", ".join(sorted(rv.name for rv in problem.roles if rv.required))
    where = f" within any one {within}" if within else " on the free capacity of eligible nodes"
    return _fail(problem, reason,
                 f"needs {describe_need(problem)}; roles {names} do not fit together{where}")


def topology_shortfall(
    problem: Problem, topology: Topology, level: str, loads: Sequence[DomainLoad],
) -> Unplaceable:
    """No domain of *level* can take the gang: never (allocatable) or not now (free)."""
    if problem.params.question is Question.WHETHER:
        return unexplained(problem)
    name = level_name(level)
    primary = primary_resource(problem)
    static = domain_view(problem, topology, level, primary)
    if not static.any_fits:
        return _fail(problem, UnplaceableReason.NEVER_FITS,
                     f"needs {describe_need(problem)} within one {level}; the largest {name} "
                     f"has {format_amount(primary, static.largest)} {primary} allocatable "
                     f"(never fits)")
    usable = set(alloc_view(problem).union)
    best_free = max((free_sum(problem, (n for n in members if n in usable), primary)
                     for members in topology.domains(level).values()), default=0)
    best_free = max([best_free, *(ld.primary_free for ld in loads)])
    return _fail(problem, UnplaceableReason.TOPOLOGY,
                 f"needs {describe_need(problem)} within one {level}; the largest {name} has "
                 f"{format_amount(primary, best_free)} {primary} free")
