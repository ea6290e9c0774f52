"""Apiserver JSON -> device model for ResourceSlices: devices with their attributes and
capacities (and a shareable device's capacity policy, a partitionable device's counters),
pools, their counter sets and where they reach.

Same contract as ``devices_convert`` (claims, classes, templates), kept apart because a
slice is the driver's inventory, read on its own informer and with its own unsupported
fields: a device or pool with one is not offered (``scheduler.model.devices`` says why).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from scheduler.kube.read.device_fields import as_map, node_selector, quantity, string
from scheduler.kube.read.fields import (
    FieldError,
    converted,
    read_int,
    read_list,
    read_map,
    read_name,
)
from scheduler.model.devices import (
    AttributeValue,
    CapacityPolicy,
    Counters,
    CounterSet,
    Device,
    DeviceSlice,
    PoolRef,
    Version,
    qualify,
)

#: Device fields we do not implement (a device with one is not offered).
_DEVICE_UNSUPPORTED = ("taints", "bindsToNode", "bindingConditions",
                       "bindingFailureConditions",
                       "nodeAllocatableResourceMappings", "nodeName", "nodeSelector",
                       "allNodes")
_LIST_ATTRIBUTES = ("ints", "bools", "strings", "versions")
#: API limits (``resource/v1``): counter sets per slice, counters per set or consumption,
#: consumptions per device.
MAX_COUNTER_SETS = 8
MAX_COUNTERS = 32
MAX_CONSUMPTIONS = 2


def _attribute(raw: Any, path: str) -> AttributeValue | None:
    """One attribute; None for a list-typed one (unsupported, noted by the caller)."""
    value = as_map(raw, path)
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


def _counters(raw: Mapping[str, Any], path: str) -> Counters:
    """A ``counters`` map: counter name -> ``{value: quantity}``, at most 32, none negative."""
    counters = read_map(raw, "counters", f"{path}.counters")
    if not counters:
        raise FieldError(f"{path}.counters", "missing")
    if len(counters) > MAX_COUNTERS:
        raise FieldError(f"{path}.counters", f"{len(counters)} counters, at most "
                                             f"{MAX_COUNTERS} allowed")
    out: dict[str, Fraction] = {}
    for name, counter in counters.items():
        where = f"{path}.counters[{name}]"
        value = as_map(counter, where).get("value")
        if value is None:
            raise FieldError(f"{where}.value", "missing")
        out[str(name)] = quantity(value, f"{where}.value")
        if out[str(name)] < 0:
            raise FieldError(f"{where}.value", "must not be negative")
    return tuple(sorted(out.items()))


def _counter_sets(spec: Mapping[str, Any]) -> tuple[CounterSet, ...]:
    raw = read_list(spec, "sharedCounters", "spec.sharedCounters")
    if len(raw) > MAX_COUNTER_SETS:
        raise FieldError("spec.sharedCounters", f"{len(raw)} counter sets, at most "
                                                f"{MAX_COUNTER_SETS} allowed")
    out = []
    for i, item in enumerate(raw):
        where = f"spec.sharedCounters[{i}]"
        entry = as_map(item, where)
        out.append(CounterSet(string(entry, "name", f"{where}.name"), _counters(entry, where)))
    return tuple(out)


def _consumes(dev: Mapping[str, Any], path: str) -> tuple[tuple[str, Counters], ...]:
    raw = read_list(dev, "consumesCounters", f"{path}.consumesCounters")
    if len(raw) > MAX_CONSUMPTIONS:
        raise FieldError(f"{path}.consumesCounters", f"{len(raw)} entries, at most "
                                                     f"{MAX_CONSUMPTIONS} allowed")
    out: dict[str, Counters] = {}
    for i, item in enumerate(raw):
        where = f"{path}.consumesCounters[{i}]"
        entry = as_map(item, where)
        name = string(entry, "counterSet", f"{where}.counterSet")
        if name in out:
            raise FieldError(f"{where}.counterSet", f"{name} given twice")
        out[name] = _counters(entry, where)
    return tuple(sorted(out.items()))


def _device(raw: Any, driver: str, path: str) -> Device:
    dev = as_map(raw, path)
    name = string(dev, "name", f"{path}.name")
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
        cap = as_map(value, where)
        if "value" not in cap:
            raise FieldError(f"{where}.value", "missing")
        full = qualify(str(key), driver)
        capacity[full] = quantity(cap["value"], f"{where}.value")
        if cap.get("requestPolicy") is not None:
            if not shareable:
                raise FieldError(f"{where}.requestPolicy",
                                 "only a device that allowMultipleAllocations may set one")
            policies[full] = _policy(as_map(cap["requestPolicy"], f"{where}.requestPolicy"),
                                     f"{where}.requestPolicy")
    return Device(name, tuple(sorted(attributes.items())), tuple(sorted(capacity.items())),
                  tuple(unsupported), bool(shareable), tuple(sorted(policies.items())),
                  _consumes(dev, path))


def _optional_quantity(raw: Mapping[str, Any], key: str, path: str) -> Fraction | None:
    return quantity(raw[key], f"{path}.{key}") if raw.get(key) is not None else None


def _policy(raw: Mapping[str, Any], path: str) -> CapacityPolicy:
    """A capacity's ``requestPolicy``: a default, and valid values or a valid range."""
    values = tuple(quantity(v, f"{path}.validValues[{i}]")
                   for i, v in enumerate(read_list(raw, "validValues", f"{path}.validValues")))
    if list(values) != sorted(values):
        raise FieldError(f"{path}.validValues", "not in ascending order")
    span = raw.get("validRange")
    if span is None:
        return CapacityPolicy(_optional_quantity(raw, "default", path), values)
    if values:
        raise FieldError(path, "validValues and validRange are both set")
    where = f"{path}.validRange"
    span = as_map(span, where)
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
    driver = string(spec, "driver", "spec.driver")
    pool_raw = as_map(spec.get("pool"), "spec.pool")
    pool = PoolRef(string(pool_raw, "name", "spec.pool.name"),
                   read_int(pool_raw, "generation", "spec.pool.generation", 0, 0) or 0,
                   read_int(pool_raw, "resourceSliceCount", "spec.pool.resourceSliceCount",
                            None, 1) or 0)
    if pool.slice_count < 1:
        raise FieldError("spec.pool.resourceSliceCount", "missing")
    node_name = string(spec, "nodeName", "spec.nodeName", required=False)
    selector = (node_selector(spec["nodeSelector"], "spec.nodeSelector")
                if spec.get("nodeSelector") is not None else None)
    all_nodes = spec.get("allNodes") is True
    unsupported = ["spec.perDeviceNodeSelection"] if spec.get("perDeviceNodeSelection") else []
    chosen = sum((bool(node_name), selector is not None, all_nodes,
                  spec.get("perDeviceNodeSelection") is True))
    if chosen != 1 and not spec.get("sharedCounters"):
        raise FieldError("spec", "exactly one of nodeName, nodeSelector, allNodes and "
                                 f"perDeviceNodeSelection must be set, {chosen} are")
    devices = tuple(_device(d, driver, f"spec.devices[{i}]")
                    for i, d in enumerate(read_list(spec, "devices", "spec.devices")))
    counter_sets = _counter_sets(spec)
    if devices and counter_sets:
        raise FieldError("spec", "only one of sharedCounters and devices may be set")
    return DeviceSlice(read_name(meta), driver, pool, devices, node_name, selector, all_nodes,
                       tuple(unsupported), counter_sets)


def resource_slice(obj: Any) -> DeviceSlice:
    """A ``resource.k8s.io/v1`` ResourceSlice; ``ConversionError`` names the bad field."""
    return converted("resourceslice", obj, lambda: _slice(obj))
