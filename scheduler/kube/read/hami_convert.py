"""HAMi's GPU-share convention read as consumable capacity (``scheduler.model.hami``).

Three readers, one per thing the convention writes on objects, each turning it into the
values the DRA allocator already places (so the rule "never over a GPU's capacity" stays in
``scheduler.model.device_capacity``):

- ``node_gpus``: a node's ``hami.io/node-nvidia-register`` annotation -> a ``DeviceSlice``
  of shareable GPUs (pool: the node);
- ``share_requests``: a pod's containers asking ``nvidia.com/gpumem`` / ``gpucores`` -> one
  request per such container, for ``nvidia.com/gpu`` devices each holding that share;
- ``allocation_of``: a bound pod's ``hami.io/vgpu-devices-allocated`` -> the shares it holds.

``share_claim`` puts the last two together as the pod's own claim (``claim_name``), a claim
no apiserver holds: its allocation is written as the pod's annotations, never as a status.

Bad values raise ``FieldError`` naming the field (``metadata.annotations[key][i].devmem``,
``spec.containers[0].resources.limits[nvidia.com/gpumem]``) and why: a node whose
annotation cannot be read offers no shares, and a pod whose ask cannot be read waits with
that reason rather than be placed as if it asked for nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from scheduler.kube.read.fields import FieldError
from scheduler.model import hami
from scheduler.model.demand import gpus_of
from scheduler.model.devices import (
    Allocation,
    Ask,
    ClaimSpec,
    Consumer,
    Device,
    DeviceId,
    DeviceResult,
    DeviceSlice,
    PoolRef,
    Request,
    ResourceClaim,
)
from scheduler.model.resources import GPU, QuantityError, parse_quantity

#: Most MiB or tasks one field may hold (HAMi keeps them in int32).
_INT32 = 2**31 - 1
#: Modes whose GPUs are shared by memory and cores (MIG and the rest are not offered).
_SHARED_MODES = ("", "hami-core")
_DEVICE_RESOURCES = (GPU, hami.GPUMEM, hami.GPUCORES)
_SHARES = uuid.UUID("0d1f6c1e-3b8a-4f5e-a7c2-6e9b4d2a8f10")


def claim_name(pod: str) -> str:
    """The name of the claim standing for *pod*'s shares: ``~`` is in no API object's
    name, so it never meets a ResourceClaim of the apiserver."""
    return f"{pod}~{hami.DRIVER}"


def _int(raw: Any, path: str, least: int, most: int = _INT32) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not least <= raw <= most:
        raise FieldError(path, f"expected an integer in {least}..{most}, got {raw!r}")
    return raw


def _gpu(raw: Any, path: str) -> Device | None:
    """One registered GPU as a shareable device; None when it is unhealthy (not offered)."""
    if not isinstance(raw, Mapping):
        raise FieldError(path, f"expected an object, got {type(raw).__name__}")
    gid = raw.get("id")
    if not isinstance(gid, str) or not gid or any(c in gid for c in ",:;/"):
        raise FieldError(f"{path}.id", f"expected a GPU UUID, got {gid!r}")
    index = _int(raw.get("index", 0), f"{path}.index", 0)
    slots = _int(raw.get("count"), f"{path}.count", 1)
    memory = _int(raw.get("devmem"), f"{path}.devmem", 1)
    cores = _int(raw.get("devcore", 100), f"{path}.devcore", 1)
    kind = raw.get("type", "")
    mode = raw.get("mode", "")
    if not isinstance(kind, str) or not isinstance(mode, str):
        raise FieldError(f"{path}.type", "expected text")
    if raw.get("health", True) is not True:
        return None
    attributes = ((f"{hami.DRIVER}/index", index), (f"{hami.DRIVER}/type", kind),
                  (f"{hami.DRIVER}/uuid", gid))
    capacity = ((hami.CORES, Fraction(cores)), (hami.MEMORY, Fraction(memory * hami.MIB)),
                (hami.SLOTS, Fraction(slots)))
    unsupported = () if mode in _SHARED_MODES else (f"{path}.mode: {mode}",)
    return Device(gid, attributes, capacity, unsupported, True, hami.POLICIES)


def node_gpus(node: str, annotations: Mapping[str, str]) -> DeviceSlice | None:
    """The GPUs *node* registered for sharing (healthy ones, by index), or None when it
    registered none."""
    text = annotations.get(hami.HAMI_REGISTER_ANNOTATION)
    if text is None:
        return None
    path = f"metadata.annotations[{hami.HAMI_REGISTER_ANNOTATION}]"
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise FieldError(path, f"not JSON: {e}") from None
    if not isinstance(raw, list):
        raise FieldError(path, f"expected a list of GPUs, got {type(raw).__name__}")
    gpus = [g for i, r in enumerate(raw) if (g := _gpu(r, f"{path}[{i}]")) is not None]
    seen: set[object] = set()
    for i, g in enumerate(gpus):
        for key in (g.name, g.attribute(f"{hami.DRIVER}/index")):
            if key in seen:
                raise FieldError(f"{path}[{i}]", f"GPU {key} registered twice")
            seen.add(key)
    if not gpus:
        return None
    gpus.sort(key=lambda g: g.attribute(f"{hami.DRIVER}/index"))  # type: ignore[arg-type,return-value]
    return DeviceSlice(f"{node}~{hami.DRIVER}", hami.DRIVER, PoolRef(node), tuple(gpus),
                       node_name=node)


def _amount(resources: Mapping[str, Any], name: str, path: str) -> int | None:
    """A container's amount of *name*: its limit, else its request (as HAMi reads them)."""
    for part in ("limits", "requests"):
        given = resources.get(part)
        if isinstance(given, Mapping) and name in given:
            where = f"{path}.{part}[{name}]"
            try:
                amount = parse_quantity(given[name], name)
            except QuantityError as e:
                raise FieldError(where, str(e)) from None
            return _int(amount, where, 0)
    return None


