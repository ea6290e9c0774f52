"""The cluster description YAML: node pools of identical GPU nodes.

Why a module of its own: the dev cluster (which creates fake nodes in a real apiserver) and the
offline simulator (which builds nodes in memory) must agree on exactly which nodes a file
describes, down to names, labels and topology. Both read it through `load` / `parse` and
`ClusterSpec.nodes()`. The module is pure (pyyaml only, no `kubernetes`): it validates shape
and returns quantity *strings*; turning them into canonical units is the model's job.

Every error names the field path and the reason, e.g.
``pools[1].count: must be a positive integer, got -3``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scheduler.model.nodes import (
    DEFAULT_POOL_LABEL,
    DEFAULT_TOPOLOGY_LABELS,
    GPU_PRODUCT_LABEL,
    HOSTNAME_LABEL,
)
from scheduler.model.resources import GPU

DEFAULT_EPHEMERAL_STORAGE = "1Ti"
#: Set to "false" on the nodes of a pool with ``draDevices: false``: the dev cluster's fake DRA
#: driver (scheduler/tools/devcluster/dra.py) publishes no ResourceSlice for them. The node
#: carries the choice (not the driver's arguments) because nodes are added while it runs.
DRA_DEVICES_LABEL = "gangscheduler.io/dra-devices"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# A Kubernetes quantity: signed decimal number, optional exponent or SI / binary suffix.
_QUANTITY = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$",
                       re.ASCII)
# Label keys: optional DNS-subdomain prefix + "/" + name; values: <= 63 chars.
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")
_LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?)$")


class ClusterSpecError(ValueError):
    """A cluster description is invalid; the message starts with the field path."""


@dataclass(frozen=True, slots=True)
class TaintSpec:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class PoolSpec:
    name: str
    count: int
    gpu_model: str | None = None
    gpus_per_node: int = 8
    cpu: str = "64"
    memory: str = "512Gi"
    pods: int = 110
    nodes_per_rack: int = 8
    racks_per_block: int = 4
    cost_per_gpu_hour: float | None = None
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[TaintSpec, ...] = ()
    #: Whether its GPUs are published as DRA devices: in the dev cluster as well as
    #: ``nvidia.com/gpu`` (the default); in the simulator instead of it, and only when the
    #: cluster says ``gpusAsDevices`` (``ClusterSpec.device_pools``).
    dra_devices: bool = True


@dataclass(frozen=True, slots=True)
class NodeDescription:
    """One node as both consumers need it: labels and allocatable as Kubernetes strings."""

    name: str
    pool: str
    labels: dict[str, str] = field(hash=False)
    allocatable: dict[str, str] = field(hash=False)
    taints: tuple[TaintSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    pools: tuple[PoolSpec, ...]
    name: str | None = None
    pool_label: str = DEFAULT_POOL_LABEL
    topology_labels: tuple[str, ...] = DEFAULT_TOPOLOGY_LABELS
    #: The simulator offers the GPUs of every pool with ``draDevices`` (true by default) as
    #: DRA devices only (a ResourceSlice per node, no ``nvidia.com/gpu``), as a node runs
    #: either a GPU device plugin or a DRA driver. The dev cluster publishes both regardless.
    gpus_as_devices: bool = False

    def device_pools(self) -> frozenset[str]:
        """The pools whose GPUs the simulator offers as devices (none without
        ``gpusAsDevices``)."""
        if not self.gpus_as_devices:
            return frozenset()
        return frozenset(p.name for p in self.pools if p.dra_devices and p.gpus_per_node > 0)

    def node_count(self) -> int:
        return sum(p.count for p in self.pools)

    def nodes(self) -> Iterator[NodeDescription]:
        """Nodes in pool order then index order; names are ``{pool}-{index:04d}``."""
        for pool in self.pools:
            for index in range(pool.count):
                yield describe_node(self, pool, index)


def describe_node(spec: ClusterSpec, pool: PoolSpec, index: int) -> NodeDescription:
    name = f"{pool.name}-{index:04d}"
    rack_global = index // pool.nodes_per_rack
    block = rack_global // pool.racks_per_block
    rack = rack_global % pool.racks_per_block
    labels = dict(pool.labels)
    labels[HOSTNAME_LABEL] = name
    labels[spec.pool_label] = pool.name
    if pool.gpu_model:
        labels[GPU_PRODUCT_LABEL] = pool.gpu_model
    if not pool.dra_devices:
        labels[DRA_DEVICES_LABEL] = "false"
    # Outermost first: the first topology label gets the block, the second the rack; with
    # more than two, the last two do and the outer ones keep the pool's own labels.
    values = (f"{pool.name}-b{block}", f"{pool.name}-b{block}-r{rack}")
    generated = spec.topology_labels[-2:] if len(spec.topology_labels) > 2 else spec.topology_labels
    for key, value in zip(generated, values, strict=False):
        labels[key] = value
    allocatable = {
        "cpu": pool.cpu,
        "memory": pool.memory,
        "pods": str(pool.pods),
        "ephemeral-storage": DEFAULT_EPHEMERAL_STORAGE,
        GPU: str(pool.gpus_per_node),
    }
    return NodeDescription(name, pool.name, labels, allocatable, pool.taints)


def read_problem(exc: OSError | UnicodeDecodeError) -> str:
    """Why a text file could not be read, in a few words (no errno, no repeated path)."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
    if isinstance(exc, IsADirectoryError):
        return "is a directory, expected a file"
    return f"cannot read: {exc.strerror or exc}"


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML syntax error on one line: ``line 2, column 3: expected ... (while parsing ...)``.

    PyYAML's own text spans four lines and points at ``<unicode string>``; the caller names
    the file.
    """
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"not valid YAML: {where}{problem}" + (f" ({context})" if context else "")


def load(path: str | Path) -> ClusterSpec:
    """Read and validate a cluster description file; every error starts with the path."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ClusterSpecError(f"{path}: {read_problem(exc)}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ClusterSpecError(f"{path}: {yaml_problem(exc)}") from None
    try:
        return parse(data)
    except ClusterSpecError as exc:
        raise ClusterSpecError(f"{path}: {exc}") from None


