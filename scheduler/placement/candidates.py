"""Free capacity of the usable nodes, per role and per topology domain.

Every stage after eligibility reasons in "how many pods of this role fit on that node"
(``copies_in`` of the per-pod request in the node's free resources) rather than in raw
resources: it is exact for one role, a sound upper bound for several, and it keeps the
CP-SAT model to one integer per (role, node). Nodes where not even one pod fits are dropped
here, which is what keeps both the greedy passes and the CP-SAT model small.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.model.resources import CPU, EMPTY, GPU, Resources
from scheduler.placement.eligibility import Problem
from scheduler.placement.index import free_index
from scheduler.world.topology import Topology


@dataclass(frozen=True, slots=True)
class Candidates:
    """Per role: node -> pods that fit in its free resources, capped at the role's required."""

    caps: Mapping[str, Mapping[str, int]]
    nodes: tuple[str, ...]  # the union over roles, sorted
    members: frozenset[str]  # the same, for membership tests
    #: Node -> its free resources, read once here: the later stages sum them per domain
    #: and level, and a plain map is several times cheaper than asking the snapshot.
    free: Mapping[str, Resources]


def primary_resource(problem: Problem) -> str:
    """The resource reasons and tie-breaks talk about: GPUs if the gang uses any, else cpu."""
    return GPU if any(rv.gpus for rv in problem.roles) else CPU


def candidates(problem: Problem) -> Candidates:
    """Usable nodes with room for at least one pod, per role, from the free-GPU index.

    The loop runs once per role and eligible node with enough free GPUs (hundreds of
    thousands of times a busy cycle): the free map's own ``get`` is bound once (one frame
    per node, not ``Snapshot.free``'s two), and the copies each node takes are worked out
    inline."""
    snapshot = problem.snapshot
    free = snapshot.free_by_node.get
    caps: dict[str, dict[str, int]] = {}
    union: set[str] = set()
    seen: dict[str, Resources] = {}
    for rv in problem.roles:
        found: dict[str, int] = {}
        caps[rv.name] = found
        k = rv.required
        if k == 0:
            continue
        index = free_index(snapshot, rv.key, rv.eligible)
        request, filtered, usable = rv.request, problem.filtered, problem.usable
        blocked, cap = rv.limits.blocked, rv.limits.cap
        # Only integer GPUs filter here: a node short of devices is the device rule's to
        # explain (filtered out here, it read as a CPU shortage); devices only order nodes.
        for name in index.ascending(rv.gpus):
            if (filtered and not usable(name)) or (blocked and name in blocked):
                continue
            have = seen.get(name)
            if have is None:
                have = seen[name] = free(name, EMPTY)
            n = request.copies_in(have)
            if cap and n > cap:
                n = cap
            if n:
                found[name] = n if n < k else k
        union.update(found)
    return Candidates(caps, tuple(sorted(union)), frozenset(union),
                      {n: seen[n] for n in union})


@dataclass(frozen=True, slots=True)
class DomainLoad:
    """What one domain offers the gang: pods per role (in ``problem.roles`` order) and free."""

    name: str
    pods: tuple[int, ...]
    free: Resources  # summed over the domain's candidate nodes
    primary_free: int

    def may_fit(self, problem: Problem) -> bool:
        """A necessary condition (exact for one role): enough pods per role and resources."""
        if any(p < rv.required for p, rv in zip(self.pods, problem.roles, strict=True)):
            return False
        return len(problem.roles) == 1 or problem.required_total.fits_in(self.free)


def domain_loads(
    problem: Problem, cands: Candidates, topology: Topology, level: str,
    scope: Collection[str] | None = None,
) -> list[DomainLoad]:
    """Loads of the domains at *level* over the candidate nodes in *scope*, sorted by name.

    Only the resources a load is read for are summed: the primary one, and for a gang of
    several roles those its required members ask for (``DomainLoad.may_fit``); with
    thousands of nodes per call, summing every kind of every node was most of a solve."""
    primary = primary_resource(problem)
    free = cands.free
    roles = problem.roles
    kinds = [primary]
    if len(roles) > 1:
        kinds += [k for k, v in problem.required_total.items() if v > 0 and k != primary]
    caps = [cands.caps[rv.name] for rv in roles]
    width = len(roles)
    pods: dict[str, list[int]] = {}
    totals: dict[str, list[int]] = {}
    domain_at = topology.domain_at(level)
    for name in _in_scope(cands, scope):
        dom = domain_at[name]
        per = pods.get(dom)
        if per is None:
            per = pods[dom] = [0] * width
            acc = totals[dom] = [0] * len(kinds)
        else:
            acc = totals[dom]
        for i, cap in enumerate(caps):
            per[i] += cap.get(name, 0)
        have = free[name]
        for j, k in enumerate(kinds):
            v = have.get(k, 0)
            if v > 0:
                acc[j] += v
    return [DomainLoad(d, tuple(pods[d]), Resources(zip(kinds, totals[d], strict=True)),
                       totals[d][0])
            for d in sorted(pods)]


def ranks(
    problem: Problem, cands: Candidates, topology: Topology, levels: Sequence[str],
    scope: Collection[str] | None,
) -> dict[str, tuple[int, ...]]:
    """Per node, the rank of its domain at each of *levels* by free capacity (largest first).

    Filling nodes in this order puts a gang that needs several domains into as few as
    possible, and within a domain into as few inner domains as possible.
    """
    out: dict[str, list[int]] = {}
    for level in levels:
        loads = domain_loads(problem, cands, topology, level, scope)
        order = {ld.name: i for i, ld in enumerate(sorted(loads, key=_largest_first))}
        domain_at = topology.domain_at(level)
        for name in _in_scope(cands, scope):
            out.setdefault(name, []).append(order[domain_at[name]])
    return {n: tuple(r) for n, r in out.items()}


def _in_scope(cands: Candidates, scope: Collection[str] | None) -> Iterable[str]:
    """Candidate nodes within *scope*, sorted; iterates whichever of the two is smaller."""
    if scope is None:
        return cands.nodes
    if len(scope) < len(cands.nodes):
        return sorted(n for n in scope if n in cands.members)
    return [n for n in cands.nodes if n in scope]


def _largest_first(load: DomainLoad) -> tuple[int, int, str]:
    # Members a domain can take, not raw free GPUs: 7 free GPUs fit one 4-GPU pod, not two.
    return (-sum(load.pods), -load.primary_free, load.name)
