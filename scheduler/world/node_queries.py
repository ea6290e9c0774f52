"""What a snapshot answers from its nodes alone: which nodes a pod may use, pools, the
topology graph, what a running gang is charged per pool.

Separate from ``snapshot`` because none of it depends on what runs or what is free: every
answer is memoised in the ``NodeIndex``, which derived snapshots share (and, through the
cluster cache, the cycles' snapshots while the nodes are unchanged). ``Snapshot`` inherits
these queries; deriving a snapshot never touches them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from scheduler.kit.memo import LARGE, Slot
from scheduler.model import Node, PodRequirements, RunningGang
from scheduler.model.release import Release
from scheduler.model.resources import Resources, total
from scheduler.world.node_index import NodeIndex

if TYPE_CHECKING:
    from scheduler.world.topology import Topology


#: The node index's memos this module fills (see ``NodeIndex``): requirements -> the nodes a
#: pod with them may use, and their pools; pool names, sorted -> their nodes; the topology;
#: a running gang (by identity: the cache hands every cycle the same object while it runs
#: unchanged, kept so its id is not reused) -> what it uses per pool, one entry per running
#: gang (hence its bound).
ELIGIBLE: Slot[PodRequirements, tuple[str, ...]] = Slot("snapshot.eligible_nodes")
ELIGIBLE_POOLS: Slot[PodRequirements, tuple[str, ...]] = Slot("snapshot.eligible_pools")
POOL_NODES: Slot[tuple[str, ...], frozenset[str]] = Slot("snapshot.nodes_in")
TOPOLOGY: Slot[None, Topology] = Slot("snapshot.topology")
CHARGES: Slot[int, tuple[RunningGang, dict[str, Resources]]] = Slot("snapshot.pool_usage",
                                                                      bound=LARGE)


class NodeQueries:
    """The node-derived reads of a ``Snapshot`` (which sets ``_index``)."""

    __slots__ = ()
    _index: NodeIndex

    @property
    def nodes(self) -> Mapping[str, Node]:
        return self._index.nodes

    @property
    def node_names(self) -> tuple[str, ...]:
        """Node names, sorted: the deterministic iteration order for everything downstream."""
        return self._index.node_names

    @property
    def index(self) -> NodeIndex:
        """What is derived from the nodes alone; shared by derived snapshots (and, through the
        cluster cache, by the cycles' snapshots while the nodes are unchanged)."""
        return self._index

    def pools(self) -> tuple[str, ...]:
        return self._index.pools

    def total_allocatable(self, pool: str | None = None) -> Resources:
        return total(n.allocatable for n in self._index.nodes.values() if pool in (None, n.pool))

    def eligible_nodes(self, requirements: PodRequirements) -> tuple[str, ...]:
        """Nodes a pod with *requirements* may use, capacity aside (cached per requirements)."""
        slots = self._index.slots
        hit = slots.table(ELIGIBLE).get(requirements)
        if hit is None:
            hit = slots.put(ELIGIBLE, requirements, tuple(
                name for name, node in self._index.nodes.items() if requirements.allows(node)))
        return hit

    def eligible_pools(self, requirements: PodRequirements) -> tuple[str, ...]:
        """Pools with a node a pod with *requirements* may use, sorted."""
        slots = self._index.slots
        hit = slots.table(ELIGIBLE_POOLS).get(requirements)
        if hit is None:
            nodes = self._index.nodes
            hit = slots.put(ELIGIBLE_POOLS, requirements, tuple(sorted(
                {nodes[n].pool for n in self.eligible_nodes(requirements)})))
        return hit

    def nodes_in(self, pools: Iterable[str]) -> frozenset[str]:
        """The nodes of *pools*."""
        key = tuple(sorted(set(pools)))
        slots = self._index.slots
        hit = slots.table(POOL_NODES).get(key)
        if hit is None:
            wanted = set(key)
            hit = slots.put(POOL_NODES, key, frozenset(
                name for name, node in self._index.nodes.items() if node.pool in wanted))
        return hit

    @property
    def topology(self) -> Topology:
        """The network topology graph of the nodes (built once, shared by derived snapshots)."""
        from scheduler.world.topology import Topology

        index = self._index
        return index.slots.get_or_make(TOPOLOGY, None, lambda: Topology.from_nodes(
            index.nodes.values(), index.topology_labels))

    def pool_usage(self, gang: RunningGang) -> dict[str, Resources]:
        """What quota charges a running gang per pool (its ``charges``; shared: not to be
        changed)."""
        return self._index.slots.kept_for(CHARGES, id(gang), gang, self._pool_usage)

    def _pool_usage(self, gang: RunningGang) -> dict[str, Resources]:
        nodes = self._index.nodes
        per_pool: dict[str, list[Resources]] = {}
        for node, res in gang.charges:
            if node in nodes:
                per_pool.setdefault(nodes[node].pool, []).append(res)
        usage = {pool: total(parts) for pool, parts in sorted(per_pool.items())}
        return usage

    def pool_release(self, release: Release) -> dict[str, Resources]:
        """What *release* gives back to quota per pool (shared: not to be changed)."""
        return self.pool_usage(release.released)
