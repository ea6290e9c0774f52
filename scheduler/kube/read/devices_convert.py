"""Apiserver JSON -> device model: ResourceSlices, DeviceClasses, ResourceClaims and
ResourceClaimTemplates of ``resource.k8s.io/v1`` (Dynamic Resource Allocation, issue 35).

Same contract as ``convert``: pure functions over dicts; a malformed object raises
``ConversionError`` naming the object and the field, and the feed keeps its last good state.

A field the allocator does not implement is not an error: the object is still read, with the
field's path in its ``unsupported`` list, so a claim that needs it waits with a reason naming
it and a device or pool that has it is not offered (``scheduler.model.devices`` says why).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

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
    AttributeValue,
    CapacityPolicy,
    ClaimSpec,
    ClaimTemplate,
    Constraint,
    Consumer,
    Device,
    DeviceClass,
    DeviceConfig,
    DeviceId,
    DeviceResult,
    DeviceSlice,
    PoolRef,
    Request,
    ResourceClaim,
    Version,
    qualify,
)
from scheduler.model.pods import NodeSelectorTerm, node_selector_term
from scheduler.model.resources import QuantityError, exact_quantity

#: Device fields we do not implement (a device with one is not offered).
_DEVICE_UNSUPPORTED = ("consumesCounters", "taints", "bindsToNode", "bindingConditions",
                       "bindingFailureConditions",
                       "nodeAllocatableResourceMappings", "nodeName", "nodeSelector",
                       "allNodes")
_LIST_ATTRIBUTES = ("ints", "bools", "strings", "versions")
#: Request fields we do not implement (a claim with one waits).
_ASK_UNSUPPORTED = ("tolerations",)


def _str(obj: Mapping[str, Any], key: str, path: str, required: bool = True) -> str:
    value = obj.get(key)
    if value is None or value == "":
        if required:
            raise FieldError(path, "missing")
        return ""
    if not isinstance(value, str):
        raise FieldError(path, f"expected a string, got {value!r}")
    return value


def _obj(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise FieldError(path, f"expected an object, got {type(value).__name__}")
    return value


def _selector(raw: Any, path: str) -> NodeSelectorTerm:
    terms = read_list(_obj(raw, path), "nodeSelectorTerms", f"{path}.nodeSelectorTerms")
    if len(terms) != 1:
        raise FieldError(f"{path}.nodeSelectorTerms", f"must have one term, has {len(terms)}")
    try:
        return node_selector_term(_obj(terms[0], f"{path}.nodeSelectorTerms[0]"),
                                  f"{path}.nodeSelectorTerms[0]")
    except ValueError as exc:
        where, _, reason = str(exc).partition(": ")
        raise FieldError(where, reason) from None


# ResourceSlices ---------------------------------------------------------------------------
def _attribute(raw: Any, path: str) -> AttributeValue | None:
    """One attribute; None for a list-typed one (unsupported, noted by the caller)."""
    value = _obj(raw, path)
    set_ = [k for k in ("int", "bool", "string", "version", *_LIST_ATTRIBUTES) if k in value]
    if len(set_) != 1:
        raise FieldError(path, f"must set exactly one value, sets {set_ or 'none'}")
    kind = set_[0]
    v = value[kind]
    if kind == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            raise FieldError(f"{path}.int", f"expected an integer, got {v!r}")
        return v
    if kind == "bool":
        if not isinstance(v, bool):
            raise FieldError(f"{path}.bool", f"expected a bool, got {v!r}")
        return v
    if kind == "string":
        if not isinstance(v, str):
            raise FieldError(f"{path}.string", f"expected a string, got {v!r}")
        return v
    if kind == "version":
        try:
            return Version(str(v))
        except ValueError as exc:
            raise FieldError(f"{path}.version", str(exc)) from None
    return None


def _quantity(raw: Any, path: str) -> Fraction:
    try:
        return exact_quantity(str(raw))
    except QuantityError as exc:
        raise FieldError(path, str(exc)) from None


def _device(raw: Any, driver: str, path: str) -> Device:
    dev = _obj(raw, path)
    name = _str(dev, "name", f"{path}.name")
    unsupported = [f"{path}.{f}" for f in _DEVICE_UNSUPPORTED if dev.get(f) not in (None, [], {})]
    attributes: dict[str, AttributeValue] = {}
    for key, value in read_map(dev, "attributes", f"{path}.attributes").items():
        where = f"{path}.attributes[{key}]"
        got = _attribute(value, where)
        if got is None:
            unsupported.append(f"{where} (a list value)")
            continue
        full = qualify(str(key), driver)
        if full in attributes:
            raise FieldError(where, f"{full} given twice")
        attributes[full] = got
    shareable = dev.get("allowMultipleAllocations")
    if shareable is not None and not isinstance(shareable, bool):
        raise FieldError(f"{path}.allowMultipleAllocations", f"expected a bool, got {shareable!r}")
    capacity: dict[str, Fraction] = {}
    policies: dict[str, CapacityPolicy] = {}
    for key, value in read_map(dev, "capacity", f"{path}.capacity").items():
        where = f"{path}.capacity[{key}]"
        cap = _obj(value, where)
        if "value" not in cap:
            raise FieldError(f"{where}.value", "missing")
        full = qualify(str(key), driver)
        capacity[full] = _quantity(cap["value"], f"{where}.value")
        if cap.get("requestPolicy") is not None:
            if not shareable:
                raise FieldError(f"{where}.requestPolicy",
                                 "only a device that allowMultipleAllocations may set one")
            policies[full] = _policy(_obj(cap["requestPolicy"], f"{where}.requestPolicy"),
                                     f"{where}.requestPolicy")
    return Device(name, tuple(sorted(attributes.items())), tuple(sorted(capacity.items())),
                  tuple(unsupported), bool(shareable), tuple(sorted(policies.items())))


def _optional_quantity(raw: Mapping[str, Any], key: str, path: str) -> Fraction | None:
    return _quantity(raw[key], f"{path}.{key}") if raw.get(key) is not None else None


def _policy(raw: Mapping[str, Any], path: str) -> CapacityPolicy:
    """A capacity's ``requestPolicy``: a default, and valid values or a valid range."""
    values = tuple(_quantity(v, f"{path}.validValues[{i}]")
                   for i, v in enumerate(read_list(raw, "validValues", f"{path}.validValues")))
    if list(values) != sorted(values):
        raise FieldError(f"{path}.validValues", "not in ascending order")
    span = raw.get("validRange")
    if span is None:
        return CapacityPolicy(_optional_quantity(raw, "default", path), values)
    if values:
        raise FieldError(path, "validValues and validRange are both set")
    where = f"{path}.validRange"
    span = _obj(span, where)
    minimum = _optional_quantity(span, "min", where)
    if minimum is None:
        raise FieldError(f"{where}.min", "missing")
    step = _optional_quantity(span, "step", where)
    if step is not None and step <= 0:
        raise FieldError(f"{where}.step", "must be positive")
    return CapacityPolicy(_optional_quantity(raw, "default", path), (), minimum,
                          _optional_quantity(span, "max", where), step)


