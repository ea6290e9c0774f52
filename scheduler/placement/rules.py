"""Constraints that couple a gang's members, stated once and used three ways.

A gang's own members count against each other: one worker's anti-affinity keeps the next
off its node, a spread constraint counts the members already placed. Each such rule is
one object with three faces, so that greedy, CP-SAT and the final check cannot disagree:

* ``tracker()``: incremental state for the constructive greedy pass, which asks
  ``admits(role, node)`` before it adds one member and ``add`` after;
* ``encode(enc)``: the same rule as CP-SAT constraints over the per-(role, node) counts;
* ``violation(assign)``: the rule checked on a finished placement (a safety net on every
  result, and the oracle of the property tests).

The rules are *final-state* rules chosen so that any placement satisfying them can be
reached by binding the members one at a time with kube-scheduler accepting each (see
``affinity`` and ``spread`` for the arguments); they may refuse a few placements a
sequential scheduler could reach, never accept one it would refuse.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # only in annotations: CP-SAT (and pandas with it) loads when a solve needs it
    from ortools.sat.python import cp_model

#: (role, node) -> pods.
Assign = dict[tuple[str, str], int]


class Tracker(Protocol):
    def admits(self, role: str, node: str) -> bool: ...
    def add(self, role: str, node: str, count: int) -> None: ...

    def scope(self, node: str) -> object:
        """What ``admits`` depends on besides the role and the members placed so far: the
        node's domain for domain rules (every node of a domain gets the same answer), the
        node itself otherwise. Lets the constructive pass ask once per domain."""


class Rule(Protocol):
    @property
    def roles(self) -> frozenset[str]:
        """The roles whose members the rule reads (the others never affect it)."""

    def tracker(self) -> Tracker: ...
    def encode(self, enc: Encoding) -> None: ...
    def violation(self, assign: Mapping[tuple[str, str], int]) -> str | None: ...
    def describe(self) -> str: ...


class Encoding:
    """The CP-SAT model of one solve as rules see it: counts per (role, node) and helpers."""

    def __init__(self, model: cp_model.CpModel, x: Mapping[tuple[str, str], cp_model.IntVar],
                 caps: Mapping[tuple[str, str], int], nodes: Sequence[str]) -> None:
        self.model = model
        self.x = x
        self.caps = caps
        self.nodes = tuple(nodes)
        self._uses: dict[tuple[str, tuple[str, ...]], cp_model.IntVar] = {}
        self._by_role: dict[str, list[str]] = defaultdict(list)
        for role, node in x:
            self._by_role[role].append(node)

    def nodes_of(self, role: str) -> list[str]:
        """Nodes where *role* has a variable."""
        return self._by_role.get(role, [])

    def total(self, role: str, nodes: Iterable[str]) -> cp_model.LinearExprT:
        """Members of *role* on *nodes* (0 where the role has no variable)."""
        x = self.x
        terms = [x[(role, n)] for n in nodes if (role, n) in x]
        return sum(terms) if terms else 0

    def cap(self, role: str, nodes: Iterable[str]) -> int:
        return sum(self.caps.get((role, n), 0) for n in nodes)

    def uses(self, role: str, nodes: Sequence[str]) -> cp_model.IntVar | None:
        """A boolean that is true iff *role* has a member on *nodes* (None: it cannot)."""
        key = (role, tuple(nodes))
        hit = self._uses.get(key)
        if hit is not None:
            return hit
        cap = self.cap(role, nodes)
        if cap == 0:
            return None
        b = self.model.new_bool_var(f"uses[{role},{len(self._uses)}]")
        total = self.total(role, nodes)
        self.model.add(total <= cap * b)
        self.model.add(total >= b)
        self._uses[key] = b
        return b


@dataclass(slots=True)
class Blocks:
    """Nodes ruled out for one role, counted by reason: every reason counts all the nodes it
    rules out, so a message names each cause even where two rule out the same nodes."""

    nodes: set[str] = field(default_factory=set)
    why: Counter[str] = field(default_factory=Counter)
    by_running: bool = False  # some are ruled out by running pods (preemption may help)
    #: Some are ruled out for want of free devices (devices freed or published may help).
    by_devices: bool = False

    def block(self, names: Iterable[str], reason: str, running: bool = False,
              devices: bool = False) -> None:
        hit = set(names)
        if hit:
            self.nodes |= hit
            self.why[reason] += len(hit)
            self.by_running = self.by_running or running
            self.by_devices = self.by_devices or devices


def group_by_domain(domain_of: Mapping[str, str], nodes: Iterable[str]) -> dict[str, list[str]]:
    """*nodes* (that have a domain) by domain, both sorted."""
    out: dict[str, list[str]] = {}
    for n in sorted(nodes):
        d = domain_of.get(n)
        if d is not None:
            out.setdefault(d, []).append(n)
    return dict(sorted(out.items()))


def per_domain(assign: Mapping[tuple[str, str], int], domain_of: Mapping[str, str],
               roles: Iterable[str]) -> dict[str, dict[str, int]]:
    """role -> domain -> members, over *assign* (nodes without a domain left out)."""
    wanted = set(roles)
    out: dict[str, dict[str, int]] = {r: {} for r in wanted}
    for (role, node), count in assign.items():
        d = domain_of.get(node)
        if role in wanted and d is not None and count:
            out[role][d] = out[role].get(d, 0) + count
    return out


def check_all(rules: Iterable[Rule], assign: Mapping[tuple[str, str], int]) -> str | None:
    """The first violated rule's explanation, or None."""
    for rule in rules:
        why = rule.violation(assign)
        if why is not None:
            return why
    return None
