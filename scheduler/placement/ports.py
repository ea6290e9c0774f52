"""Host ports (kube-scheduler's NodePorts): one pod per node and port.

A node where a running pod uses a conflicting port is ruled out (``blocked_nodes``); two
members wanting the same port never share a node: within a role that is a cap of one per
node, across roles a ``PortRule``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.model import Gang, Role
from scheduler.placement.rules import Encoding
from scheduler.world.snapshot import Snapshot


def blocked_nodes(role: Role, snapshot: Snapshot) -> set[str]:
    """Nodes where a running pod uses a port conflicting with one of the role's."""
    ports = role.requirements.constraints.host_ports
    if not ports:
        return set()
    return {occ.node for occ in snapshot.pods.all()
            if any(p.conflicts(q) for p in ports for q in occ.constraints.host_ports)}


def conflicting_roles(gang: Gang) -> list[frozenset[str]]:
    """Groups of two or more roles some pair of whose ports conflict."""
    roles = [r for r in gang.roles if r.count > 0 and r.requirements.constraints.host_ports]
    groups = []
    for port in sorted({p for r in roles for p in r.requirements.constraints.host_ports}):
        names = frozenset(r.name for r in roles
                          if any(port.conflicts(q) for q in r.requirements.constraints.host_ports))
        if len(names) > 1 and names not in groups:
            groups.append(names)
    return groups


@dataclass(slots=True)
class _PortTracker:
    rule: PortRule
    used: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def scope(self, node: str) -> object:
        return node

    def admits(self, role: str, node: str) -> bool:
        return self.used[node] == 0

    def add(self, role: str, node: str, count: int) -> None:
        self.used[node] += count


@dataclass(frozen=True, slots=True)
class PortRule:
    """Members of these roles want a port in common: at most one of them per node."""

    members: frozenset[str]

    @property
    def roles(self) -> frozenset[str]:
        return self.members

    def tracker(self) -> _PortTracker:
        return _PortTracker(self)

    def encode(self, enc: Encoding) -> None:
        for node in enc.nodes:
            if sum(1 for r in self.members if (r, node) in enc.x) > 1:
                enc.model.add(sum(enc.total(r, (node,)) for r in sorted(self.members)) <= 1)

    def violation(self, assign: Mapping[tuple[str, str], int]) -> str | None:
        per_node: dict[str, int] = defaultdict(int)
        for (role, node), count in assign.items():
            if role in self.members:
                per_node[node] += count
        crowded = sorted(n for n, c in per_node.items() if c > 1)
        if crowded:
            return f"roles {', '.join(sorted(self.members))} share a host port on {crowded[0]}"
        return None

    def describe(self) -> str:
        return f"host ports of roles {', '.join(sorted(self.members))}"
