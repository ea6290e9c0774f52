"""A GPU node's devices as a DRA driver would publish them, derived from what the cluster
description says of the node (its GPU count, product and topology).

Why one pure module: the dev cluster's fake DRA driver (``scheduler/tools/devcluster/dra.py``,
which writes ResourceSlices and DeviceClasses to a real apiserver) and the simulator (which
puts the same objects in its cache) must publish the same devices for the same node, down to
names, attributes and classes, so a what-if run and a live test see one cluster. This module
decides them once, as model values; the dev cluster's edge turns them into JSON.

The attribute names follow what NVIDIA's GPU driver publishes (``productName``,
``architecture``, ``driverVersion``, ``cudaComputeCapability``, ``uuid``, ``index``, a
``memory`` capacity), plus ``cliqueID``: the NVLink domain, the innermost topology label the
node carries (its rack, as in an NVL72 rack), so a claim can ask for devices that share one.
The values are made up from the product name (good enough for tests and capacity planning).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.model.devices import (
    AttributeValue,
    Device,
    DeviceClass,
    DeviceSlice,
    PoolRef,
    Version,
    qualify,
)
from scheduler.model.nodes import DEFAULT_TOPOLOGY_LABELS
from scheduler.model.resources import exact_quantity

DRIVER = "gpu.example.com"
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


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One GPU as the driver publishes it: attributes by the driver's own (unqualified)
    names, in publishing order, and its memory as a quantity."""

    name: str
    attributes: tuple[tuple[str, AttributeValue], ...]
    memory: str


def clique_id(node: str, labels: Mapping[str, str],
              topology_labels: Sequence[str] = DEFAULT_TOPOLOGY_LABELS) -> str:
    """The node's NVLink domain: the innermost of *topology_labels* it carries, else itself."""
    for key in reversed(topology_labels):
        if labels.get(key):
            return str(labels[key])
    return node


def gpu_devices(node: str, product: str, count: int, clique: str) -> tuple[GpuDevice, ...]:
    """One device per GPU of *node*, ``gpu-0`` ... ``gpu-N``."""
    model = gpu_model(product)
    out = []
    for index in range(count):
        gpu_uuid = uuid.uuid5(uuid.NAMESPACE_URL, f"{DRIVER}/{node}/{index}")
        out.append(GpuDevice(f"gpu-{index}", (
            ("index", index),
            ("uuid", f"GPU-{gpu_uuid}"),
            ("productName", product),
            ("architecture", model.architecture),
            ("brand", "Nvidia"),
            ("driverVersion", Version(DRIVER_VERSION)),
            ("cudaDriverVersion", Version(CUDA_DRIVER_VERSION)),
            ("cudaComputeCapability", Version(model.compute_capability)),
            ("pciBusID", f"0000:{0x18 + index * 0x10:02x}:00.0"),
            ("cliqueID", clique),
        ), model.memory))
    return tuple(out)


def model_device(gpu: GpuDevice) -> Device:
    """*gpu* as the allocator reads a published device: names qualified by the driver,
    sorted, capacity exact (what the apiserver edge's converter makes of the JSON)."""
    attributes = sorted((qualify(k, DRIVER), v) for k, v in gpu.attributes)
    return Device(gpu.name, tuple(attributes),
                  ((qualify("memory", DRIVER), exact_quantity(gpu.memory)),))


def slice_name(node: str) -> str:
    return f"{node}-{DRIVER.replace('.', '-')}"


def node_slice(node: str, product: str, count: int, clique: str,
               generation: int = 1) -> DeviceSlice:
    """The node's one ResourceSlice: its own pool, named after it."""
    return DeviceSlice(slice_name(node), DRIVER, PoolRef(node, generation, 1),
                       tuple(model_device(d) for d in gpu_devices(node, product, count, clique)),
                       node_name=node)


def class_name(product: str) -> str:
    """``NVIDIA-H100-80GB-HBM3`` -> ``nvidia-h100-80gb-hbm3.gpu.example.com``."""
    slug = re.sub(r"[^a-z0-9]+", "-", product.lower()).strip("-") or "gpu"
    return f"{slug[:63].rstrip('-')}.{DRIVER}"


def class_selector(product: str | None) -> str:
    """The CEL selector of the class for *product* (None: every device of the driver)."""
    expression = f'device.driver == "{DRIVER}"'
    if product is not None:
        expression += f' && device.attributes["{DRIVER}"].productName == {json.dumps(product)}'
    return expression


def device_class(product: str | None) -> DeviceClass:
    """The DeviceClass of one product (*product* None: all of the driver's, named after it)."""
    return DeviceClass(DRIVER if product is None else class_name(product),
                       (class_selector(product),))
