"""Required topology spread (``whenUnsatisfiable: DoNotSchedule``) across a gang's members.

kube-scheduler's PodTopologySpread filter admits a pod in domain D when
``matching(D) + self - min ≤ maxSkew`` (``min`` over the domains of the nodes the constraint
counts, 0 while there are fewer than ``minDomains``). For a gang the rule is stated on the
finished placement: every domain that has a member of the constrained role satisfies
``final(D) - min(final) ≤ maxSkew``, counting running pods and every member the selector
matches. That is reachable one pod at a time: add members to the least-filled domain
first, and each addition passes kube-scheduler's check (the last one added to D sees at
most ``final(D) - 1`` there and a minimum no lower than the final one's, or D is itself
the minimum and the skew is 1). It is conservative when other matching members land in D
after the constrained ones would have.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only in annotations: CP-SAT loads when a solve needs it
    from ortools.sat.python import cp_model

from scheduler.placement.rules import Encoding, group_by_domain, per_domain


@dataclass(slots=True)
class _SpreadTracker:
    rule: SpreadRule
    count: dict[str, int] = field(default_factory=dict)
    levels: Counter[int] = field(default_factory=Counter)  # count -> domains at that count
    low: int = 0
    mine: set[str] = field(default_factory=set)

    def scope(self, node: str) -> object:
        return self.rule.domain_of.get(node)

    def __post_init__(self) -> None:
        self.count = dict(self.rule.existing)
        self.levels = Counter(self.count.values())
        self.low = min(self.levels, default=0)

    def _floor(self, domain: str, plus: int) -> int:
        """The minimum over domains if *domain* had *plus* more pods."""
        if len(self.count) < self.rule.min_domains:
            return 0
        v = self.count[domain]
        if plus and v == self.low and self.levels[v] == 1:
            return min(v + plus, min((k for k, n in self.levels.items() if n and k > v),
                                     default=v + plus))
        return self.low

    def admits(self, role: str, node: str) -> bool:
        rule = self.rule
        d = rule.domain_of.get(node)
        if d is None:
            return role != rule.owner
        if role != rule.owner and d not in self.mine:
            return True
        plus = 1 if role in rule.matching else 0
        return self.count[d] + plus - self._floor(d, plus) <= rule.max_skew

    def add(self, role: str, node: str, count: int) -> None:
        rule = self.rule
        d = rule.domain_of.get(node)
        if d is None:
            return
        if role == rule.owner:
            self.mine.add(d)
        if role in rule.matching:
            v = self.count[d]
            self.levels[v] -= 1
            self.levels[v + count] += 1
            self.count[d] = v + count
            while self.levels[self.low] == 0 and self.low < max(self.levels):
                self.low += 1


@dataclass(frozen=True, slots=True)
class SpreadRule:
    owner: str
    matching: frozenset[str]  # roles whose members the selector counts
    constraint: str  # described, for reasons
    max_skew: int
    min_domains: int
    domain_of: Mapping[str, str]  # node the constraint counts -> its domain
    existing: Mapping[str, int]  # every domain -> running matching pods

    @property
    def roles(self) -> frozenset[str]:
        return self.matching | {self.owner}

    def tracker(self) -> _SpreadTracker:
        return _SpreadTracker(self)

    def encode(self, enc: Encoding) -> None:
        groups = group_by_domain(self.domain_of, enc.nodes)
        final = {d: self.existing[d] + sum(enc.total(q, groups.get(d, ()))
                                           for q in sorted(self.matching))
                 for d in self.existing}
        floor: cp_model.LinearExprT = 0
        if len(final) >= self.min_domains:
            top = max(self.existing.values(), default=0) + sum(
                enc.cap(q, enc.nodes_of(q)) for q in self.matching)
            low = enc.model.new_int_var(0, top, f"spread_min[{self.owner},{self.constraint}]")
            for expr in final.values():
                enc.model.add(low <= expr)
            floor = low
        mine = group_by_domain(self.domain_of, enc.nodes_of(self.owner))
        for d, nodes in mine.items():
            b = enc.uses(self.owner, nodes)
            if b is not None:
                enc.model.add(final[d] <= self.max_skew + floor).only_enforce_if(b)

    def violation(self, assign: Mapping[tuple[str, str], int]) -> str | None:
        counts = per_domain(assign, self.domain_of, self.roles)
        touched = {d for q in self.roles for d in counts[q]}
        final = {d: self.existing[d] + sum(counts[q].get(d, 0) for q in self.matching)
                 for d in touched}
        floor = 0
        if len(self.existing) >= self.min_domains:
            # The least over untouched domains is the least existing count unless every
            # domain with it was touched (then look at the others).
            least = min(self.existing.values(), default=0)
            if any(d not in touched for d, n in self.existing.items() if n == least):
                untouched = least
            else:
                untouched = min((n for d, n in self.existing.items() if d not in touched),
                                default=least + len(assign) + 1)
            floor = min([untouched, *final.values()])
        for d in sorted(counts[self.owner]):
            if final[d] - floor > self.max_skew:
                return (f"role {self.owner}: {self.constraint}: {final[d]} matching pods in "
                        f"{d}, the least-filled domain has {floor}")
        return None

    def describe(self) -> str:
        return f"role {self.owner}: {self.constraint}"