def _slice(obj: Mapping[str, Any]) -> DeviceSlice:
    meta, spec = read_map(obj, "metadata", "metadata"), read_map(obj, "spec", "spec")
    driver = _str(spec, "driver", "spec.driver")
    pool_raw = _obj(spec.get("pool"), "spec.pool")
    pool = PoolRef(_str(pool_raw, "name", "spec.pool.name"),
                   read_int(pool_raw, "generation", "spec.pool.generation", 0, 0) or 0,
                   read_int(pool_raw, "resourceSliceCount", "spec.pool.resourceSliceCount",
                            None, 1) or 0)
    if pool.slice_count < 1:
        raise FieldError("spec.pool.resourceSliceCount", "missing")
    node_name = _str(spec, "nodeName", "spec.nodeName", required=False)
    selector = (_selector(spec["nodeSelector"], "spec.nodeSelector")
                if spec.get("nodeSelector") is not None else None)
    all_nodes = spec.get("allNodes") is True
    unsupported = [f"spec.{f}" for f in ("sharedCounters", "perDeviceNodeSelection")
                   if spec.get(f) not in (None, [], False)]
    chosen = sum((bool(node_name), selector is not None, all_nodes,
                  spec.get("perDeviceNodeSelection") is True))
    if chosen != 1 and not spec.get("sharedCounters"):
        raise FieldError("spec", "exactly one of nodeName, nodeSelector, allNodes and "
                                 f"perDeviceNodeSelection must be set, {chosen} are")
    devices = tuple(_device(d, driver, f"spec.devices[{i}]")
                    for i, d in enumerate(read_list(spec, "devices", "spec.devices")))
    return DeviceSlice(read_name(meta), driver, pool, devices, node_name, selector, all_nodes,
                       tuple(unsupported))


