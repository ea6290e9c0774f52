"""What the dev cluster's fake DRA driver publishes: devices, ResourceSlices, DeviceClasses.

Why a fake driver: Dynamic Resource Allocation (``resource.k8s.io/v1``, GA since Kubernetes
1.34) is allocated by whoever schedules the pod: kube-scheduler picks devices out of the
ResourceSlices that drivers publish, and writes the choice into the ResourceClaim's status. To
prove gang-scheduler against that (issue 35), the dev cluster needs slices that look like a
GPU driver's, on the kwok nodes, without a GPU or a kubelet plugin. This module builds them
from a Node object alone (its GPU count, product label and topology labels), so the driver
process (``dra_driver.py``) can follow nodes that tests add and remove while it runs.

The attribute names follow what NVIDIA's GPU driver publishes (``productName``,
``architecture``, ``driverVersion``, ``cudaComputeCapability``, ``uuid``, ``index``, a
``memory`` capacity), plus ``cliqueID``: the NVLink domain, the innermost topology label the
node carries (its rack, as in an NVL72 rack), so a claim can ask for devices that share one.
Nothing here talks to the apiserver; the functions return JSON-shaped dicts.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.model.demand import quantity_gpus
from scheduler.model.nodes import DEFAULT_TOPOLOGY_LABELS, GPU_PRODUCT_LABEL
from scheduler.model.resources import QuantityError
from scheduler.world.clusterspec import DRA_DEVICES_LABEL

DRIVER = "gpu.example.com"
API_VERSION = "resource.k8s.io/v1"
#: The hash of what the driver last wrote, so a re-list rewrites only what changed (the
#: apiserver defaults fields, so comparing specs would see a change every time).
SPEC_HASH_ANNOTATION = "gangscheduler.io/dra-spec-hash"
#: The product of a GPU node that has no ``nvidia.com/gpu.product`` label (the tests' ad hoc
#: nodes): still published, under a name that says it is made up.
UNLABELLED_PRODUCT = "fake-gpu"
DRIVER_VERSION = "580.95.5"
CUDA_DRIVER_VERSION = "13.0.0"


@dataclass(frozen=True, slots=True)
class GpuModel:
    """What a product name implies for the attributes (an approximation, good for tests)."""

    architecture: str
    memory: str  # a quantity
    compute_capability: str  # a semantic version


# Checked in order: the first fragment the product name contains wins (GB200 before B200).
_MODELS: tuple[tuple[str, GpuModel], ...] = (
    ("GB200", GpuModel("Blackwell", "186Gi", "10.0.0")),
    ("B200", GpuModel("Blackwell", "180Gi", "10.0.0")),
    ("H200", GpuModel("Hopper", "141Gi", "9.0.0")),
    ("H100", GpuModel("Hopper", "80Gi", "9.0.0")),
    ("A100", GpuModel("Ampere", "40Gi", "8.0.0")),
    ("L40S", GpuModel("Ada Lovelace", "48Gi", "8.9.0")),
    ("V100", GpuModel("Volta", "16Gi", "7.0.0")),
    ("T4", GpuModel("Turing", "16Gi", "7.5.0")),
)
_UNKNOWN = GpuModel("unknown", "16Gi", "0.0.0")
_MEMORY_IN_NAME = re.compile(r"(\d+)GB")


def gpu_model(product: str) -> GpuModel:
    """The model of *product*; a memory size in the name (``...-80GB``) overrides the table's."""
    model = next((m for fragment, m in _MODELS if fragment in product.upper()), _UNKNOWN)
    sized = _MEMORY_IN_NAME.search(product)
    if sized:
        model = GpuModel(model.architecture, f"{sized.group(1)}Gi", model.compute_capability)
    return model


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
    """The node's NVLink domain: the innermost of *topology_labels* it carries, else itself."""
    labels = node.get("metadata", {}).get("labels") or {}
    for key in reversed(topology_labels):
        if labels.get(key):
            return str(labels[key])
    return str(node["metadata"]["name"])


def devices(node: Mapping[str, Any],
            topology_labels: Sequence[str] = DEFAULT_TOPOLOGY_LABELS) -> list[dict[str, Any]]:
    """One device per GPU of *node*, ``gpu-0`` ... ``gpu-N``."""
    name = str(node["metadata"]["name"])
    product = product_of(node)
    model = gpu_model(product)
    clique = clique_id(node, topology_labels)
    out = []
    for index in range(gpu_count(node)):
        gpu_uuid = uuid.uuid5(uuid.NAMESPACE_URL, f"{DRIVER}/{name}/{index}")
        out.append({
            "name": f"gpu-{index}",
            "attributes": {
                "index": {"int": index},
                "uuid": {"string": f"GPU-{gpu_uuid}"},
                "productName": {"string": product},
                "architecture": {"string": model.architecture},
                "brand": {"string": "Nvidia"},
                "driverVersion": {"version": DRIVER_VERSION},
                "cudaDriverVersion": {"version": CUDA_DRIVER_VERSION},
                "cudaComputeCapability": {"version": model.compute_capability},
                "pciBusID": {"string": f"0000:{0x18 + index * 0x10:02x}:00.0"},
                "cliqueID": {"string": clique},
            },
            "capacity": {"memory": {"value": model.memory}},
        })
    return out


def slice_name(node_name: str) -> str:
    return f"{node_name}-{DRIVER.replace('.', '-')}"


def resource_slice(node: Mapping[str, Any], generation: int = 1,
                   topology_labels: Sequence[str] = DEFAULT_TOPOLOGY_LABELS) -> dict[str, Any]:
    """The one ResourceSlice of *node* (its own pool, named after it), owned by the Node so
    the garbage collector deletes it with the node even if the driver is not running."""
    meta = node["metadata"]
    spec = {
        "driver": DRIVER, "nodeName": meta["name"],
        "pool": {"name": meta["name"], "generation": generation, "resourceSliceCount": 1},
        "devices": devices(node, topology_labels),
    }
    return {
        "apiVersion": API_VERSION, "kind": "ResourceSlice",
        "metadata": {
            "name": slice_name(meta["name"]),
            "annotations": {SPEC_HASH_ANNOTATION: spec_hash(spec, str(meta["uid"]))},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": meta["name"],
                                 "uid": meta["uid"], "controller": True}],
        },
        "spec": spec,
    }


def spec_hash(spec: Mapping[str, Any], owner_uid: str) -> str:
    """A digest of a slice's spec without the pool generation (which every rewrite bumps),
    and of its owner: a node deleted and made again under the same name gets its slice
    rewritten with the new owner, or the garbage collector would delete it."""
    content = {**spec, "pool": {**spec["pool"], "generation": None}, "owner": owner_uid}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


def class_name(product: str) -> str:
    """``NVIDIA-H100-80GB-HBM3`` -> ``nvidia-h100-80gb-hbm3.gpu.example.com``."""
    slug = re.sub(r"[^a-z0-9]+", "-", product.lower()).strip("-") or "gpu"
    return f"{slug[:63].rstrip('-')}.{DRIVER}"


def device_class(product: str | None) -> dict[str, Any]:
    """A DeviceClass selecting this driver's devices: all of them (*product* None, named
    after the driver) or those of one product."""
    expression = f'device.driver == "{DRIVER}"'
    if product is not None:
        expression += f' && device.attributes["{DRIVER}"].productName == {json.dumps(product)}'
    return {
        "apiVersion": API_VERSION, "kind": "DeviceClass",
        "metadata": {"name": DRIVER if product is None else class_name(product)},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }
