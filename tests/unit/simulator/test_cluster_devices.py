"""A cluster description's GPUs as DRA devices in the simulator (issue 35, item 7): which
nodes get a ResourceSlice, with how many devices and which attributes, the DeviceClasses, the
nodes left without ``nvidia.com/gpu``, and the same devices the dev cluster's fake driver
publishes for the same node (read back through the live feed's converter)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.kube.read import devices_convert, slices_convert
from scheduler.model.devices import Version
from scheduler.model.resources import GPU
from scheduler.tools.devcluster import dra
from scheduler.world import clusterspec, gpu_devices
from simulator.devices import cluster_devices, node_gpus
from simulator.workload import nodes_from_spec

H100 = "NVIDIA-H100-80GB-HBM3"
D = gpu_devices.DRIVER


def pool(name: str, count: int = 2, gpus: int = 4, **more: Any) -> dict[str, Any]:
    return {"name": name, "count": count, "gpusPerNode": gpus, **more}


@dataclass(frozen=True)
class Case:
    name: str
    doc: dict[str, Any]
    slices: dict[str, int]  # node -> devices
    classes: tuple[str, ...]


CASES = [
    Case("off by default", {"pools": [pool("h100", gpuModel=H100)]}, {}, ()),
    Case("every pool", {"gpusAsDevices": True, "pools": [pool("h100", gpuModel=H100)]},
         {"h100-0000": 4, "h100-0001": 4}, (f"nvidia-h100-80gb-hbm3.{D}", D)),
    Case("a pool opts out", {"gpusAsDevices": True, "pools": [
        pool("h100", 1, gpuModel=H100), pool("a100", 1, 8, gpuModel="A100", draDevices=False)]},
         {"h100-0000": 4}, (f"nvidia-h100-80gb-hbm3.{D}", D)),
    Case("a class per model", {"gpusAsDevices": True, "pools": [
        pool("h100", 1, gpuModel=H100), pool("a100", 1, 8, gpuModel="NVIDIA-A100-SXM4-40GB")]},
         {"h100-0000": 4, "a100-0000": 8},
         (f"nvidia-a100-sxm4-40gb.{D}", f"nvidia-h100-80gb-hbm3.{D}", D)),
    Case("no model: made up", {"gpusAsDevices": True, "pools": [pool("x", 1, 2)]},
         {"x-0000": 2}, (f"fake-gpu.{D}", D)),
    Case("a CPU pool has none", {"gpusAsDevices": True, "pools": [pool("cpu", 1, 0)]}, {}, ()),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_cluster_description_to_slices(case: Case) -> None:
    spec = clusterspec.parse(case.doc)
    found = cluster_devices(spec)
    assert {s.node_name: len(s.devices) for s in found.slices} == case.slices
    assert dict(found.gpus) == case.slices
    assert tuple(sorted(c.name for c in found.classes)) == tuple(sorted(case.classes))
    nodes = nodes_from_spec(spec)
    # A node's GPUs are devices or nvidia.com/gpu, never both; the simulator counts either.
    for node in nodes:
        if node.name in case.slices:
            assert GPU not in node.allocatable, node.name
    described = {d.name: int(d.allocatable[GPU]) for d in spec.nodes()}
    assert node_gpus(nodes, found) == described


def test_devices_carry_the_drivers_attributes_and_the_rack_as_nvlink_domain() -> None:
    spec = clusterspec.parse({"gpusAsDevices": True,
                              "pools": [pool("h100", 9, 4, gpuModel=H100)]})
    s = {s.node_name: s for s in cluster_devices(spec).slices}["h100-0008"]
    assert (s.driver, s.pool.name, s.name) == (D, "h100-0008", "h100-0008-gpu-example-com")
    first = s.devices[0]
    assert [d.name for d in s.devices] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert first.attribute(f"{D}/productName") == H100
    assert first.attribute(f"{D}/architecture") == "Hopper"
    assert first.attribute(f"{D}/cliqueID") == "h100-b0-r1"  # the second rack
    assert first.attribute(f"{D}/cudaComputeCapability") == Version("9.0.0")
    assert dict(first.capacity)[f"{D}/memory"] == 80 * 2**30


def test_the_simulator_publishes_what_the_dev_clusters_driver_does() -> None:
    spec = clusterspec.parse({"gpusAsDevices": True, "pools": [pool("h100", 3, gpuModel=H100)]})
    mine = {s.node_name: s for s in cluster_devices(spec).slices}
    for d in spec.nodes():
        body = dra.resource_slice({"metadata": {"name": d.name, "uid": "u", "labels": d.labels},
                                   "status": {"allocatable": d.allocatable}},
                                  topology_labels=spec.topology_labels)
        body["metadata"].pop("annotations")
        assert slices_convert.resource_slice(body) == mine[d.name]
    assert {c.name: c for c in cluster_devices(spec).classes} == {
        c.name: c for c in (devices_convert.device_class(dra.device_class(p))
                            for p in (None, H100))}


@pytest.mark.parametrize(("doc", "message"), [
    ({"gpusAsDevices": "yes", "pools": [pool("a")]}, "gpusAsDevices: must be true or false"),
    ({"pools": [pool("a", draDevices=1)]}, "pools[0].draDevices: must be true or false"),
])
def test_malformed_input_names_the_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(clusterspec.ClusterSpecError, match=message.replace("[", r"\[")):
        clusterspec.parse(doc)
