"""The network topology of the cluster: spine -> blocks -> racks -> hosts, from node labels.

Gangs that talk a lot (all-reduce) run faster when their members are close, and a "within one
rack" constraint needs the grouping of nodes into racks. Both come from node labels, read
through ``NodeLabelConfig`` when a node enters the cache. The default label keys are:

* ``topology.gangscheduler.io/block``: the outermost level (e.g. a spine block / pod of racks);
* ``topology.gangscheduler.io/rack``: the rack (leaf switch) inside the block;
* ``kubernetes.io/hostname``: always the innermost level, one domain per node.

A cluster using other keys passes them as ``labels`` (outermost first), the same tuple as its
``NodeLabelConfig.topology_labels``. A node without a label at some level is alone in its own
domain there (see ``NodeLabelConfig.topology_of``), so it never counts as "in the same rack"
as another unlabelled node.

The graph is a tree (``networkx.DiGraph``, edges point away from the spine), checked when the
topology is built but made into a graph only when someone asks for it: nothing in a cycle
does, and networkx costs half a second or more of every process start. Distances are
computed from each host's domain path (hops up to the lowest common domain and back down),
which equals the tree's shortest path length but costs a tuple comparison instead of a graph
search; they are memoised per pair anyway because the solver asks for the same pairs often.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from scheduler.model import DEFAULT_TOPOLOGY_LABELS, HOSTNAME_LABEL, Node, NodeLabelConfig

if TYPE_CHECKING:
    import networkx as nx

#: Graph id of the root. Domains are ``(level, domain)`` and hosts ``(HOSTNAME_LABEL, name)``.
SPINE = "spine"


class Topology:
    """Hosts grouped into nested domains; immutable once built (caches aside)."""

    __slots__ = ("_distances", "_domain_at", "_domains", "_graph", "_index", "_paths", "_tree",
                 "levels")

    def __init__(self, levels: Sequence[str], paths: Mapping[str, tuple[str, ...]]) -> None:
        """*levels*: topology label keys outermost first, then ``kubernetes.io/hostname``.

        *paths*: per node name, its domain at each level (the last entry is the node itself).
        Prefer ``from_nodes``; this constructor exists for tests and custom sources.
        """
        self.levels: tuple[str, ...] = tuple(levels)
        self._index = {level: i for i, level in enumerate(self.levels)}
        self._paths: dict[str, tuple[str, ...]] = {n: paths[n] for n in sorted(paths)}
        self._distances: dict[tuple[str, str], int] = {}
        self._domains: dict[str, Mapping[str, tuple[str, ...]]] = {}
        self._domain_at: dict[str, dict[str, str]] = {}
        self._tree = _tree(self.levels, self._paths)
        self._graph: nx.DiGraph | None = None

    @property
    def graph(self) -> nx.DiGraph:
        """The tree as a ``networkx.DiGraph`` (spine -> domains -> hosts), built on first use."""
        if self._graph is None:
            import networkx as nx

            attrs, parent_of = self._tree
            graph = nx.DiGraph()
            graph.add_nodes_from(attrs)  # in bulk: an order of magnitude cheaper than one by one
            graph.add_edges_from((parent, gid) for gid, parent in parent_of.items())
            self._graph = graph
        return self._graph

    @classmethod
    def from_nodes(
        cls, nodes: Iterable[Node], labels: Sequence[str] = DEFAULT_TOPOLOGY_LABELS
    ) -> Topology:
        """Build from nodes whose ``topology`` was derived with topology label keys *labels*.

        A node whose ``topology`` has a different depth than *labels* (built with another
        ``NodeLabelConfig``) gets its path recomputed from its own labels with *labels*.
        """
        labels = tuple(labels)
        if HOSTNAME_LABEL in labels:
            raise ValueError(f"topology labels: {HOSTNAME_LABEL} is implicit, do not list it")
        config = NodeLabelConfig(topology_labels=labels)
        paths: dict[str, tuple[str, ...]] = {}
        for node in nodes:
            path = node.topology
            if len(path) != len(labels):
                path = config.topology_of(node.labels, node.name)
            paths[node.name] = (*path, node.name)
        return cls((*labels, HOSTNAME_LABEL), paths)

    # Levels and domains -----------------------------------------------------------------
    def level_index(self, level: str) -> int:
        """Depth of *level* below the spine, 0 = outermost; the host level is the largest."""
        try:
            return self._index[level]
        except KeyError:
            known = ", ".join(self.levels)
            raise KeyError(f"topology level {level!r} is not configured (known: {known})") from None

    def has_level(self, level: str) -> bool:
        return level in self._index

    def domain_of(self, node: str, level: str) -> str:
        """The domain *node* belongs to at *level* (its own name at the host level)."""
        return self._paths[node][self.level_index(level)]

    def domain_at(self, level: str) -> Mapping[str, str]:
        """Node name -> its domain at *level* (``domain_of`` for every node, worked out once).

        For the per-node loops of placement, which look a domain up for thousands of nodes
        per call: a plain dict's subscript costs no Python frame."""
        hit = self._domain_at.get(level)
        if hit is None:
            i = self.level_index(level)
            hit = self._domain_at[level] = {name: path[i] for name, path in self._paths.items()}
        return hit

    def path(self, node: str) -> tuple[str, ...]:
        """The domains of *node*, outermost first, ending with the node's own name."""
        return self._paths[node]

    def domains(self, level: str) -> Mapping[str, tuple[str, ...]]:
        """Domain name -> its node names (sorted), for every domain at *level*, sorted by name."""
        hit = self._domains.get(level)
        if hit is None:
            i = self.level_index(level)
            groups: dict[str, list[str]] = {}
            for name, path in self._paths.items():  # sorted by name already
                groups.setdefault(path[i], []).append(name)
            hit = MappingProxyType({d: tuple(groups[d]) for d in sorted(groups)})
            self._domains[level] = hit
        return hit

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(self._paths)

    # Distances ----------------------------------------------------------------------------
    def distance(self, a: str, b: str) -> int:
        """Hops between two nodes through their lowest common domain (0 for the same node).

        Two hosts in one rack are 2 hops apart, in one block but different racks 4, and so on;
        hosts with no common domain meet at the spine.
        """
        key = (a, b) if a <= b else (b, a)
        hit = self._distances.get(key)
        if hit is None:
            pa, pb = self._paths[a], self._paths[b]
            common = 0
            for x, y in zip(pa, pb, strict=True):
                if x != y:
                    break
                common += 1
            hit = 2 * (len(pa) - common)
            self._distances[key] = hit
        return hit


_Tree = tuple[list[tuple[object, dict[str, object]]], dict[tuple[str, str], object]]


def _tree(levels: tuple[str, ...], paths: Mapping[str, tuple[str, ...]]) -> _Tree:
    """Spine -> one graph node per domain and level -> hosts, rejecting non-tree input:
    (graph nodes with their attributes, each domain's parent)."""
    parent_of: dict[tuple[str, str], object] = {}
    attrs: list[tuple[object, dict[str, object]]] = [(SPINE, {"level": "spine", "depth": 0})]
    for name, path in paths.items():
        if len(path) != len(levels):
            raise ValueError(f"node {name}: topology path {path!r} does not match {levels!r}")
        parent: object = SPINE
        for depth, (level, domain) in enumerate(zip(levels, path, strict=True), start=1):
            gid = (level, domain)
            seen = parent_of.get(gid)
            if seen is None:
                parent_of[gid] = parent
                attrs.append((gid, {"level": level, "depth": depth}))
            elif seen != parent:
                raise ValueError(
                    f"node {name}: {level} {domain!r} is under {parent!r} but also under {seen!r}"
                )
            parent = gid
    return attrs, parent_of
