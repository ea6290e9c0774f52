"""What is worked out from the nodes alone, once per set of nodes: the snapshot's index.

Nodes change rarely next to pods, and every cycle asks the same questions of them: which
nodes may a pod with these requirements use, in which pools, which nodes make up these pools,
how the topology nests, which nodes have how many GPUs free. ``NodeIndex`` keeps the answers
as typed fields, one per question, each filled on first use by the module named beside it.

The cluster cache builds a new index only when a node is added, changed or removed; every
snapshot of the cycles in between (and every snapshot a cycle derives) shares it, and ``decide``
gets it in its input with the snapshot. Each field is a memo of a pure function of the nodes
(or of the nodes and an immutable object it is keyed by), so sharing it never changes an
answer, only what it costs. Free capacity is not derived from nodes alone: the free-GPU
indexes follow snapshots by their ``lineage`` (see ``scheduler.placement.index``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING

from scheduler.model import Node, PodRequirements, RunningGang
from scheduler.model.resources import Resources

if TYPE_CHECKING:
    from scheduler.placement.allocatable import AllocView, DomainView
    from scheduler.placement.index import FreeIndex
    from scheduler.world.topology import Topology


class NodeIndex:
    """The nodes, sorted, and the memos derived from them (see the module docstring)."""

    __slots__ = ("capacity", "charges", "composite", "domains", "eligible", "free", "groups",
                 "keyed", "node_names", "nodes", "pool_nodes", "pools", "pools_by_requirements",
                 "soft_tainted", "spread_nodes", "topology", "topology_labels", "unkeyed",
                 "usable", "versions")

    def __init__(self, nodes: Iterable[Node], topology_labels: tuple[str, ...]) -> None:
        self.nodes: dict[str, Node] = {n.name: n for n in sorted(nodes, key=lambda n: n.name)}
        self.node_names: tuple[str, ...] = tuple(self.nodes)
        self.pools: tuple[str, ...] = tuple(sorted({n.pool for n in self.nodes.values()}))
        self.topology_labels = topology_labels
        #: Requirements -> the nodes a pod with them may use (``Snapshot.eligible_nodes``).
        self.eligible: dict[PodRequirements, tuple[str, ...]] = {}
        #: (requirements, nodes excluded, nodes allowed or None) -> the eligible nodes a solve
        #: with those params may use (``placement.eligibility``): most solves of a cycle
        #: share the few sets of nominated or reserved nodes.
        self.usable: dict[tuple[PodRequirements, frozenset[str], frozenset[str] | None],
                          tuple[str, ...]] = {}
        #: Requirements -> the pools of those nodes, sorted (``Snapshot.eligible_pools``).
        self.pools_by_requirements: dict[PodRequirements, tuple[str, ...]] = {}
        #: Pool names, sorted -> their nodes (``Snapshot.nodes_in``).
        self.pool_nodes: dict[tuple[str, ...], frozenset[str]] = {}
        #: The topology graph (``Snapshot.topology``), built on first use.
        self.topology: Topology | None = None
        #: Running gang (by identity: the cache hands every cycle the same object while it
        #: runs unchanged) -> what it uses per pool (``Snapshot.pool_usage``).
        self.charges: dict[int, tuple[RunningGang, dict[str, Resources]]] = {}
        #: Selection -> the free-GPU index of its eligible nodes (``placement.index``).
        self.free: dict[object, FreeIndex] = {}
        #: Roles and node filter -> totals over allocatable (``placement.allocatable``).
        self.capacity: dict[tuple[object, ...], AllocView | DomainView] = {}
        #: Label key -> node -> its value, for the nodes that have it (``placement.terms``).
        self.domains: dict[str, dict[str, str]] = {}
        #: Label keys -> node -> its values of them, for nodes with all (pod affinity).
        self.composite: dict[tuple[str, ...], dict[str, tuple[str, ...]]] = {}
        #: Label keys -> the nodes that have them all / the nodes that lack one (spread).
        self.keyed: dict[frozenset[str], tuple[str, ...]] = {}
        self.unkeyed: dict[frozenset[str], frozenset[str]] = {}
        #: (selection, key, policies, keyed nodes) -> the nodes a spread constraint counts.
        self.spread_nodes: dict[tuple[object, ...], dict[str, str]] = {}
        #: Nodes with a PreferNoSchedule taint (``placement.scores``), found on first use.
        self.soft_tainted: tuple[str, ...] | None = None
        #: Affinity rule's domains (by identity, kept alive here) and role -> most members
        #: one domain holds against allocatable (``placement.diagnose``).
        self.groups: dict[tuple[object, ...], tuple[object, int]] = {}
        #: Version numbers of the snapshots sharing this index (``Snapshot.lineage``).
        self.versions = itertools.count()
