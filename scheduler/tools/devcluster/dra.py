"""What the dev cluster's fake DRA driver publishes: ResourceSlices and DeviceClasses, as JSON.

Why a fake driver: Dynamic Resource Allocation (``resource.k8s.io/v1``, GA since Kubernetes
1.34) is allocated by whoever schedules the pod: kube-scheduler picks devices out of the
ResourceSlices that drivers publish, and writes the choice into the ResourceClaim's status. To
prove gang-scheduler against that (issue 35), the dev cluster needs slices that look like a
GPU driver's, on the kwok nodes, without a GPU or a kubelet plugin. This module builds them
from a Node object alone (its GPU count, product label and topology labels), so the driver
process (``dra_driver.py``) can follow nodes that tests add and remove while it runs.

Which devices a node has, and their attributes, is decided in ``scheduler.world.gpu_devices``
(the simulator publishes the same ones); this edge reads a Node's JSON and writes the
objects' JSON. Nothing here talks to the apiserver.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.model.demand import quantity_gpus
from scheduler.model.devices import AttributeValue, Version
from scheduler.model.nodes import DEFAULT_TOPOLOGY_LABELS, GPU_PRODUCT_LABEL
from scheduler.model.resources import QuantityError
from scheduler.tools.devcluster import dra_mig
from scheduler.world import gpu_devices
from scheduler.world.clusterspec import DRA_DEVICES_LABEL
from scheduler.world.gpu_devices import (
    CUDA_DRIVER_VERSION,
    DRIVER,
    DRIVER_VERSION,
    UNLABELLED_PRODUCT,
    GpuModel,
    class_name,
    gpu_model,
    slice_name,
)

API_VERSION = "resource.k8s.io/v1"
#: The hash of what the driver last wrote, so a re-list rewrites only what changed (the
#: apiserver defaults fields, so comparing specs would see a change every time).
SPEC_HASH_ANNOTATION = "gangscheduler.io/dra-spec-hash"
#: A node label: ``"true"`` publishes the node's GPUs as shareable (``allowMultipleAllocations``
#: with a consumable ``memory`` capacity: DRA consumable capacity, beta and on by default in
#: Kubernetes 1.36). Off unless a node says so, so every other test sees whole GPUs.
SHARED_GPUS_LABEL = "gangscheduler.io/dra-shared-gpus"
#: The steps a share of a shareable GPU's memory is counted in (its ``requestPolicy``).
SHARE_STEP = "1Gi"

#: A node label: ``"true"`` publishes the node's GPUs partitionable, as MIG devices
#: consuming counters (``dra_mig``).
MIG_GPUS_LABEL = dra_mig.MIG_GPUS_LABEL

__all__ = ["CUDA_DRIVER_VERSION", "DRIVER", "DRIVER_VERSION", "UNLABELLED_PRODUCT", "GpuModel",
           "class_name", "gpu_model", "slice_name"]


def product_of(node: Mapping[str, Any]) -> str:
    labels = node.get("metadata", {}).get("labels") or {}
    return str(labels.get(GPU_PRODUCT_LABEL) or UNLABELLED_PRODUCT)


def gpu_count(node: Mapping[str, Any]) -> int:
    """The node's allocatable ``nvidia.com/gpu`` (0 when missing or malformed)."""
    allocatable = node.get("status", {}).get("allocatable") or {}
    try:
        return quantity_gpus(allocatable)
    except QuantityError:
        return 0


def publishes(node: Mapping[str, Any]) -> bool:
    """Whether the driver publishes devices for *node*: it has GPUs and its pool did not say
    ``draDevices: false`` (clusterspec)."""
    labels = node.get("metadata", {}).get("labels") or {}
    return gpu_count(node) > 0 and labels.get(DRA_DEVICES_LABEL) != "false"


def clique_id(node: Mapping[str, Any],
              topology_labels: Sequence[str] = DEFAULT_TOPOLOGY_LABELS) -> str:
    """The node's NVLink domain (``gpu_devices.clique_id``)."""
    labels = node.get("metadata", {}).get("labels") or {}
    return gpu_devices.clique_id(str(node["metadata"]["name"]), labels, topology_labels)


