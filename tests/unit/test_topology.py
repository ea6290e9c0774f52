"""Topology: domains per level, distances equal to tree hops, label keys as an argument."""

from __future__ import annotations

import networkx as nx
import pytest

from scheduler.model import HOSTNAME_LABEL, Node, NodeLabelConfig
from scheduler.model.resources import Resources
from scheduler.world.snapshot import Snapshot
from scheduler.world.topology import SPINE, Topology

BLOCK = "topology.gangscheduler.io/block"
RACK = "topology.gangscheduler.io/rack"


def _node(name: str, block: str | None, rack: str | None,
          config: NodeLabelConfig | None = None, keys: tuple[str, str] = (BLOCK, RACK)) -> Node:
    labels = {}
    if block is not None:
        labels[keys[0]] = block
    if rack is not None:
        labels[keys[1]] = rack
    return Node.build(name, Resources.of(gpu=8), labels, config=config)


NODES = [
    _node("a1", "b1", "r1"), _node("a2", "b1", "r1"),
    _node("a3", "b1", "r2"),
    _node("a4", "b2", "r1"),  # rack "r1" of block b2 is a different rack from b1's r1
    _node("lone", None, None),
]


@pytest.fixture
def topo() -> Topology:
    return Topology.from_nodes(NODES)


def test_domains_per_level(topo: Topology) -> None:
    assert dict(topo.domains(BLOCK)) == {
        "<none:lone>": ("lone",), "b1": ("a1", "a2", "a3"), "b2": ("a4",)}
    assert dict(topo.domains(RACK)) == {
        "<none:lone>/<none:lone>": ("lone",), "b1/r1": ("a1", "a2"), "b1/r2": ("a3",),
        "b2/r1": ("a4",)}
    assert topo.domains(HOSTNAME_LABEL)["a3"] == ("a3",)
    assert topo.domain_of("a4", RACK) == "b2/r1"
    assert topo.level_index(BLOCK) == 0
    assert topo.level_index(RACK) == 1
    assert topo.level_index(HOSTNAME_LABEL) == 2


@pytest.mark.parametrize(("a", "b", "hops"), [
    ("a1", "a1", 0), ("a1", "a2", 2), ("a1", "a3", 4), ("a1", "a4", 6), ("a4", "lone", 6),
])
def test_distance(topo: Topology, a: str, b: str, hops: int) -> None:
    assert topo.distance(a, b) == hops
    assert topo.distance(b, a) == hops


def test_distance_equals_tree_path(topo: Topology) -> None:
    undirected = topo.graph.to_undirected()
    for a in topo.node_names:
        for b in topo.node_names:
            want = nx.shortest_path_length(undirected, (HOSTNAME_LABEL, a), (HOSTNAME_LABEL, b))
            assert topo.distance(a, b) == want


def test_graph_is_a_tree_rooted_at_spine(topo: Topology) -> None:
    assert nx.is_arborescence(topo.graph)
    assert topo.graph.in_degree(SPINE) == 0
    hosts = [n for n, d in topo.graph.nodes(data=True) if d["level"] == HOSTNAME_LABEL]
    assert sorted(h[1] for h in hosts) == sorted(n.name for n in NODES)


def test_unknown_level_names_the_known_ones(topo: Topology) -> None:
    with pytest.raises(KeyError, match=r"zone.*not configured.*rack"):
        topo.level_index("topology.kubernetes.io/zone")
    assert not topo.has_level("topology.kubernetes.io/zone")


def test_custom_label_keys() -> None:
    keys = ("example.com/zone", "example.com/switch")
    config = NodeLabelConfig(topology_labels=keys)
    nodes = [_node("x", "z1", "s1", config, keys), _node("y", "z1", "s2", config, keys)]
    topo = Topology.from_nodes(nodes, keys)
    assert topo.levels == (*keys, HOSTNAME_LABEL)
    assert dict(topo.domains("example.com/switch")) == {"z1/s1": ("x",), "z1/s2": ("y",)}
    snap = Snapshot(nodes, topology_labels=keys)
    assert snap.topology.distance("x", "y") == 4


def test_paths_recomputed_when_built_with_other_depth() -> None:
    keys = ("example.com/zone",)
    nodes = [_node("x", "z1", "s1"), _node("y", "z1", "s2")]  # built with the 2 default keys
    labelled = [Node.build(n.name, n.allocatable, {**n.labels, keys[0]: "east"}) for n in nodes]
    topo = Topology.from_nodes(labelled, keys)
    assert dict(topo.domains(keys[0])) == {"east": ("x", "y")}


def test_inconsistent_tree_is_rejected() -> None:
    bad = [Node("p", Resources.of(gpu=1), topology=("b1", "r1")),
           Node("q", Resources.of(gpu=1), topology=("b2", "r1"))]
    with pytest.raises(ValueError, match=r"node q: .* 'r1' is under"):
        Topology.from_nodes(bad)


def test_snapshot_builds_topology_once_for_derived_snapshots() -> None:
    snap = Snapshot(NODES)
    derived = snap.with_usage("a1", Resources.of(gpu=1))
    assert derived.topology is snap.topology
