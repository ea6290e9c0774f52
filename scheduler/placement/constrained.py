"""The constructive pass for gangs whose members constrain each other.

When rules couple members (anti-affinity or spread between them, a shared affinity domain,
claims that must reach every member's node) or preferences order the nodes, the packing
greedy of ``greedy`` cannot simply fill nodes. This pass places the members one at a time,
as kube-scheduler would, each on the first node in a fixed order that has room, is under
the role's cap and that every rule admits (``rules.Tracker``); so its result satisfies the
rules by construction, and a failure here hands over to CP-SAT like any greedy failure.

The node order: the role's preference score first (highest), then the domain order of the
packing greedy (tightest domains that can take the gang, so members stay close), then the
most pods that fit, then the fewest GPUs left over, then the name. Anchor roles of an
affinity rule go before the roles that must join them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from scheduler.model.resources import Resources
from scheduler.placement.candidates import Candidates, ranks
from scheduler.placement.eligibility import Problem, RoleView
from scheduler.placement.rules import Assign, Tracker
from scheduler.world.topology import Topology


def _roles(problem: Problem) -> list[RoleView]:
    order = {name: i for i, name in enumerate(problem.terms.order)}
    return sorted(problem.roles, key=lambda rv: order.get(rv.name, len(order)))


class _State:
    """Resources left, members placed and the rules' trackers during one pass."""

    def __init__(self, problem: Problem, assign: Assign | None = None) -> None:
        self.problem = problem
        self.free = problem.snapshot.free
        self.left: dict[str, Resources] = {}
        self.out: Assign = {}
        rules = problem.terms.rules
        self.trackers: list[tuple[frozenset[str], Tracker]] = [(r.roles, r.tracker())
                                                                for r in rules]
        self._room: dict[tuple[str, str], int] = {}
        for (role, node), count in sorted((assign or {}).items()):
            self.take(problem.gang.role(role).requests, role, node, count)

    def room(self, rv: RoleView, node: str) -> int:
        """Members of *rv* that fit on *node* now (cached until something is put there)."""
        hit = self._room.get((rv.name, node))
        if hit is not None:
            return hit
        left = self.left.get(node)
        n = rv.request.copies_in(self.free(node) if left is None else left)
        if rv.limits.cap:
            n = min(n, rv.limits.cap - self.out.get((rv.name, node), 0))
        self._room[(rv.name, node)] = n
        return n

    def judge(self, role: str) -> Callable[[str], bool]:
        """``admits`` for one member of *role* against the current state, asking each
        tracker once per scope (domain) rather than once per node."""
        relevant = [t for roles, t in self.trackers if role in roles]
        seen: dict[tuple[int, object], bool] = {}

        def admits(node: str) -> bool:
            for i, t in enumerate(relevant):
                key = (i, t.scope(node))
                verdict = seen.get(key)
                if verdict is None:
                    verdict = seen[key] = t.admits(role, node)
                if not verdict:
                    return False
            return True
        return admits

    def take(self, request: Resources, role: str, node: str, count: int) -> None:
        left = self.left.get(node)
        self.left[node] = (self.free(node) if left is None else left) - request * count
        self.out[(role, node)] = self.out.get((role, node), 0) + count
        for key in [k for k in self._room if k[1] == node] if self._room else ():
            del self._room[key]
        for roles, t in self.trackers:
            if role in roles:
                t.add(role, node, count)


def _order(problem: Problem, rv: RoleView, nodes: Sequence[str],
           rank: Mapping[str, tuple[int, ...]], pods: Mapping[str, int]) -> list[str]:
    score = rv.limits.score
    free_gpus = problem.snapshot.free_gpus
    gpus = rv.gpus + rv.devices

    def key(n: str) -> tuple[object, ...]:
        c = pods.get(n, 0)
        return (-score.get(n, 0), rank.get(n, ()), -c, free_gpus(n) - c * gpus, n)

    return sorted(nodes, key=key)


def _fill_role(state: _State, rv: RoleView, order: Sequence[str], k: int) -> int:
    """Place up to *k* members of *rv*; returns how many could not be placed."""
    dead: set[str] = set()
    start = 0
    while k > 0:
        admits = state.judge(rv.name)
        for i in range(start, len(order)):
            node = order[i]
            if node in dead:
                continue
            if state.room(rv, node) <= 0:
                dead.add(node)
                if i == start:
                    start += 1
                continue
            if admits(node):
                state.take(rv.request, rv.name, node, 1)
                k -= 1
                break
        else:
            return k
    return 0


def place(problem: Problem, cands: Candidates, topology: Topology, levels: Sequence[str],
          scope: Collection[str] | None = None) -> Assign | None:
    """Every required member on candidate nodes in *scope*, or None."""
    rank = ranks(problem, cands, topology, levels, scope)
    state = _State(problem)
    for rv in _roles(problem):
        if not rv.required:
            continue
        caps = cands.caps[rv.name]
        nodes = [n for n in caps if scope is None or n in scope]
        if _fill_role(state, rv, _order(problem, rv, nodes, rank, caps), rv.required):
            return None
    return state.out


def add_optional(problem: Problem, assign: Assign, scope: Collection[str] | None) -> Assign:
    """Members beyond the required ones, as capacity and the rules allow, nodes the gang
    already uses first."""
    state = _State(problem, assign)
    used = {n for _, n in assign}
    for rv in _roles(problem):
        if not rv.optional:
            continue
        nodes = [n for n in rv.nodes if scope is None or n in scope]
        nodes.sort(key=lambda n: (n not in used, -rv.limits.score.get(n, 0), n))
        _fill_role(state, rv, nodes, rv.optional)
    return state.out
