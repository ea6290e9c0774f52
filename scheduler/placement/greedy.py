"""The fast path: best-fit placement that keeps whole nodes and whole domains free.

Three rules, in order, carry most of the packing quality:

* a gang that fits on one node goes to the node with the fewest free GPUs that still fits
  it (best fit, found through the free-GPU index without scanning the cluster); under the
  ``fragmentation`` packing policy (``PlacementParams.fragmentation_mix``) to the fitting
  node where it adds the least expected fragmentation, best fit breaking ties;
* a gang that needs several nodes goes into the tightest domain that can take it, trying
  racks before blocks before the whole cluster, so large free domains stay whole;
* inside that scope a role takes the nodes that fit the most of its pods first (fewest
  nodes, whole nodes for whole-node pods) and puts the remainder on the best-fitting node,
  instead of spreading one or two GPUs over many nodes.

Roles go biggest pods first (first-fit decreasing). Greedy can fail on a tight multi-role
packing that has a solution; ``solve`` then asks CP-SAT. Ties are broken by node name.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from scheduler.model.demand import gpus_of
from scheduler.model.resources import CPU, MEMORY, Resources
from scheduler.placement.candidates import Candidates, domain_loads, ranks
from scheduler.placement.cpsat_fragmentation import node_state, taking
from scheduler.placement.eligibility import Problem
from scheduler.placement.gpu_shares import Mix, fragmentation_of
from scheduler.placement.index import free_index
from scheduler.world.topology import Topology

#: (role, node) -> pods.
Assign = dict[tuple[str, str], int]
FreeOf = Callable[[str], Resources]

_MIB = 1 << 20

#: Domains per level that greedy tries before moving outwards (it rarely fails on one that
#: passes the capacity check; only multi-role packings do).
MAX_TRIES = 8


def single_node(problem: Problem) -> Assign | None:
    """The best-fit node for all required members together, if one node fits them."""
    need = problem.required_total
    active = [rv for rv in problem.roles if rv.required]
    if not active:
        return None
    if len(active) == 1:
        rv = active[0]
        index = free_index(problem.snapshot, rv.key, rv.eligible)
    else:
        names = frozenset(active[0].eligible).intersection(*(rv.eligible for rv in active[1:]))
        index = free_index(problem.snapshot, frozenset(rv.key for rv in active), names)
    if any(rv.limits.cap and rv.required > rv.limits.cap for rv in active):
        return None  # capped below the gang's size on any one node
    free = problem.snapshot.free
    filtered, usable = problem.filtered, problem.usable
    limited = problem.terms.active
    fitting = (name for name in index.ascending(
        gpus_of(need) + sum(rv.devices * rv.required for rv in active))
        if need.fits_in(free(name)) and (not filtered or usable(name)) and (
            not limited or all(rv.allowed(name) for rv in active)))
    mix = problem.params.fragmentation_mix
    gpus = gpus_of(need)
    best = next(fitting, None) if mix is None or not gpus else _least_fragmenting(
        problem, fitting, mix, need, gpus)
    return None if best is None else {(rv.name, best): rv.required for rv in active}


def _least_fragmenting(problem: Problem, fitting: Iterable[str], mix: Mix, need: Resources,
                       gpus: int) -> str | None:
    """Of the *fitting* nodes (best fit first), the one where taking the gang's *gpus* adds
    the least expected fragmentation under *mix* (``cpsat_fragmentation.taking``, the rule
    CP-SAT's objective uses); best fit breaks ties. Every fitting node is weighed: the
    ``fragmentation`` packing policy trades that scan for the GPUs it keeps usable."""
    frag = fragmentation_of(mix)
    cpu, memory = need.get(CPU, 0), need.get(MEMORY, 0) / _MIB
    best: tuple[float, str] | None = None
    known: dict[tuple[int, int, tuple[int, ...], str], float] = {}  # per node state
    for name in fitting:
        before = node_state(problem, name)
        cost = known.get(before.key)
        if cost is None:
            # (``fits_in`` saw the GPUs free; the guard keeps ``taking``'s premise explicit)
            cost = known[before.key] = (taking(frag, before, gpus, cpu, memory)
                                        if len(before.gpus) >= gpus else 0.0)
        if best is None or cost < best[0]:
            best = (cost, name)
    return None if best is None else best[1]


def fill(
    problem: Problem, cands: Candidates, scope: Collection[str] | None,
    rank: Mapping[str, tuple[int, ...]],
) -> Assign | None:
    """Place every required member on candidate nodes in *scope*, or return None.

    Nodes are taken in *rank* order (domain preference), most pods first; once some node
    can take the rest of a role, the rest goes to the best-fitting such node, preferring
    domains the gang already uses.
    """
    snapshot = problem.snapshot
    free, free_gpus = snapshot.free, snapshot.free_gpus
    remaining: dict[str, Resources] = {}
    spent: dict[str, int] = {}  # GPUs (integer and device) this gang takes per node so far
    used_groups: set[tuple[int, ...]] = set()
    out: Assign = {}
    for rv in problem.roles:
        k = rv.required
        if k == 0:
            continue
        request, gpus = rv.request, rv.gpus + rv.devices
        entries: list[tuple[tuple[int, ...], int, int, str]] = []
        for name, c in cands.caps[rv.name].items():
            if scope is not None and name not in scope:
                continue
            left = remaining.get(name)
            have = free_gpus(name) - spent.get(name, 0)
            if left is not None:
                c = min(k, rv.cap(request.copies_in(left)))
                if rv.devices:
                    c = min(c, have // gpus)
                if c <= 0:
                    continue
            entries.append((rank.get(name, ()), -c, have - c * gpus, name))
        entries.sort()
        for i, (group, neg_c, _, name) in enumerate(entries):
            c = -neg_c
            if c >= k:
                group, name = _best_fit(entries, i, k, gpus, remaining, used_groups)
                c = k
            _take(out, remaining, rv.name, name, c, request, free)
            spent[name] = spent.get(name, 0) + c * gpus
            used_groups.add(group)
            k -= c
            if k == 0:
                break
        if k > 0:
            return None
    return out


def _best_fit(entries: Sequence[tuple[tuple[int, ...], int, int, str]], i: int, k: int,
              gpus: int, remaining: Mapping[str, Resources],
              used_groups: Collection[tuple[int, ...]]) -> tuple[tuple[int, ...], str]:
    """Among entries from *i* that fit *k* pods: a domain the gang uses, then the fewest
    GPUs left over, then a node the gang uses, then the name."""
    best: tuple[bool, int, bool, str, tuple[int, ...]] | None = None
    for group, neg_c, left_after_c, name in entries[i:]:
        if -neg_c < k:
            continue
        key = (group not in used_groups, left_after_c + (-neg_c - k) * gpus,
               name not in remaining, name, group)
        if best is None or key < best:
            best = key
    assert best is not None
    return best[4], best[3]


def _take(out: Assign, remaining: dict[str, Resources], role: str, node: str, count: int,
          request: Resources, free: FreeOf) -> None:
    left = remaining.get(node)
    if left is None:
        left = free(node)
    remaining[node] = left - request * count
    out[(role, node)] = out.get((role, node), 0) + count


def place(
    problem: Problem, cands: Candidates, topology: Topology, levels: Sequence[str],
    scope: Collection[str] | None = None,
) -> Assign | None:
    """Required members in the tightest domain that fits them, innermost level first.

    *levels* are the topology levels inside *scope* (outermost first, hosts excluded).
    When no single domain works the gang spreads over the scope, largest domains first.
    """
    for depth in range(len(levels) - 1, -1, -1):
        level = levels[depth]
        fitting = [ld for ld in domain_loads(problem, cands, topology, level, scope)
                   if ld.may_fit(problem)]
        fitting.sort(key=lambda ld: (ld.primary_free, ld.name))
        domains = topology.domains(level)
        for load in fitting[:MAX_TRIES]:
            nodes = frozenset(domains[load.name])
            inner = levels[depth + 1:]
            found = fill(problem, cands, nodes, ranks(problem, cands, topology, inner, nodes))
            if found is not None:
                return found
    return fill(problem, cands, scope, ranks(problem, cands, topology, levels, scope))


def add_optional(
    problem: Problem, assign: Assign, topology: Topology, scope: Collection[str] | None,
) -> Assign:
    """Add members beyond the required ones, as capacity allows, close to the others.

    Nodes the gang already uses come first, then nodes in racks (innermost domains) it
    already uses, then the rest by most room; within *scope* only (a required domain).
    """
    if not any(rv.optional for rv in problem.roles):
        return assign
    free = problem.snapshot.free
    out = dict(assign)
    remaining: dict[str, Resources] = {}
    for (role, node), count in sorted(out.items()):
        left = remaining.get(node, free(node))
        remaining[node] = left - problem.gang.role(role).requests * count
    inner = len(topology.levels) - 2  # the innermost domain level, -1 without one
    used_domains = {topology.path(n)[inner] for n in remaining} if inner >= 0 else set()
    for rv in problem.roles:
        k = rv.optional
        if k == 0:
            continue
        entries = []
        for name in rv.nodes:
            if scope is not None and name not in scope:
                continue
            after = remaining.get(name)
            c = min(k, rv.request.copies_in(free(name) if after is None else after))
            if rv.limits.cap:
                c = min(c, rv.limits.cap - out.get((rv.name, name), 0))
            if c:
                near = inner >= 0 and topology.path(name)[inner] in used_domains
                entries.append((name not in remaining, not near, -c, name))
        entries.sort()
        for _, _, neg_c, name in entries:
            if k == 0:
                break
            c = min(-neg_c, k)
            _take(out, remaining, rv.name, name, c, rv.request, free)
            k -= c
    return out