def _names_a_share(resources: Mapping[str, Any]) -> bool:
    """Does a container's resources name a share at all? (Every pod event asks: the quick
    answer for the many that do not.)"""
    for part in ("limits", "requests"):
        given = resources.get(part)
        if isinstance(given, dict) and (hami.GPUMEM in given or hami.GPUCORES in given
                                        or hami.GPUMEM_PERCENTAGE in given):
            return True
    return False


def share_requests(containers: Sequence[Any],
                   path: str = "spec.containers") -> tuple[Request, ...]:
    """One request per container that asks for a share of its GPUs (``nvidia.com/gpumem`` or
    ``gpucores`` beside ``nvidia.com/gpu``), named after the container; () when none does."""
    out = []
    for i, c in enumerate(containers):
        if not isinstance(c, dict):
            continue
        resources = c.get("resources")
        if not isinstance(resources, dict) or not _names_a_share(resources):
            continue
        where = f"{path}[{i}].resources"
        if _amount(resources, hami.GPUMEM_PERCENTAGE, where) is not None:
            raise FieldError(f"{where}.limits[{hami.GPUMEM_PERCENTAGE}]",
                             f"not supported: ask {hami.GPUMEM} in MiB")
        memory = _amount(resources, hami.GPUMEM, where)
        cores = _amount(resources, hami.GPUCORES, where)
        if memory is None and cores is None:
            continue
        gpus = gpus_of({GPU: _amount(resources, GPU, where) or 0})
        if gpus < 1:
            raise FieldError(f"{where}.limits[{GPU}]",
                             f"{hami.GPUMEM} / {hami.GPUCORES} are per GPU: ask at least 1")
        if memory == 0:
            raise FieldError(f"{where}.limits[{hami.GPUMEM}]", "0 MiB: leave it out for all")
        if cores is not None and cores > 100:
            raise FieldError(f"{where}.limits[{hami.GPUCORES}]",
                             f"a percent of one GPU, at most 100, got {cores}")
        capacity = {}
        if memory is not None:
            capacity[hami.MEMORY] = Fraction(memory * hami.MIB)
        if cores is not None:
            capacity[hami.CORES] = Fraction(cores)
        given = c.get("name")
        name = given if isinstance(given, str) and given else f"container-{i}"
        ask = Ask(name, hami.CLASS.name, count=gpus, capacity=tuple(sorted(capacity.items())))
        out.append(Request(name, (ask,)))
    return tuple(out)