# Classes and claims -----------------------------------------------------------------------
def _selectors(raw: Mapping[str, Any], path: str) -> tuple[tuple[str, ...], list[str]]:
    out, unsupported = [], []
    for i, s in enumerate(read_list(raw, "selectors", f"{path}.selectors")):
        where = f"{path}.selectors[{i}]"
        cel = _obj(s, where).get("cel")
        if cel is None:
            unsupported.append(f"{where} (not a CEL selector)")
            continue
        out.append(_str(_obj(cel, f"{where}.cel"), "expression", f"{where}.cel.expression"))
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
        entry = _obj(c, where)
        requests = (tuple(str(r) for r in read_list(entry, "requests", f"{where}.requests"))
                    if claim else ())
        if entry.get("opaque") is None:
            unsupported.append(f"{where} (not opaque)")
            continue
        opaque = _obj(entry["opaque"], f"{where}.opaque")
        if "parameters" not in opaque:
            raise FieldError(f"{where}.opaque.parameters", "missing")
        out.append(DeviceConfig(_str(opaque, "driver", f"{where}.opaque.driver"),
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
    asked = read_map(_obj(raw.get("capacity") or {}, f"{path}.capacity"), "requests",
                     f"{path}.capacity.requests")
    capacity = {str(k): _quantity(v, f"{path}.capacity.requests[{k}]") for k, v in asked.items()}
    return Ask(name, _str(raw, "deviceClassName", f"{path}.deviceClassName"), selectors, mode,
               count, bool(admin), tuple(unsupported), tuple(sorted(capacity.items())))


def _request(raw: Any, path: str) -> Request:
    req = _obj(raw, path)
    name = _str(req, "name", f"{path}.name")
    exactly, first = req.get("exactly"), read_list(req, "firstAvailable",
                                                   f"{path}.firstAvailable")
    if (exactly is None) == (not first):
        raise FieldError(path, "exactly one of exactly and firstAvailable must be set")
    if exactly is not None:
        return Request(name, (_ask(_obj(exactly, f"{path}.exactly"), name,
                                   f"{path}.exactly", sub=False),))
    asks = []
    for i, s in enumerate(first):
        where = f"{path}.firstAvailable[{i}]"
        sub = _obj(s, where)
        asks.append(_ask(sub, f"{name}/{_str(sub, 'name', f'{where}.name')}", where, sub=True))
    return Request(name, tuple(asks), first_available=True)


def _constraint(raw: Any, path: str) -> tuple[Constraint | None, str]:
    c = _obj(raw, path)
    requests = tuple(str(r) for r in read_list(c, "requests", f"{path}.requests"))
    if c.get("distinctAttribute") is not None:
        return None, f"{path}.distinctAttribute"
    attribute = _str(c, "matchAttribute", f"{path}.matchAttribute", required=False)
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
        res = _obj(r, where)
        consumed = read_map(res, "consumedCapacity", f"{where}.consumedCapacity")
        results.append(DeviceResult(
            _str(res, "request", f"{where}.request"),
            DeviceId(_str(res, "driver", f"{where}.driver"), _str(res, "pool", f"{where}.pool"),
                     _str(res, "device", f"{where}.device")),
            res.get("adminAccess") is True,
            _str(res, "shareID", f"{where}.shareID", required=False),
            tuple(sorted((qualify(str(k), res["driver"]),
                          _quantity(v, f"{where}.consumedCapacity[{k}]"))
                         for k, v in consumed.items()))))
    selector = (_selector(raw["nodeSelector"], f"{path}.nodeSelector")
                if raw.get("nodeSelector") is not None else None)
    return Allocation(tuple(results), selector)


def _claim(obj: Mapping[str, Any]) -> ResourceClaim:
    meta, spec = read_map(obj, "metadata", "metadata"), read_map(obj, "spec", "spec")
    status = read_map(obj, "status", "status")
    allocation = (_allocation(_obj(status["allocation"], "status.allocation"))
                  if status.get("allocation") is not None else None)
    consumers = []
    for i, r in enumerate(read_list(status, "reservedFor", "status.reservedFor")):
        where = f"status.reservedFor[{i}]"
        ref = _obj(r, where)
        consumers.append(Consumer(_str(ref, "resource", f"{where}.resource"),
                                  _str(ref, "name", f"{where}.name"),
                                  _str(ref, "uid", f"{where}.uid", required=False),
                                  _str(ref, "apiGroup", f"{where}.apiGroup", required=False)))
    return ResourceClaim(str(meta.get("namespace") or "default"), read_name(meta),
                         claim_spec(spec), str(meta.get("uid") or ""), allocation,
                         tuple(consumers), bool(meta.get("deletionTimestamp")),
                         str(meta.get("resourceVersion") or ""))


def _template(obj: Mapping[str, Any]) -> ClaimTemplate:
    meta, spec = read_map(obj, "metadata", "metadata"), read_map(obj, "spec", "spec")
    return ClaimTemplate(str(meta.get("namespace") or "default"), read_name(meta),
                         claim_spec(read_map(spec, "spec", "spec.spec"), "spec.spec"))


def resource_slice(obj: Any) -> DeviceSlice:
    """A ``resource.k8s.io/v1`` ResourceSlice; ``ConversionError`` names the bad field."""
    return converted("resourceslice", obj, lambda: _slice(obj))


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
