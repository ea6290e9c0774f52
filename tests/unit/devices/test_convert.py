"""resource.k8s.io/v1 JSON -> device model: realistic objects read whole, unsupported fields
kept by path (not errors), malformed fields refused with the object and the field named."""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from scheduler.kube.read.devices_convert import (
    claim_template,
    device_class,
    resource_claim,
)
from scheduler.kube.read.fields import ConversionError
from scheduler.kube.read.slices_convert import resource_slice
from scheduler.model.devices import AllocationMode, Constraint, DeviceConfig, DeviceId, Version

FIXTURES = Path(__file__).parent / "fixtures"
DATA = Path(__file__).parents[2] / "data" / "dra"
D = "gpu.example.com"


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def test_a_resource_slice() -> None:
    s = resource_slice(fixture("resourceslice"))
    assert (s.name, s.driver, s.node_name) == ("node-1-gpu.example.com-x7k2p", D, "node-1")
    assert (s.pool.name, s.pool.generation, s.pool.slice_count) == ("node-1", 3, 1)
    gpu0, gpu1 = s.devices
    assert gpu0.attribute(f"{D}/model") == "A100-SXM4-40GB"
    assert gpu0.attribute(f"{D}/index") == 0
    assert gpu0.attribute(f"{D}/mig") is False
    assert gpu0.attribute(f"{D}/driverVersion") == Version("535.104.5")
    assert gpu0.attribute("resource.kubernetes.io/pcieRoot") == "pci0000:00"
    assert dict(gpu0.capacity) == {f"{D}/memory": Fraction(40 * 2**30)}
    assert gpu0.unsupported == ()
    assert gpu1.unsupported == ("spec.devices[1].taints",)


def test_a_device_class() -> None:
    c = device_class(fixture("deviceclass"))
    assert (c.name, c.selectors, c.unsupported) == (D, (f'device.driver == "{D}"',), ())


def test_a_resource_claim() -> None:
    c = resource_claim(fixture("resourceclaim"))
    assert c.key == "team-a/trainer-0-gpus-8xk2j" and c.uid == "5f2c"
    gpus, nic = c.spec.requests
    assert not gpus.first_available and gpus.asks[0].count == 2
    assert gpus.asks[0].class_name == D and "quantity" in gpus.asks[0].selectors[0]
    assert nic.first_available and [a.name for a in nic.asks] == ["nic/rdma", "nic/any"]
    assert c.spec.constraints == (Constraint("resource.kubernetes.io/pcieRoot",
                                             ("gpus", "nic")),)
    assert c.spec.all_unsupported() == ()
    assert c.allocation is not None
    assert c.allocation.devices == {DeviceId(D, "node-1", "gpu-0"), DeviceId(D, "node-1", "gpu-1"),
                                    DeviceId("nic.example.com", "node-1", "nic-0")}
    assert c.allocation.reaches("node-1", {}) and not c.allocation.reaches("node-2", {})
    assert [r.name for r in c.reserved_for] == ["trainer-0"]


def test_config_is_kept_for_the_allocation_to_carry() -> None:
    """The class's and the claim's opaque config, parameters as the apiserver gave them: an
    allocation without them would hand the driver an unconfigured device."""
    c = device_class(fixture("deviceclass"))
    assert c.config == (DeviceConfig(D, '{"apiVersion":"gpu.example.com/v1","kind":"GpuConfig"}'),)
    claim = resource_claim(fixture("resourceclaim"))
    assert claim.spec.config == (DeviceConfig(D, "{}", ("gpus",)),)
    # A real claim as the apiserver returned it, given config the way a user writes it.
    real = json.loads((DATA / "resourceclaim-two-devices-allocated.json").read_text())
    assert resource_claim(real).spec.config == ()
    real["spec"]["devices"]["config"] = [
        {"opaque": {"driver": D, "parameters": {"kind": "GpuConfig", "sharing": {"mps": {}}}}},
        {"requests": ["gpu", "other"], "opaque": {"driver": D, "parameters": {"n": 2}}}]
    spec = resource_claim(real).spec
    assert spec.config == (DeviceConfig(D, '{"kind":"GpuConfig","sharing":{"mps":{}}}'),
                           DeviceConfig(D, '{"n":2}', ("gpu", "other")))
    assert spec.all_unsupported() == ()