def allocation_of(text: str, node: str, requests: Sequence[str]) -> Allocation:
    """The shares a pod bound to *node* holds, from its ``hami.io/vgpu-devices-allocated``
    *text*: segment *i* (``;``-separated) is the devices of container *i* (*requests*: the
    containers' names, in order), each ``UUID,type,MiB,cores`` (``:``-terminated)."""
    path = f"metadata.annotations[{hami.HAMI_ALLOCATED_ANNOTATION}]"
    results = []
    for ci, segment in enumerate(text.split(";")):
        for di, entry in enumerate(e for e in segment.split(":") if e):
            fields = entry.split(",")
            where = f"{path}: container {ci}, device {di}"
            if len(fields) < 4 or not fields[0]:
                raise FieldError(where, f"expected UUID,type,MiB,cores, got {entry!r}")
            if ci >= len(requests):
                raise FieldError(where, f"the pod has {len(requests)} containers")
            try:
                memory, cores = int(fields[2]), int(fields[3])
            except ValueError:
                raise FieldError(where, f"MiB and cores must be integers: {entry!r}") from None
            if memory < 0 or cores < 0:
                raise FieldError(where, f"negative MiB or cores: {entry!r}")
            device = DeviceId(hami.DRIVER, node, fields[0])
            consumed = ((hami.CORES, Fraction(cores)), (hami.MEMORY, Fraction(memory * hami.MIB)),
                        (hami.SLOTS, Fraction(1)))
            share = str(uuid.uuid5(_SHARES, f"{node}/{requests[ci]}/{di}/{entry}"))
            results.append(DeviceResult(requests[ci], device, False, share, consumed))
    return Allocation(tuple(results))


def share_claim(pod: Mapping[str, Any]) -> ResourceClaim | None:
    """The claim standing for a pod's GPU shares (allocated when the pod is bound and says
    which devices it holds), or None when it asks for no share."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    requests = share_requests(containers)
    if not requests:
        return None
    names = [c.get("name", f"container-{i}") if isinstance(c, Mapping) else ""
             for i, c in enumerate(containers)]
    annotations = meta.get("annotations") or {}
    node = spec.get("nodeName") or ""
    text = annotations.get(hami.HAMI_ALLOCATED_ANNOTATION)
    allocation = allocation_of(text, node, names) if node and isinstance(text, str) else None
    name, uid = str(meta.get("name", "")), str(meta.get("uid", ""))
    users = (Consumer("pods", name, uid),) if allocation is not None else ()
    return ResourceClaim(str(meta.get("namespace") or "default"), claim_name(name),
                         ClaimSpec(requests), uid=uid, allocation=allocation,
                         reserved_for=users)


def without_shared_gpus(spec: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """*spec* with the ``nvidia.com/gpu``, ``gpumem`` and ``gpucores`` entries of the
    containers asking for shares left out, and whether any container asks for shares.

    Their GPUs are devices of the pod's share claim, counted there and placed per GPU;
    counted again as extended resources, each would also take a whole GPU of the node's
    allocatable (HAMi's plugin advertises GPUs times tasks per GPU), and ``gpumem`` /
    ``gpucores`` are advertised by no node (the kubelet leaves out extended resources its
    node does not have: they are the share scheduler's)."""
    containers = spec.get("containers")
    if not isinstance(containers, list) or not share_requests(containers):
        return spec, False
    out = []
    for c in containers:
        resources = c.get("resources") if isinstance(c, Mapping) else None
        if not isinstance(resources, Mapping) or not any(
                isinstance(resources.get(p), Mapping)
                and (hami.GPUMEM in resources[p] or hami.GPUCORES in resources[p])
                for p in ("limits", "requests")):
            out.append(c)
            continue
        kept = {p: {k: v for k, v in resources[p].items() if k not in _DEVICE_RESOURCES}
                if isinstance(resources.get(p), Mapping) else resources.get(p)
                for p in resources}
        out.append({**c, "resources": kept})
    return {**spec, "containers": out}, True
