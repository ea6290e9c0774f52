"""Apiserver JSON -> device model: DeviceClasses, ResourceClaims and ResourceClaimTemplates
of ``resource.k8s.io/v1`` (Dynamic Resource Allocation, issue 35); ResourceSlices are read by
``slices_convert``, the fields both read by ``device_fields``.

Same contract as ``convert``: pure functions over dicts; a malformed object raises
``ConversionError`` naming the object and the field, and the feed keeps its last good state.

A field the allocator does not implement is not an error: the object is still read, with the
field's path in its ``unsupported`` list, so a claim that needs it waits with a reason naming
it and a device or pool that has it is not offered (``scheduler.model.devices`` says why).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from scheduler.kube.read.device_fields import (
    as_map,
    node_selector,
    quantity,
    string,
)
from scheduler.kube.read.fields import (
    FieldError,
    converted,
    read_int,
    read_list,
    read_map,
    read_name,
)
from scheduler.model.devices import (
    GPUS_PER_DEVICE_ANNOTATION,
    Allocation,
    AllocationMode,
    Ask,
    ClaimSpec,
    ClaimTemplate,
    Constraint,
    Consumer,
    DeviceClass,
    DeviceConfig,
    DeviceId,
    DeviceResult,
    Request,
    ResourceClaim,
    qualify,
)

#: Request fields we do not implement (a claim with one waits).
_ASK_UNSUPPORTED = ("tolerations",)


# Classes and claims -----------------------------------------------------------------------
def _selectors(raw: Mapping[str, Any], path: str) -> tuple[tuple[str, ...], list[str]]:
    out, unsupported = [], []
    for i, s in enumerate(read_list(raw, "selectors", f"{path}.selectors")):
        where = f"{path}.selectors[{i}]"
        cel = as_map(s, where).get("cel")
        if cel is None:
            unsupported.append(f"{where} (not a CEL selector)")
            continue
        out.append(string(as_map(cel, f"{where}.cel"), "expression", f"{where}.cel.expression"))
    return tuple(out), unsupported


def _gpus_per_device(meta: Mapping[str, Any], unsupported: list[str]) -> int:
    """The class's ``gangscheduler.io/gpus-per-device`` (1 when absent). A value that is
    not a whole number >= 0 makes the class unusable, naming the annotation: its claims
    wait with that reason rather than be charged a guess."""
    annotations = meta.get("annotations") or {}
    text = annotations.get(GPUS_PER_DEVICE_ANNOTATION) if isinstance(annotations, Mapping) \
        else None
    if text is None:
        return 1
    value = str(text).strip()
    if not value.isdigit():
        unsupported.append(f"metadata.annotations[{GPUS_PER_DEVICE_ANNOTATION}]: {text!r} is "
                           "not a whole number of GPUs (0 or more)")
        return 1
    return int(value)


def _configs(raw: Mapping[str, Any], path: str,
             claim: bool) -> tuple[tuple[DeviceConfig, ...], list[str]]:
    """A class's or a claim's ``config`` entries, kept for the allocation to carry (see
    ``DeviceConfig``). An entry that is not ``opaque`` (a kind of config a newer API may
    add) is unsupported rather than dropped: the driver would miss it."""
    out, unsupported = [], []
    for i, c in enumerate(read_list(raw, "config", f"{path}.config")):
        where = f"{path}.config[{i}]"
        entry = as_map(c, where)
        requests = (tuple(str(r) for r in read_list(entry, "requests", f"{where}.requests"))
                    if claim else ())
        if entry.get("opaque") is None:
            unsupported.append(f"{where} (not opaque)")
            continue
        opaque = as_map(entry["opaque"], f"{where}.opaque")
        if "parameters" not in opaque:
            raise FieldError(f"{where}.opaque.parameters", "missing")
        out.append(DeviceConfig(string(opaque, "driver", f"{where}.opaque.driver"),
                                json.dumps(opaque["parameters"], separators=(",", ":")),
                                requests))
    return tuple(out), unsupported


def _class(obj: Mapping[str, Any]) -> DeviceClass:
    meta, spec = read_map(obj, "metadata", "metadata"), read_map(obj, "spec", "spec")
    selectors, unsupported = _selectors(spec, "spec")
    config, refused = _configs(spec, "spec", claim=False)
    gpus = _gpus_per_device(meta, unsupported)
    return DeviceClass(read_name(meta), selectors, tuple(unsupported + refused), gpus, config)


def _ask(raw: Mapping[str, Any], name: str, path: str, sub: bool) -> Ask:
    selectors, unsupported = _selectors(raw, path)
    unsupported += [f"{path}.{f}" for f in _ASK_UNSUPPORTED if raw.get(f) not in (None, [], {})]
    mode_text = raw.get("allocationMode") or "ExactCount"
    try:
        mode = AllocationMode(mode_text)
    except ValueError:
        raise FieldError(f"{path}.allocationMode", f"unknown mode {mode_text!r}") from None
    count = read_int(raw, "count", f"{path}.count", 1 if mode is AllocationMode.EXACT_COUNT
                     else 0, 1 if mode is AllocationMode.EXACT_COUNT else 0) or 0
    admin = raw.get("adminAccess")
    if admin is not None and not isinstance(admin, bool):
        raise FieldError(f"{path}.adminAccess", f"expected a bool, got {admin!r}")
    if sub and admin is not None:
        raise FieldError(f"{path}.adminAccess", "not a field of a sub-request")
    asked = read_map(as_map(raw.get("capacity") or {}, f"{path}.capacity"), "requests",
                     f"{path}.capacity.requests")
    capacity = {str(k): quantity(v, f"{path}.capacity.requests[{k}]") for k, v in asked.items()}
    return Ask(name, string(raw, "deviceClassName", f"{path}.deviceClassName"), selectors, mode,
               count, bool(admin), tuple(unsupported), tuple(sorted(capacity.items())))


def _request(raw: Any, path: str) -> Request:
    req = as_map(raw, path)
    name = string(req, "name", f"{path}.name")
    exactly, first = req.get("exactly"), read_list(req, "firstAvailable",
                                                   f"{path}.firstAvailable")
    if (exactly is None) == (not first):
        raise FieldError(path, "exactly one of exactly and firstAvailable must be set")
    if exactly is not None:
        return Request(name, (_ask(as_map(exactly, f"{path}.exactly"), name,
                                   f"{path}.exactly", sub=False),))
    asks = []
    for i, s in enumerate(first):
        where = f"{path}.firstAvailable[{i}]"
        sub = as_map(s, where)
        asks.append(_ask(sub, f"{name}/{string(sub, 'name', f'{where}.name')}", where, sub=True))
    return Request(name, tuple(asks), first_available=True)


def _constraint(raw: Any, path: str) -> tuple[Constraint | None, str]:
    c = as_map(raw, path)
    requests = tuple(str(r) for r in read_list(c, "requests", f"{path}.requests"))
    if c.get("distinctAttribute") is not None:
        return None, f"{path}.distinctAttribute"
    attribute = string(c, "matchAttribute", f"{path}.matchAttribute", required=False)
    if not attribute:
        return None, f"{path} (no matchAttribute)"
    if "/" not in attribute:
        raise FieldError(f"{path}.matchAttribute", f"not fully qualified: {attribute!r}")
    return Constraint(attribute, requests), ""


def claim_spec(spec: Mapping[str, Any], path: str = "spec") -> ClaimSpec:
    """A claim's (or a template's) ``spec``: its ``devices`` requests and constraints."""
    devices = read_map(spec, "devices", f"{path}.devices")
    where = f"{path}.devices"
    requests = tuple(_request(r, f"{where}.requests[{i}]")
                     for i, r in enumerate(read_list(devices, "requests", f"{where}.requests")))
    names = [r.name for r in requests]
    if len(set(names)) != len(names):
        raise FieldError(f"{where}.requests", "request names are not unique")
    constraints, unsupported = [], []
    for i, raw in enumerate(read_list(devices, "constraints", f"{where}.constraints")):
        constraint, refused = _constraint(raw, f"{where}.constraints[{i}]")
        if constraint is not None:
            constraints.append(constraint)
        else:
            unsupported.append(refused)
    config, refused_config = _configs(devices, where, claim=True)
    return ClaimSpec(requests, tuple(constraints), tuple(unsupported + refused_config), config)


def _allocation(raw: Mapping[str, Any]) -> Allocation:
    path = "status.allocation"
    devices = read_map(raw, "devices", f"{path}.devices")
    results = []
    for i, r in enumerate(read_list(devices, "results", f"{path}.devices.results")):
        where = f"{path}.devices.results[{i}]"
        res = as_map(r, where)
        consumed = read_map(res, "consumedCapacity", f"{where}.consumedCapacity")
        results.append(DeviceResult(
            string(res, "request", f"{where}.request"),
            DeviceId(string(res, "driver", f"{where}.driver"), string(res, "pool", f"{where}.pool"),
                     string(res, "device", f"{where}.device")),
            res.get("adminAccess") is True,
            string(res, "shareID", f"{where}.shareID", required=False),
            tuple(sorted((qualify(str(k), res["driver"]),
                          quantity(v, f"{where}.consumedCapacity[{k}]"))
                         for k, v in consumed.items()))))
    selector = (node_selector(raw["nodeSelector"], f"{path}.nodeSelector")
                if raw.get("nodeSelector") is not None else None)
    return Allocation(tuple(results), selector)


def _claim(obj: Mapping[str, Any]) -> ResourceClaim:
    meta, spec = read_map(obj, "metadata", "metadata"), read_map(obj, "spec", "spec")
    status = read_map(obj, "status", "status")
    allocation = (_allocation(as_map(status["allocation"], "status.allocation"))
                  if status.get("allocation") is not None else None)
    consumers = []
    for i, r in enumerate(read_list(status, "reservedFor", "status.reservedFor")):
        where = f"status.reservedFor[{i}]"
        ref = as_map(r, where)
        consumers.append(Consumer(string(ref, "resource", f"{where}.resource"),
                                  string(ref, "name", f"{where}.name"),
                                  string(ref, "uid", f"{where}.uid", required=False),
                                  string(ref, "apiGroup", f"{where}.apiGroup", required=False)))
    return ResourceClaim(str(meta.get("namespace") or "default"), read_name(meta),
                         claim_spec(spec), str(meta.get("uid") or ""), allocation,
                         tuple(consumers), bool(meta.get("deletionTimestamp")),
                         str(meta.get("resourceVersion") or ""))


def _template(obj: Mapping[str, Any]) -> ClaimTemplate:
    meta, spec = read_map(obj, "metadata", "metadata"), read_map(obj, "spec", "spec")
    return ClaimTemplate(str(meta.get("namespace") or "default"), read_name(meta),
                         claim_spec(read_map(spec, "spec", "spec.spec"), "spec.spec"))


def device_class(obj: Any) -> DeviceClass:
    """A DeviceClass: its CEL selectors, the config its allocations carry and the GPUs
    one of its devices counts for."""
    return converted("deviceclass", obj, lambda: _class(obj))


def resource_claim(obj: Any) -> ResourceClaim:
    """A ResourceClaim: spec and, once allocated, its devices and consumers."""
    return converted("resourceclaim", obj, lambda: _claim(obj))


def claim_template(obj: Any) -> ClaimTemplate:
    """A ResourceClaimTemplate: the spec each pod's own claim gets."""
    return converted("resourceclaimtemplate", obj, lambda: _template(obj))