@pytest.mark.parametrize("kind,path", [
    ("deviceclass", "spec"), ("resourceclaim", "spec.devices")])
def test_config_that_is_not_opaque_is_unsupported_not_dropped(kind: str, path: str) -> None:
    obj = fixture(kind)
    where = obj["spec"] if kind == "deviceclass" else obj["spec"]["devices"]
    where["config"] = [*where["config"], {"requests": [], "structured": {"x": 1}}]
    if kind == "deviceclass":
        unsupported = device_class(obj).unsupported
    else:
        unsupported = resource_claim(obj).spec.all_unsupported()
    assert unsupported == (f"{path}.config[1] (not opaque)",)
    del where["config"][0]["opaque"]["parameters"]
    with pytest.raises(ConversionError, match=rf"{path}.config\[0\].opaque.parameters"):
        (device_class if kind == "deviceclass" else resource_claim)(obj)


def test_a_claim_template() -> None:
    t = claim_template(fixture("resourceclaimtemplate"))
    assert t.key == "team-a/eight-gpus"
    (ask,) = t.spec.requests[0].asks
    assert ask.mode is AllocationMode.ALL and ask.count == 0
    assert t.spec.constraints == (Constraint(f"{D}/numa"),)


def _with(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of *obj* with *path* (dots, [i] for list items) set to *value*."""
    out = copy.deepcopy(obj)
    node: Any = out
    parts = path.replace("[", ".[").split(".")
    for part in parts[:-1]:
        node = node[int(part[1:-1])] if part.startswith("[") else node[part]
    last = parts[-1]
    if last.startswith("["):
        node[int(last[1:-1])] = value
    elif value is _DROP:
        del node[last]
    else:
        node[last] = value
    return out


_DROP = object()

UNSUPPORTED = [
    ("resourceslice", "spec.devices[0].taints", [{"key": "k", "effect": "NoSchedule"}],
     "spec.devices[0].taints"),
    ("resourceslice", "spec.devices[0].bindingConditions", ["ready"],
     "spec.devices[0].bindingConditions"),
    ("resourceslice", "spec.devices[0].attributes.model", {"strings": ["a", "b"]},
     "spec.devices[0].attributes[model] (a list value)"),
]


@pytest.mark.parametrize(("kind", "path", "value", "noted"), UNSUPPORTED,
                         ids=[u[3] for u in UNSUPPORTED])
def test_unsupported_device_fields_are_noted_by_path(kind: str, path: str, value: Any,
                                                     noted: str) -> None:
    s = resource_slice(_with(fixture(kind), path, value))
    assert noted in s.devices[0].unsupported


def test_unsupported_slice_and_claim_fields_are_noted_by_path() -> None:
    raw = _with(fixture("resourceslice"), "spec.perDeviceNodeSelection", True)
    del raw["spec"]["nodeName"]
    s = resource_slice(raw)
    assert "spec.perDeviceNodeSelection" in s.unsupported
    raw = fixture("resourceclaim")
    devices = raw["spec"]["devices"]
    devices["constraints"].append({"distinctAttribute": f"{D}/index"})
    devices["requests"][0]["exactly"]["tolerations"] = [{"operator": "Exists"}]
    devices["requests"][0]["exactly"]["selectors"].append({"future": {}})
    c = resource_claim(raw)
    assert set(c.spec.all_unsupported()) == {
        "spec.devices.constraints[1].distinctAttribute",
        "spec.devices.requests[0].exactly.tolerations",
        "spec.devices.requests[0].exactly.selectors[1] (not a CEL selector)"}


MALFORMED = [
    ("resourceslice", "spec.driver", _DROP, "spec.driver: missing"),
    ("resourceslice", "spec.pool.resourceSliceCount", 0,
     "spec.pool.resourceSliceCount: must be >= 1"),
    ("resourceslice", "spec.pool.generation", "3", "spec.pool.generation: expected an integer"),
    ("resourceslice", "spec.nodeName", _DROP, "spec: exactly one of nodeName, nodeSelector"),
    ("resourceslice", "spec.allNodes", True, "spec: exactly one of nodeName"),
    ("resourceslice", "spec.devices[0].attributes.index", {"int": "0"},
     "spec.devices[0].attributes[index].int: expected an integer"),
    ("resourceslice", "spec.devices[0].attributes.index", {"int": 0, "string": "0"},
     "spec.devices[0].attributes[index]: must set exactly one value"),
    ("resourceslice", "spec.devices[0].attributes.driverVersion", {"version": "535.1"},
     "spec.devices[0].attributes[driverVersion].version: not a semantic version"),
    ("resourceslice", "spec.devices[0].capacity.memory", {"value": "40Gx"},
     "spec.devices[0].capacity[memory].value: malformed quantity"),
    ("resourceslice", "spec.devices[0].name", _DROP, "spec.devices[0].name: missing"),
    ("deviceclass", "spec.selectors[0].cel", {"expr": "x"},
     "spec.selectors[0].cel.expression: missing"),
    ("resourceclaim", "spec.devices.requests[0].exactly.count", "2",
     "spec.devices.requests[0].exactly.count: expected an integer"),
    ("resourceclaim", "spec.devices.requests[0].exactly.count", 0,
     "spec.devices.requests[0].exactly.count: must be >= 1"),
    ("resourceclaim", "spec.devices.requests[0].exactly.allocationMode", "Some",
     "spec.devices.requests[0].exactly.allocationMode: unknown mode 'Some'"),
    ("resourceclaim", "spec.devices.requests[0].exactly.deviceClassName", _DROP,
     "spec.devices.requests[0].exactly.deviceClassName: missing"),
    ("resourceclaim", "spec.devices.requests[0].exactly.adminAccess", "yes",
     "spec.devices.requests[0].exactly.adminAccess: expected a bool"),
    ("resourceclaim", "spec.devices.requests[1].name", "gpus",
     "spec.devices.requests: request names are not unique"),
    ("resourceclaim", "spec.devices.requests[0].exactly", _DROP,
     "spec.devices.requests[0]: exactly one of exactly and firstAvailable"),
    ("resourceclaim", "spec.devices.constraints[0].matchAttribute", "pcieRoot",
     "spec.devices.constraints[0].matchAttribute: not fully qualified"),
    ("resourceclaim", "status.allocation.devices.results[0].device", _DROP,
     "status.allocation.devices.results[0].device: missing"),
    ("resourceclaim", "status.allocation.nodeSelector", {"nodeSelectorTerms": []},
     "status.allocation.nodeSelector.nodeSelectorTerms: must have one term"),
    ("resourceclaim", "status.reservedFor[0]", "trainer-0",
     "status.reservedFor[0]: expected an object"),
    ("resourceclaimtemplate", "spec.spec.devices.requests", {"name": "x"},
     "spec.spec.devices.requests: expected a list"),
]
_READERS = {"resourceslice": resource_slice, "deviceclass": device_class,
            "resourceclaim": resource_claim, "resourceclaimtemplate": claim_template}


@pytest.mark.parametrize(("kind", "path", "value", "words"), MALFORMED,
                         ids=[f"{m[0]}:{m[1]}" for m in MALFORMED])
def test_malformed_fields_are_named(kind: str, path: str, value: Any, words: str) -> None:
    with pytest.raises(ConversionError) as info:
        _READERS[kind](_with(fixture(kind), path, value))  # type: ignore[operator]
    assert words in str(info.value)
    assert str(info.value).startswith(f"{kind} ")


def test_not_an_object() -> None:
    with pytest.raises(ConversionError, match="expected an object"):
        resource_slice([])