def _attribute(value: AttributeValue) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, Version):
        return {"version": value.text}
    return {"string": value}


def devices(node: Mapping[str, Any],
            topology_labels: Sequence[str] = DEFAULT_TOPOLOGY_LABELS) -> list[dict[str, Any]]:
    """One device per GPU of *node*, ``gpu-0`` ... ``gpu-N`` (``gpu_devices.gpu_devices``)."""
    found = gpu_devices.gpu_devices(str(node["metadata"]["name"]), product_of(node),
                                    gpu_count(node), clique_id(node, topology_labels))
    shared = shares_gpus(node)
    out = []
    for d in found:
        device: dict[str, Any] = {"name": d.name,
                                  "attributes": {k: _attribute(v) for k, v in d.attributes},
                                  "capacity": {"memory": _memory(d.memory, shared)}}
        if shared:
            device["allowMultipleAllocations"] = True
        out.append(device)
    return out


def shares_gpus(node: Mapping[str, Any]) -> bool:
    """Whether *node*'s GPUs are published shareable (``SHARED_GPUS_LABEL``)."""
    labels = node.get("metadata", {}).get("labels") or {}
    return labels.get(SHARED_GPUS_LABEL) == "true"


def _memory(value: str, shared: bool) -> dict[str, Any]:
    """A GPU's ``memory`` capacity. Shared: a request takes whole GiB of it (rounded up), and
    one that names no amount takes all of it, so a plain request still gets a whole GPU."""
    if not shared:
        return {"value": value}
    return {"value": value, "requestPolicy": {
        "default": value, "validRange": {"min": SHARE_STEP, "max": value, "step": SHARE_STEP}}}


def resource_slices(node: Mapping[str, Any], generation: int = 1,
                    topology_labels: Sequence[str] = DEFAULT_TOPOLOGY_LABELS,
                    ) -> list[dict[str, Any]]:
    """The ResourceSlices of *node*'s pool (named after it), each owned by the Node so the
    garbage collector deletes them with the node even if the driver is not running: one
    slice of devices, or for partitionable GPUs (``dra_mig``) device and counter slices.
    Each carries the digest of them all (``spec_hash``)."""
    meta = node["metadata"]
    found = devices(node, topology_labels)
    if dra_mig.partitions_gpus(node):
        specs = dra_mig.pool_specs(meta["name"], found, generation)
    else:
        specs = [("", {"driver": DRIVER, "nodeName": meta["name"], "devices": found,
                       "pool": {"name": meta["name"], "generation": generation,
                                "resourceSliceCount": 1}})]
    digest = spec_hash([spec for _, spec in specs], str(meta["uid"]))
    return [{
        "apiVersion": API_VERSION, "kind": "ResourceSlice",
        "metadata": {
            "name": slice_name(meta["name"]) + suffix,
            "annotations": {SPEC_HASH_ANNOTATION: digest},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": meta["name"],
                                 "uid": meta["uid"], "controller": True}],
        },
        "spec": spec,
    } for suffix, spec in specs]


def resource_slice(node: Mapping[str, Any], generation: int = 1,
                   topology_labels: Sequence[str] = DEFAULT_TOPOLOGY_LABELS) -> dict[str, Any]:
    """The first (for whole or shareable GPUs, the one) ResourceSlice of *node*."""
    return resource_slices(node, generation, topology_labels)[0]


def spec_hash(specs: Sequence[Mapping[str, Any]], owner_uid: str) -> str:
    """A digest of a pool's slice specs without the pool generation (which every rewrite
    bumps), and of their owner: a node deleted and made again under the same name gets its
    slices rewritten with the new owner, or the garbage collector would delete them."""
    content = {"specs": [{**spec, "pool": {**spec["pool"], "generation": None}}
                         for spec in specs], "owner": owner_uid}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


def device_class(product: str | None) -> dict[str, Any]:
    """A DeviceClass selecting this driver's devices: all of them (*product* None, named
    after the driver) or those of one product (``gpu_devices.device_class``)."""
    cls = gpu_devices.device_class(product)
    return {
        "apiVersion": API_VERSION, "kind": "DeviceClass",
        "metadata": {"name": cls.name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in cls.selectors]},
    }