def parse(data: Any) -> ClusterSpec:
    """Validate an already-decoded document (a mapping) into a `ClusterSpec`."""
    doc = _mapping(data, "<root>")
    _no_unknown(doc, "", {"name", "poolLabel", "topologyLabels", "pools", "gpusAsDevices"})
    name = _opt_str(doc, "name", "name")
    as_devices = doc.get("gpusAsDevices", False)
    if not isinstance(as_devices, bool):
        raise ClusterSpecError(f"gpusAsDevices: must be true or false, got {as_devices!r}")
    pool_label = _label_key(doc.get("poolLabel", DEFAULT_POOL_LABEL), "poolLabel")
    topo_raw = doc.get("topologyLabels", list(DEFAULT_TOPOLOGY_LABELS))
    if not isinstance(topo_raw, list):
        raise ClusterSpecError(f"topologyLabels: must be a list of label keys, got {topo_raw!r}")
    topology = tuple(_label_key(k, f"topologyLabels[{i}]") for i, k in enumerate(topo_raw))
    if len(set(topology)) != len(topology):
        raise ClusterSpecError(f"topologyLabels: duplicate keys in {list(topology)}")
    if HOSTNAME_LABEL in topology:
        raise ClusterSpecError(f"topologyLabels: {HOSTNAME_LABEL} is always the innermost "
                               "level, do not list it")
    pools_raw = doc.get("pools")
    if not isinstance(pools_raw, list) or not pools_raw:
        raise ClusterSpecError(f"pools: must be a non-empty list, got {pools_raw!r}")
    pools = tuple(_pool(p, f"pools[{i}]") for i, p in enumerate(pools_raw))
    seen: set[str] = set()
    for i, pool in enumerate(pools):
        if pool.name in seen:
            raise ClusterSpecError(f"pools[{i}].name: duplicate pool name {pool.name!r}")
        seen.add(pool.name)
        # Only block and rack are generated; any level outside them is one domain per pool.
        for key in topology[:-2]:
            if not dict(pool.labels).get(key):
                raise ClusterSpecError(
                    f"pools[{i}].labels: must set {key} to a non-empty value: with "
                    f"{len(topology)} topologyLabels the outer {len(topology) - 2} come from "
                    "each pool's labels (the last two get the generated block and rack)")
    return ClusterSpec(pools, name, pool_label, topology, as_devices)


_POOL_FIELDS = {
    "name", "count", "gpuModel", "gpusPerNode", "cpu", "memory", "pods", "nodesPerRack",
    "racksPerBlock", "costPerGpuHour", "labels", "taints", "draDevices",
}


