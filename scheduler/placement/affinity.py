"""Required inter-pod affinity and anti-affinity between a gang's members.

kube-scheduler (InterPodAffinity Filter) places one pod at a time; a gang is placed at once,
so the members' own terms become rules over the whole placement:

* anti-affinity: in a domain of the term's key where a member of the role sits, no other
  pod the term selects (running, or another member) may sit; for a role matching its own
  term that is "at most one member per domain". Symmetric, so binding order is irrelevant.
* affinity: kube-scheduler admits a pod on a node whose value of every term's key is shared
  by a node running a pod matching all its terms (one such pod per key will do), and lets
  the first such pod go anywhere when none is counted yet (a pod counts on a node with any
  of the keys) and it matches its own terms. Binding the gang in ``terms``' role order, a
  role's members may go to domains running matching pods satisfy (``fixed``) or with a
  member of an earlier role its terms select (its *anchors*); with neither, all its members
  share one domain, the first one's. When only running pods can satisfy the terms the
  allowed domains are a per-node filter (``terms``), not a rule.

Both rules accept only placements some binding order makes valid one pod at a time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.placement.rules import Encoding, group_by_domain, per_domain


@dataclass(slots=True)
class _AntiTracker:
    rule: AntiRule
    count: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))

    def scope(self, node: str) -> object:
        return self.rule.domain_of.get(node)

    def admits(self, role: str, node: str) -> bool:
        rule = self.rule
        d = rule.domain_of.get(node)
        if d is None:
            return True  # a node without the key is in no domain of it: no conflict
        if role == rule.owner and any(self.count[(q, d)] for q in rule.matching):
            return False
        return not (role in rule.matching and self.count[(rule.owner, d)])

    def add(self, role: str, node: str, count: int) -> None:
        d = self.rule.domain_of.get(node)
        if d is not None:
            self.count[(role, d)] += count


@dataclass(frozen=True, slots=True)
class AntiRule:
    """Members of ``owner`` keep every member of ``matching`` out of their domains."""

    owner: str
    matching: frozenset[str]  # roles whose labels the term selects (owner too if self-match)
    term: str  # described, for reasons
    domain_of: Mapping[str, str]  # node -> value of the term's topology key

    @property
    def roles(self) -> frozenset[str]:
        return self.matching | {self.owner}

    def tracker(self) -> _AntiTracker:
        return _AntiTracker(self)

    def encode(self, enc: Encoding) -> None:
        owner_nodes = enc.nodes_of(self.owner)
        others = [q for q in sorted(self.matching) if q != self.owner]
        every = group_by_domain(self.domain_of, enc.nodes) if others else {}
        for d, nodes in group_by_domain(self.domain_of, owner_nodes).items():
            if self.owner in self.matching:
                enc.model.add(enc.total(self.owner, nodes) <= 1)
            if not others:
                continue
            b = enc.uses(self.owner, nodes)
            if b is None:
                continue
            members = every.get(d, [])
            for q in others:
                cap = enc.cap(q, members)
                if cap:
                    enc.model.add(enc.total(q, members) <= cap * (1 - b))

    def violation(self, assign: Mapping[tuple[str, str], int]) -> str | None:
        counts = per_domain(assign, self.domain_of, self.roles)
        for d in sorted(counts[self.owner]):
            others = sum(counts[q].get(d, 0) for q in self.matching)
            if self.owner in self.matching:
                others -= 1
            if others > 0:
                return (f"role {self.owner}: anti-affinity {self.term}: {others + 1} selected "
                        f"members share {d}")
        return None

    def describe(self) -> str:
        return f"role {self.owner}: anti-affinity {self.term}"


@dataclass(slots=True)
class _GroupTracker:
    rule: AffinityRule
    used: set[tuple[str, ...]] = field(default_factory=set)
    anchored: dict[tuple[str, ...], int] = field(default_factory=lambda: defaultdict(int))

    def scope(self, node: str) -> object:
        return self.rule.domain_of.get(node)

    def admits(self, role: str, node: str) -> bool:
        rule = self.rule
        if role != rule.owner:
            return True
        d = rule.domain_of.get(node)
        if d is None:
            return False
        if rule.anchors:
            return d in rule.fixed or self.anchored[d] > 0
        return not self.used or d in self.used

    def add(self, role: str, node: str, count: int) -> None:
        d = self.rule.domain_of.get(node)
        if d is None:
            return
        if role == self.rule.owner:
            self.used.add(d)
        if role in self.rule.anchors:
            self.anchored[d] += count


@dataclass(frozen=True, slots=True)
class AffinityRule:
    """Members of ``owner`` in domains (tuples of its terms' key values) that are ``fixed``
    or have a member of an ``anchors`` role; with no anchors, all in one domain."""

    owner: str
    anchors: frozenset[str]
    term: str
    domain_of: Mapping[str, tuple[str, ...]]  # node -> values of the terms' keys
    fixed: frozenset[tuple[str, ...]] = frozenset()  # domains running pods satisfy

    @property
    def roles(self) -> frozenset[str]:
        return self.anchors | {self.owner}

    def tracker(self) -> _GroupTracker:
        return _GroupTracker(self)

    def _domains(self) -> dict[tuple[str, ...], list[str]]:
        out: dict[tuple[str, ...], list[str]] = {}
        for n, d in sorted(self.domain_of.items()):
            out.setdefault(d, []).append(n)
        return out

    def encode(self, enc: Encoding) -> None:
        owner_nodes = set(enc.nodes_of(self.owner))
        chosen = []
        for i, (d, nodes) in enumerate(sorted(self._domains().items())):
            mine = [n for n in nodes if n in owner_nodes]
            if not mine or d in self.fixed:
                continue
            z = enc.model.new_bool_var(f"group[{self.owner},{i}]")
            enc.model.add(enc.total(self.owner, mine) <= enc.cap(self.owner, mine) * z)
            if self.anchors:
                enc.model.add(sum(enc.total(q, nodes) for q in sorted(self.anchors)) >= z)
            chosen.append(z)
        if chosen and not self.anchors:
            enc.model.add(sum(chosen) <= 1)
        for n in sorted(owner_nodes - set(self.domain_of)):
            enc.model.add(enc.x[(self.owner, n)] == 0)

    def violation(self, assign: Mapping[tuple[str, str], int]) -> str | None:
        used: set[tuple[str, ...]] = set()
        for (role, node), count in assign.items():
            if role == self.owner and count:
                d = self.domain_of.get(node)
                if d is None:
                    return f"role {self.owner}: affinity {self.term}: {node} lacks the key"
                used.add(d)
        if not self.anchors:
            if len(used) > 1:
                return f"role {self.owner}: affinity {self.term}: members in {len(used)} domains"
            return None
        anchored = {self.domain_of.get(node) for (role, node), count in assign.items()
                    if role in self.anchors and count}
        for d in sorted(used - self.fixed - anchored):
            return (f"role {self.owner}: affinity {self.term}: no pod it selects in "
                    f"{'/'.join(d)}")
        return None

    def describe(self) -> str:
        return f"role {self.owner}: affinity {self.term}"
