"""Table-driven tests for the cluster description parser: shapes in, nodes or field errors out."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from scheduler.world import clusterspec

EXAMPLES = Path(clusterspec.__file__).parents[1] / "examples" / "clusters"

MINIMAL: dict[str, Any] = {"pools": [{"name": "a100", "count": 2}]}


def with_pool(**fields: Any) -> dict[str, Any]:
    """A two-pool document whose second pool has `fields` merged in (None deletes a key)."""
    pool: dict[str, Any] = {"name": "h100", "count": 1}
    for key, value in fields.items():
        if value is None:
            pool.pop(key, None)
        else:
            pool[key] = value
    return {"pools": [{"name": "a100", "count": 1}, pool]}


def test_defaults() -> None:
    spec = clusterspec.parse(copy.deepcopy(MINIMAL))
    assert spec.name is None
    assert spec.pool_label == "gangscheduler.io/pool"
    assert spec.topology_labels == (
        "topology.gangscheduler.io/block",
        "topology.gangscheduler.io/rack",
    )
    (pool,) = spec.pools
    assert (pool.gpus_per_node, pool.cpu, pool.memory, pool.pods) == (8, "64", "512Gi", 110)
    assert (pool.nodes_per_rack, pool.racks_per_block) == (8, 4)
    assert pool.gpu_model is None and pool.cost_per_gpu_hour is None
    assert pool.labels == () and pool.taints == ()
    assert pool.dra_devices
    assert clusterspec.DRA_DEVICES_LABEL not in next(spec.nodes()).labels


def test_a_pool_without_dra_devices_labels_its_nodes() -> None:
    """The dev cluster's fake DRA driver reads the choice off the node (nodes come and go
    while it runs); the other pool's nodes keep the labels they always had."""
    spec = clusterspec.parse(with_pool(draDevices=False))
    labels = {n.pool: n.labels for n in spec.nodes()}
    assert labels["h100"][clusterspec.DRA_DEVICES_LABEL] == "false"
    assert clusterspec.DRA_DEVICES_LABEL not in labels["a100"]


def test_nodes_names_labels_allocatable() -> None:
    spec = clusterspec.parse(
        {
            "pools": [
                {
                    "name": "a100",
                    "count": 3,
                    "gpuModel": "NVIDIA-A100-SXM4-80GB",
                    "gpusPerNode": 4,
                    "cpu": 96,
                    "memory": "1Ti",
                    "labels": {"team": "x"},
                    "taints": [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}],
                }
            ]
        }
    )
    nodes = list(spec.nodes())
    assert [n.name for n in nodes] == ["a100-0000", "a100-0001", "a100-0002"]
    first = nodes[0]
    assert first.pool == "a100"
    assert first.labels == {
        "kubernetes.io/hostname": "a100-0000",
        "gangscheduler.io/pool": "a100",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "topology.gangscheduler.io/block": "a100-b0",
        "topology.gangscheduler.io/rack": "a100-b0-r0",
        "team": "x",
    }
    assert first.allocatable == {
        "cpu": "96",
        "memory": "1Ti",
        "pods": "110",
        "ephemeral-storage": "1Ti",
        "nvidia.com/gpu": "4",
    }
    assert first.taints == (clusterspec.TaintSpec("dedicated", "infer", "NoSchedule"),)


@pytest.mark.parametrize(
    ("index", "block", "rack"),
    [(0, "p-b0", "p-b0-r0"), (1, "p-b0", "p-b0-r0"), (2, "p-b0", "p-b0-r1"),
     (5, "p-b0", "p-b0-r2"), (6, "p-b1", "p-b1-r0"), (13, "p-b2", "p-b2-r0")],
)
def test_topology_from_rack_and_block_sizes(index: int, block: str, rack: str) -> None:
    spec = clusterspec.parse(
        {"pools": [{"name": "p", "count": 14, "nodesPerRack": 2, "racksPerBlock": 3}]}
    )
    node = list(spec.nodes())[index]
    assert node.labels["topology.gangscheduler.io/block"] == block
    assert node.labels["topology.gangscheduler.io/rack"] == rack


def test_custom_labels_and_single_topology_level() -> None:
    spec = clusterspec.parse(
        {"poolLabel": "example.com/pool", "topologyLabels": ["example.com/zone"], **MINIMAL}
    )
    labels = next(spec.nodes()).labels
    assert labels["example.com/pool"] == "a100"
    assert labels["example.com/zone"] == "a100-b0"
    assert "topology.gangscheduler.io/rack" not in labels


def test_three_topology_levels_outer_from_pool_labels() -> None:
    """The topology code takes any depth; the generated levels are block and rack (the last
    two labels), the outer ones are a per-pool label (e.g. the zone a pool lives in)."""
    from scheduler.model import NodeLabelConfig
    from scheduler.world.topology import Topology
    from simulator.workload import nodes_from_spec

    keys = ["example.com/zone", "example.com/block", "example.com/rack"]
    spec = clusterspec.parse({"topologyLabels": keys, "pools": [
        {"name": "a", "count": 4, "nodesPerRack": 2, "labels": {"example.com/zone": "east"}},
        {"name": "b", "count": 2, "labels": {"example.com/zone": "west"}}]})
    labels = next(spec.nodes()).labels
    assert [labels[k] for k in keys] == ["east", "a-b0", "a-b0-r0"]
    nodes = nodes_from_spec(spec, NodeLabelConfig(topology_labels=tuple(keys)))
    topo = Topology.from_nodes(nodes, keys)
    assert sorted(topo.domains("example.com/zone")) == ["east", "west"]
    assert dict(topo.domains("example.com/rack"))["east/a-b0/a-b0-r1"] == ("a-0002", "a-0003")


