"""What the eligible nodes could offer if nothing ran on them: the "never fits" side.

Deciding ``NEVER_FITS`` (preemption cannot help) against ``INSUFFICIENT_CAPACITY`` needs
totals over allocatable, which do not change within a snapshot family. Unplaceable gangs
are the common case in a busy cluster (every pending gang is retried every cycle), so
these totals are computed once per (roles, node filter) and kept in the snapshot's
``NodeIndex`` (``capacity``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from scheduler.kit.memo import Slot
from scheduler.model.resources import Resources, total
from scheduler.placement.eligibility import Problem
from scheduler.world.topology import Topology

#: Roles and node filter -> totals over allocatable (kept in the node index).
CAPACITY: Slot[tuple[object, ...], AllocView | DomainView] = Slot("allocatable.capacity")

View = TypeVar("View", "AllocView", "DomainView")


@dataclass(frozen=True, slots=True)
class AllocView:
    """Totals over the nodes any required role may use, as if they were empty."""

    union: tuple[str, ...]  # sorted
    totals: Resources
    pods: tuple[int, ...]  # per ``problem.roles``: pods that fit, capped at the required count


@dataclass(frozen=True, slots=True)
class DomainView:
    """Whether some domain of a level could take the gang when empty, and the biggest one."""

    any_fits: bool
    largest: int  # allocatable of the primary resource in the largest domain


def _key(problem: Problem, *extra: object) -> tuple[object, ...]:
    roles = tuple((rv.key, rv.request, rv.required, rv.limits.cap) for rv in problem.roles)
    return (roles, problem.params.excluded_nodes, problem.params.allowed_nodes, *extra)


def _cached(problem: Problem, key: tuple[object, ...], kind: type[View],
            build: Callable[[], View]) -> View:
    slots = problem.snapshot.index.slots
    hit = slots.table(CAPACITY).get(key)
    if not isinstance(hit, kind):
        hit = build()
        slots.put(CAPACITY, key, hit)
    return hit


def pods_in(request: Resources, required: int, capacities: Iterable[Resources],
            cap: int = 0) -> int:
    """Pods of *request* the capacities fit, counting at most *required* (and at most
    *cap* per node when the role's constraints cap it)."""
    per = min(required, cap) if cap else required
    return sum(min(request.copies_in(c), per) for c in capacities)


def alloc_view(problem: Problem) -> AllocView:
    def build() -> AllocView:
        nodes = problem.snapshot.nodes
        union = tuple(sorted({n for rv in problem.roles if rv.required for n in rv.open}))
        return AllocView(
            union, total(nodes[n].allocatable for n in union),
            tuple(pods_in(rv.request, rv.required, (nodes[n].allocatable for n in rv.open),
                          rv.limits.cap)
                  for rv in problem.roles))
    return _cached(problem, _key(problem), AllocView, build)


def domain_view(problem: Problem, topology: Topology, level: str, primary: str) -> DomainView:
    def build() -> DomainView:
        nodes = problem.snapshot.nodes
        usable = set(alloc_view(problem).union)
        per_role = [(rv, frozenset(rv.open)) for rv in problem.roles if rv.required]
        need = problem.required_total
        largest, fits = 0, False
        for members in topology.domains(level).values():
            allocs = [nodes[n].allocatable for n in members if n in usable]
            largest = max(largest, sum(a.get(primary, 0) for a in allocs))
            fits = fits or (
                all(sum(a.get(k, 0) for a in allocs) >= v for k, v in need.items())
                and all(pods_in(rv.request, rv.required,
                                (nodes[n].allocatable for n in members if n in allowed),
                                rv.limits.cap)
                        >= rv.required for rv, allowed in per_role))
        return DomainView(fits, largest)
    return _cached(problem, _key(problem, level, primary), DomainView, build)


def free_sum(problem: Problem, names: Iterable[str], resource: str) -> int:
    """Free *resource* over *names* (negative free, i.e. overcommit, counts as zero)."""
    free = problem.snapshot.free_by_node
    return sum(max(free[n].get(resource, 0), 0) for n in names)