def _pool(raw: Any, path: str) -> PoolSpec:
    m = _mapping(raw, path)
    _no_unknown(m, path + ".", _POOL_FIELDS)
    if "name" not in m:
        raise ClusterSpecError(f"{path}.name: required")
    name = m["name"]
    if not isinstance(name, str) or not _DNS_LABEL.match(name):
        raise ClusterSpecError(f"{path}.name: must be a DNS label (a-z, 0-9, '-'), got {name!r}")
    if "count" not in m:
        raise ClusterSpecError(f"{path}.count: required")
    dra = m.get("draDevices", True)
    if not isinstance(dra, bool):
        raise ClusterSpecError(f"{path}.draDevices: must be true or false, got {dra!r}")
    cost = m.get("costPerGpuHour")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float)
                             or not math.isfinite(cost) or cost < 0):
        raise ClusterSpecError(
            f"{path}.costPerGpuHour: must be a number >= 0, not nan or inf, got {cost!r}")
    return PoolSpec(
        name=name,
        count=_int(m["count"], f"{path}.count", minimum=1),
        gpu_model=_gpu_model(m.get("gpuModel"), f"{path}.gpuModel"),
        gpus_per_node=_int(m.get("gpusPerNode", 8), f"{path}.gpusPerNode", minimum=0),
        cpu=_quantity(m.get("cpu", "64"), f"{path}.cpu"),
        memory=_quantity(m.get("memory", "512Gi"), f"{path}.memory"),
        pods=_int(m.get("pods", 110), f"{path}.pods", minimum=1),
        nodes_per_rack=_int(m.get("nodesPerRack", 8), f"{path}.nodesPerRack", minimum=1),
        racks_per_block=_int(m.get("racksPerBlock", 4), f"{path}.racksPerBlock", minimum=1),
        cost_per_gpu_hour=None if cost is None else float(cost),
        labels=_labels(m.get("labels", {}), f"{path}.labels"),
        taints=_taints(m.get("taints", []), f"{path}.taints"),
        dra_devices=dra,
    )


def _mapping(raw: Any, path: str) -> Mapping[str, Any]:
    if raw is None and path == "<root>":
        raise ClusterSpecError(f"{path}: empty document, expected a mapping with pools")
    if not isinstance(raw, Mapping):
        raise ClusterSpecError(f"{path}: must be a mapping, got {type(raw).__name__}")
    return raw


def _no_unknown(m: Mapping[str, Any], prefix: str, known: set[str]) -> None:
    unknown = sorted(str(k) for k in m if k not in known)
    if unknown:
        raise ClusterSpecError(
            f"{prefix}{unknown[0]}: unknown field (known: {', '.join(sorted(known))})"
        )


def _opt_str(m: Mapping[str, Any], key: str, path: str) -> str | None:
    value = m.get(key)
    if value is not None and not isinstance(value, str):
        raise ClusterSpecError(f"{path}: must be a string, got {value!r}")
    return value


def _int(raw: Any, path: str, minimum: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ClusterSpecError(f"{path}: must be {what}, got {raw!r}")
    return raw


def _quantity(raw: Any, path: str) -> str:
    text = str(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else raw
    if not isinstance(text, str) or not _QUANTITY.match(text) or text.startswith("-"):
        raise ClusterSpecError(
            f"{path}: must be a non-negative Kubernetes quantity like '64' or '512Gi', got {raw!r}"
        )
    return text


def _gpu_model(raw: Any, path: str) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or not _LABEL_VALUE.match(raw) or len(raw) > 63:
        raise ClusterSpecError(f"{path}: must be a valid label value, got {raw!r}")
    return raw


def _label_key(raw: Any, path: str) -> str:
    if not isinstance(raw, str):
        raise ClusterSpecError(f"{path}: must be a label key string, got {raw!r}")
    prefix, slash, name = raw.rpartition("/")
    if (slash and not _LABEL_PREFIX.match(prefix)) or not _LABEL_NAME.match(name):
        raise ClusterSpecError(f"{path}: not a valid label key: {raw!r}")
    return raw


def _labels(raw: Any, path: str) -> tuple[tuple[str, str], ...]:
    m = _mapping(raw, path)
    out = []
    for key in sorted(m, key=str):
        _label_key(key, f"{path}[{key!r}]")
        value = m[key]
        if not isinstance(value, str) or not _LABEL_VALUE.match(value) or len(value) > 63:
            raise ClusterSpecError(f"{path}.{key}: must be a valid label value, got {value!r}")
        out.append((key, value))
    return tuple(out)


def _taints(raw: Any, path: str) -> tuple[TaintSpec, ...]:
    if not isinstance(raw, list):
        raise ClusterSpecError(f"{path}: must be a list, got {raw!r}")
    out = []
    for i, item in enumerate(raw):
        here = f"{path}[{i}]"
        t = _mapping(item, here)
        _no_unknown(t, here + ".", {"key", "value", "effect"})
        key = _label_key(t.get("key"), f"{here}.key")
        value = t.get("value", "")
        if not isinstance(value, str) or (value and not _LABEL_VALUE.match(value)):
            raise ClusterSpecError(f"{here}.value: must be a valid label value, got {value!r}")
        effect = t.get("effect")
        if effect not in TAINT_EFFECTS:
            raise ClusterSpecError(
                f"{here}.effect: must be one of {', '.join(TAINT_EFFECTS)}, got {effect!r}"
            )
        out.append(TaintSpec(key, value, effect))
    return tuple(out)