@pytest.mark.parametrize("name", ["dev.yaml", "sim-philly.yaml"])
def test_shipped_examples_load(name: str) -> None:
    spec = clusterspec.load(EXAMPLES / name)
    assert spec.node_count() == len(list(spec.nodes())) > 0


def test_sim_philly_size() -> None:
    spec = clusterspec.load(EXAMPLES / "sim-philly.yaml")
    assert spec.node_count() == 256
    assert sum(int(n.allocatable["nvidia.com/gpu"]) for n in spec.nodes()) == 2048


BAD: list[tuple[str, Any, str]] = [
    ("root not mapping", [1, 2], "<root>: must be a mapping"),
    ("no pools", {}, "pools: must be a non-empty list"),
    ("empty pools", {"pools": []}, "pools: must be a non-empty list"),
    ("unknown top field", {"pool": [], **MINIMAL}, "pool: unknown field"),
    ("name not str", {"name": 3, **MINIMAL}, "name: must be a string"),
    ("topology not list", {"topologyLabels": "a", **MINIMAL}, "topologyLabels: must be a list"),
    ("topology bad key", {"topologyLabels": ["a b"], **MINIMAL}, "topologyLabels[0]: not a valid"),
    ("topology outer level unset", {"topologyLabels": ["a", "b", "c"], **MINIMAL},
     "pools[0].labels: must set a to a non-empty value: with 3 topologyLabels the outer 1"),
    ("topology outer level empty",
     {"topologyLabels": ["a", "b", "c"], "pools": [{"name": "x", "count": 1, "labels": {"a": ""}}]},
     "pools[0].labels: must set a to a non-empty value"),
    ("topology lists hostname", {"topologyLabels": ["kubernetes.io/hostname"], **MINIMAL},
     "topologyLabels: kubernetes.io/hostname is always the innermost level"),
    ("topology duplicate", {"topologyLabels": ["a", "a"], **MINIMAL}, "topologyLabels: duplicate"),
    ("pool label bad", {"poolLabel": "/x", **MINIMAL}, "poolLabel: not a valid label key"),
    ("pool not mapping", {"pools": ["a"]}, "pools[0]: must be a mapping"),
    ("pool unknown field", with_pool(gpus=8), "pools[1].gpus: unknown field"),
    ("pool name missing", with_pool(name=None), "pools[1].name: required"),
    ("pool name bad", with_pool(name="A100"), "pools[1].name: must be a DNS label"),
    ("pool name dup", with_pool(name="a100"), "pools[1].name: duplicate pool name 'a100'"),
    ("count missing", with_pool(count=None), "pools[1].count: required"),
    ("count negative", with_pool(count=-3), "pools[1].count: must be a positive integer, got -3"),
    ("count zero", with_pool(count=0), "pools[1].count: must be a positive integer, got 0"),
    ("count bool", with_pool(count=True), "pools[1].count: must be a positive integer"),
    ("count string", with_pool(count="4"), "pools[1].count: must be a positive integer, got '4'"),
    ("gpus negative", with_pool(gpusPerNode=-1), "pools[1].gpusPerNode: must be an integer >= 0"),
    ("cpu bad", with_pool(cpu="lots"), "pools[1].cpu: must be a non-negative Kubernetes quantity"),
    ("cpu negative", with_pool(cpu="-1"), "pools[1].cpu: must be a non-negative"),
    ("memory bad unit", with_pool(memory="1TB"), "pools[1].memory: must be a non-negative"),
    ("pods zero", with_pool(pods=0), "pools[1].pods: must be a positive integer"),
    ("rack zero", with_pool(nodesPerRack=0), "pools[1].nodesPerRack: must be a positive integer"),
    ("block zero", with_pool(racksPerBlock=0), "pools[1].racksPerBlock: must be a positive"),
    ("cost negative", with_pool(costPerGpuHour=-1), "pools[1].costPerGpuHour: must be a number"),
    ("cost string", with_pool(costPerGpuHour="1"), "pools[1].costPerGpuHour: must be a number"),
    ("gpu model bad", with_pool(gpuModel="A 100"), "pools[1].gpuModel: must be a valid label"),
    ("labels not map", with_pool(labels=["a"]), "pools[1].labels: must be a mapping"),
    ("label key bad", with_pool(labels={"a b": "x"}), "pools[1].labels['a b']: not a valid"),
    ("label value bad", with_pool(labels={"team": 3}), "pools[1].labels.team: must be a valid"),
    ("taints not list", with_pool(taints={}), "pools[1].taints: must be a list"),
    ("taint effect bad", with_pool(taints=[{"key": "k", "effect": "Never"}]),
     "pools[1].taints[0].effect: must be one of NoSchedule"),
    ("taint key missing", with_pool(taints=[{"effect": "NoSchedule"}]),
     "pools[1].taints[0].key: must be a label key"),
    ("taint unknown field", with_pool(taints=[{"key": "k", "effect": "NoSchedule", "op": 1}]),
     "pools[1].taints[0].op: unknown field"),
    ("dra devices not bool", with_pool(draDevices="no"),
     "pools[1].draDevices: must be true or false, got 'no'"),
]


@pytest.mark.parametrize(("doc", "message"), [(d, m) for _, d, m in BAD], ids=[b[0] for b in BAD])
def test_bad_inputs_name_the_field(doc: Any, message: str) -> None:
    with pytest.raises(clusterspec.ClusterSpecError) as info:
        clusterspec.parse(doc)
    assert message in str(info.value)
    assert str(info.value).startswith(message.split(":")[0])


def test_load_reports_invalid_yaml(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("pools: [\n")
    with pytest.raises(clusterspec.ClusterSpecError, match="not valid YAML"):
        clusterspec.load(path)
