"""What is worked out from the nodes alone, once per set of nodes: the snapshot's index.

Nodes change rarely next to pods, and every cycle asks the same questions of them: which
nodes may a pod with these requirements use, in which pools, which nodes make up these pools,
how the topology nests, which nodes have how many GPUs free. ``NodeIndex`` keeps the answers
in typed memo slots (``scheduler.kit.memo``), one per question, each declared and filled on
first use by the module that asks it.

The cluster cache builds a new index only when a node is added, changed or removed; every
snapshot of the cycles in between (and every snapshot a cycle derives) shares it, and ``decide``
gets it in its input with the snapshot. Each slot is a memo of a pure function of the nodes
(or of the nodes and an immutable object it is keyed by), so sharing it never changes an
answer, only what it costs. Free capacity is not derived from nodes alone: the free-GPU
indexes follow snapshots by their ``lineage`` (see ``scheduler.placement.index``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from scheduler.kit.memo import Slots
from scheduler.model import Node


class NodeIndex:
    """The nodes, sorted, and the memos derived from them (see the module docstring)."""

    __slots__ = ("node_names", "nodes", "pools", "slots", "topology_labels", "versions")

    def __init__(self, nodes: Iterable[Node], topology_labels: tuple[str, ...]) -> None:
        self.nodes: dict[str, Node] = {n.name: n for n in sorted(nodes, key=lambda n: n.name)}
        self.node_names: tuple[str, ...] = tuple(self.nodes)
        self.pools: tuple[str, ...] = tuple(sorted({n.pool for n in self.nodes.values()}))
        self.topology_labels = topology_labels
        #: The memos of what is derived from these nodes, each a slot declared by the module
        #: that fills it: ``snapshot`` (eligible nodes, their pools, pool nodes, topology,
        #: running gangs' charges), ``placement.eligibility`` (usable nodes),
        #: ``placement.index`` (free-GPU indexes), ``placement.allocatable`` (totals over
        #: allocatable), ``placement.terms`` (label domains, spread nodes),
        #: ``placement.scores`` (soft-tainted nodes), ``placement.diagnose`` (affinity groups).
        self.slots = Slots()
        #: Version numbers of the snapshots sharing this index (``Snapshot.lineage``).
        self.versions = itertools.count()
