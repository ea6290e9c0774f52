"""What the fake DRA driver publishes for a node: one device per GPU with the attributes a GPU
driver gives, its NVLink domain from the node's topology, nothing for a node without GPUs or
whose pool said ``draDevices: false``; and DeviceClasses whose CEL names driver and product."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.kube.read.slices_convert import resource_slice
from scheduler.tools.devcluster import dra
from scheduler.world import clusterspec

RACK = "topology.gangscheduler.io/rack"
BLOCK = "topology.gangscheduler.io/block"


def node(name: str = "h100-0000", gpus: str = "8", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": "u-1", "labels": dict(labels)},
            "status": {"allocatable": {"nvidia.com/gpu": gpus, "cpu": "64"}}}


def test_a_described_node_gets_one_device_per_gpu_with_its_rack_as_nvlink_domain() -> None:
    spec = clusterspec.parse({"pools": [{"name": "h100", "count": 9, "gpusPerNode": 4,
                                         "gpuModel": "NVIDIA-H100-80GB-HBM3"}]})
    described = list(spec.nodes())[8]  # the second rack of the first block
    body = {"metadata": {"name": described.name, "uid": "u", "labels": described.labels},
            "status": {"allocatable": described.allocatable}}
    devices = dra.devices(body, spec.topology_labels)
    assert [d["name"] for d in devices] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    first = devices[0]["attributes"]
    assert first["productName"] == {"string": "NVIDIA-H100-80GB-HBM3"}
    assert first["architecture"] == {"string": "Hopper"}
    assert first["driverVersion"] == {"version": dra.DRIVER_VERSION}
    assert first["cliqueID"] == {"string": "h100-b0-r1"}
    assert [d["attributes"]["index"] for d in devices] == [{"int": i} for i in range(4)]
    assert devices[0]["capacity"] == {"memory": {"value": "80Gi"}}
    assert len({d["attributes"]["uuid"]["string"] for d in devices}) == 4


@pytest.mark.parametrize(("product", "architecture", "memory"), [
    ("NVIDIA-A100-SXM4-80GB", "Ampere", "80Gi"),
    ("NVIDIA-A100-SXM4-40GB", "Ampere", "40Gi"),
    ("Tesla-V100-SXM2-32GB", "Volta", "32Gi"),
    ("NVIDIA-GB200", "Blackwell", "186Gi"),
    ("NVIDIA-B200", "Blackwell", "180Gi"),
    ("something-else", "unknown", "16Gi"),
])
def test_the_product_name_gives_architecture_and_memory(product: str, architecture: str,
                                                         memory: str) -> None:
    model = dra.gpu_model(product)
    assert (model.architecture, model.memory) == (architecture, memory)


def test_which_nodes_publish() -> None:
    assert dra.publishes(node())
    assert not dra.publishes(node(gpus="0"))
    assert not dra.publishes({"metadata": {"name": "cpu-only"}, "status": {}})
    assert not dra.publishes(node(**{clusterspec.DRA_DEVICES_LABEL: "false"}))


def test_an_unlabelled_node_is_its_own_domain_and_a_made_up_product() -> None:
    bare = node("adhoc", gpus="2")
    assert dra.clique_id(bare) == "adhoc"
    assert dra.product_of(bare) == dra.UNLABELLED_PRODUCT
    assert dra.clique_id(node(**{BLOCK: "b0"})) == "b0"  # the innermost level it carries


def test_the_slice_is_the_node_pool_owned_by_the_node() -> None:
    body = dra.resource_slice(node(), generation=3)
    assert body["metadata"]["name"] == "h100-0000-gpu-example-com"
    assert body["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert body["spec"]["nodeName"] == "h100-0000"
    assert body["spec"]["pool"] == {"name": "h100-0000", "generation": 3, "resourceSliceCount": 1}


def test_the_spec_hash_ignores_the_generation_but_not_the_devices_or_owner() -> None:
    def digest(**kwargs: Any) -> str:
        return str(dra.resource_slice(**kwargs)["metadata"]["annotations"][
            dra.SPEC_HASH_ANNOTATION])

    assert digest(node=node(), generation=1) == digest(node=node(), generation=7)
    assert digest(node=node()) != digest(node=node(gpus="4"))
    assert digest(node=node(**{RACK: "r0"})) != digest(node=node(**{RACK: "r1"}))
    again = node()
    again["metadata"]["uid"] = "u-2"  # the same node made again
    assert digest(node=node()) != digest(node=again)


def test_device_classes_select_the_driver_and_one_product() -> None:
    generic = dra.device_class(None)
    assert generic["metadata"]["name"] == "gpu.example.com"
    assert generic["spec"]["selectors"] == [
        {"cel": {"expression": 'device.driver == "gpu.example.com"'}}]
    h100 = dra.device_class("NVIDIA-H100-80GB-HBM3")
    assert h100["metadata"]["name"] == "nvidia-h100-80gb-hbm3.gpu.example.com"
    assert h100["spec"]["selectors"][0]["cel"]["expression"] == (
        'device.driver == "gpu.example.com" && '
        'device.attributes["gpu.example.com"].productName == "NVIDIA-H100-80GB-HBM3"')


def test_a_node_labelled_shared_publishes_shareable_gpus_that_our_reader_accepts() -> None:
    """Off by default (every other node's GPUs stay whole); on, each GPU allows multiple
    allocations and its memory is taken in whole GiB, all of it by a request naming none."""
    assert "allowMultipleAllocations" not in dra.devices(node())[0]
    shared = node(**{dra.SHARED_GPUS_LABEL: "true"})
    device = dra.devices(shared)[0]
    assert device["allowMultipleAllocations"] is True
    assert device["capacity"]["memory"]["requestPolicy"] == {
        "default": "16Gi", "validRange": {"min": "1Gi", "max": "16Gi", "step": "1Gi"}}
    read = resource_slice(dra.resource_slice(shared)).devices[0]
    assert read.shareable and not read.unsupported and read.policies


def test_a_mig_node_publishes_one_pool_of_device_and_counter_slices_with_one_digest() -> None:
    """Devices and counter sets in slices of their own (the 1.36 API allows one or the
    other), one pool at one generation, every slice carrying the digest of them all: a
    change to any of them rewrites the node's pool."""
    mig = node(gpus="2", **{dra.MIG_GPUS_LABEL: "true"})
    devices, counters = dra.resource_slices(mig, generation=4)
    assert [s["metadata"]["name"] for s in (devices, counters)] == [
        dra.slice_name("h100-0000"), dra.slice_name("h100-0000") + "-counters-0"]
    assert {s["spec"]["pool"]["generation"] for s in (devices, counters)} == {4}
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in (devices, counters)} == {2}
    assert "sharedCounters" not in devices["spec"] and "devices" not in counters["spec"]
    assert [c["name"] for c in counters["spec"]["sharedCounters"]] == ["gpu-0", "gpu-1"]
    assert len(devices["spec"]["devices"]) == 28  # per GPU: whole + 7 + 3 + 2 + 1 MIG
    digest = {s["metadata"]["annotations"][dra.SPEC_HASH_ANNOTATION] for s in (devices,
                                                                                 counters)}
    assert len(digest) == 1
    other = dra.resource_slices(node(gpus="3", **{dra.MIG_GPUS_LABEL: "true"}))
    assert other[0]["metadata"]["annotations"][dra.SPEC_HASH_ANNOTATION] not in digest
    assert len(dra.resource_slices(node(gpus="2"))) == 1  # unlabelled: one slice as before
