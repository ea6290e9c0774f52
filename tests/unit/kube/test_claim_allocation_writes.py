"""ResourceClaim allocations written before a gang binds (``PreBindKind.DEVICES``): exactly the
JSON ``resource.k8s.io/v1`` wants, conditional on the claim read, never taking a claim
allocated meanwhile, and taken back when the gang's bind fails."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from scheduler.kube.client import Response
from scheduler.kube.lead.fence import Fenced
from scheduler.kube.write.claim_allocation import DELETE_PROTECTION
from scheduler.kube.write.prebind import PreBindWriter
from scheduler.model.device_config import allocation_config
from scheduler.model.devices import (
    MAX_RESERVED_FOR,
    AllocatedConfig,
    Allocation,
    Ask,
    ClaimSpec,
    ConfigSource,
    Consumer,
    DeviceClass,
    DeviceConfig,
    DeviceId,
    DeviceResult,
    Request,
)
from scheduler.model.pods import NodeSelectorRequirement, NodeSelectorTerm, SelectorOperator
from scheduler.model.prebind import PreBind, PreBindKind, device_names
from tests.unit.kube.test_prebind_writer import FakeApi

D = "gpu.example.com"
PATH = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/ckpt"
STATUS = f"{PATH}/status"
PODS = (Consumer("pods", "g-0", "u0"), Consumer("pods", "g-1", "u1"))
POD_JSON = [{"resource": "pods", "name": "g-0", "uid": "u0"},
            {"resource": "pods", "name": "g-1", "uid": "u1"}]
OTHER = {"resource": "pods", "name": "x", "uid": "ux"}
ON_NODE_1 = NodeSelectorTerm(match_fields=(
    NodeSelectorRequirement("metadata.name", SelectorOperator.IN, ("node-1",)),))
LOCAL = Allocation((DeviceResult("gpu", DeviceId(D, "node-1", "gpu-0")),
                    DeviceResult("gpu", DeviceId(D, "node-1", "gpu-1"))), ON_NODE_1)
RACK = NodeSelectorTerm(match_expressions=(
    NodeSelectorRequirement("rack", SelectorOperator.IN, ("r1", "r2")),
    NodeSelectorRequirement("fabric", SelectorOperator.EXISTS)))
NETWORK = Allocation((DeviceResult("nic", DeviceId("nic.example.com", "fabric", "port-3")),),
                     RACK)
ADMIN = Allocation((DeviceResult("gpu", DeviceId(D, "node-1", "gpu-0"), admin_access=True),))
LOCAL_JSON: dict[str, Any] = {"devices": {"results": [
    {"request": "gpu", "driver": D, "pool": "node-1", "device": "gpu-0"},
    {"request": "gpu", "driver": D, "pool": "node-1", "device": "gpu-1"}]},
    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}}
CLASS_CONFIG = DeviceConfig(D, '{"apiVersion":"gpu.example.com/v1","kind":"GpuConfig",'
                               '"sharing":"TimeSlicing"}')
CLAIM_CONFIG = DeviceConfig(D, '{"kind":"GpuConfig","mps":true}', ("gpu",))
SPEC = ClaimSpec((Request("gpu", (Ask("gpu", "gpu", count=2),)),), config=(CLAIM_CONFIG,))
CLASSES = {"gpu": DeviceClass("gpu", config=(CLASS_CONFIG,))}


def devices(allocation: Allocation | None = LOCAL, **kw: Any) -> PreBind:
    names = device_names(allocation) if allocation is not None else ()
    return PreBind("ns/ckpt", PreBindKind.DEVICES, "node-1", names, allocation,
                   kw.pop("consumers", PODS), **kw)


def claim(allocation: dict[str, Any] | None = None, reserved: list[dict[str, Any]] | None = None,
          **meta: Any) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if allocation is not None:
        status["allocation"] = allocation
    if reserved:
        status["reservedFor"] = reserved
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "ckpt", "namespace": "ns", "uid": "rc1",
                         "resourceVersion": "7", **meta},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu", "count": 2}}]}},
            "status": status}


def finalizer(rv: str = "7", *others: str) -> tuple[str, dict[str, Any]]:
    return PATH, {"metadata": {"resourceVersion": rv,
                               "finalizers": [*others, DELETE_PROTECTION]}}


def status(rv: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    return STATUS, {"metadata": {"resourceVersion": rv}, "status": fields}


@dataclass(frozen=True)
class Case:
    decision: PreBind
    before: dict[str, Any]
    patches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    failure: str = ""  # a part of the failure's words; "" when the write succeeds
    refuse: bool = False  # the status write meets a newer resourceVersion (409)


CASES = {
    "node-local devices": Case(devices(), claim(), [
        finalizer(), status("8", allocation=LOCAL_JSON, reservedFor=POD_JSON)]),
    "network-attached devices, a selector of labels": Case(devices(NETWORK), claim(), [
        finalizer(), status("8", allocation={
            "devices": {"results": [{"request": "nic", "driver": "nic.example.com",
                                     "pool": "fabric", "device": "port-3"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "rack", "operator": "In", "values": ["r1", "r2"]},
                {"key": "fabric", "operator": "Exists"}]}]}},
            reservedFor=POD_JSON)]),
    "admin access, usable everywhere": Case(devices(ADMIN), claim(), [
        finalizer(), status("8", allocation={"devices": {"results": [
            {"request": "gpu", "driver": D, "pool": "node-1", "device": "gpu-0",
             "adminAccess": True}]}}, reservedFor=POD_JSON)]),
    "the finalizer kept beside others, not added twice": Case(
        devices(), claim(finalizers=["other/f", DELETE_PROTECTION]), [
            status("7", allocation=LOCAL_JSON, reservedFor=POD_JSON)]),
    "allocated already (shared): only reserved": Case(
        devices(None), claim(LOCAL_JSON, [OTHER]), [
            status("7", reservedFor=[OTHER, *POD_JSON])]),
    "an idempotent retry reserves what is missing": Case(
        devices(), claim(LOCAL_JSON, POD_JSON[:1]), [
            status("7", reservedFor=POD_JSON)]),
    "an idempotent retry with nothing missing writes nothing": Case(
        devices(), claim(LOCAL_JSON, POD_JSON)),
    "allocated meanwhile to other devices": Case(
        devices(), claim({"devices": {"results": [
            {"request": "gpu", "driver": D, "pool": "node-1", "device": "gpu-7"}]}}),
        failure="allocated meanwhile to gpu.example.com/node-1/gpu-7"),
    "deallocated since placement saw it allocated": Case(
        devices(None), claim(), failure="not allocated any more"),
    "changed between read and write (409)": Case(
        devices(), claim(), [finalizer()], failure="changed meanwhile", refuse=True),
    "too many consumers": Case(
        devices(), claim(reserved=[{"resource": "pods", "name": f"p{i}", "uid": f"p{i}"}
                                   for i in range(MAX_RESERVED_FOR - 1)]),
        failure=f"reserved for {MAX_RESERVED_FOR + 1} consumers, at most {MAX_RESERVED_FOR}"),
    "being deleted": Case(devices(), claim(deletionTimestamp="2026-01-01T00:00:00Z"),
                          failure="being deleted"),
    "class and claim config copied": Case(
        devices(config=allocation_config(SPEC, CLASSES, LOCAL)), claim(), [
            finalizer(), status("8", allocation={**LOCAL_JSON, "devices": {
                **LOCAL_JSON["devices"], "config": [
                    {"source": "FromClass", "requests": ["gpu"], "opaque": {
                        "driver": D, "parameters": {
                            "apiVersion": "gpu.example.com/v1", "kind": "GpuConfig",
                            "sharing": "TimeSlicing"}}},
                    {"source": "FromClaim", "requests": ["gpu"], "opaque": {
                        "driver": D, "parameters": {"kind": "GpuConfig", "mps": True}}}]}},
                reservedFor=POD_JSON)]),
}


def fake(obj: dict[str, Any]) -> FakeApi:
    api = FakeApi()
    api.objects[PATH] = copy.deepcopy(obj)
    return api


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_claim_gets_exactly_what_v1_wants(name: str) -> None:
    case = CASES[name]
    api = fake(case.before)
    if case.refuse:
        api.refuse.add(STATUS)
    out = PreBindWriter(api).apply([case.decision], "ns/g")  # type: ignore[arg-type]
    assert api.patches == case.patches
    if case.failure:
        assert not out.ok and case.failure in out.failure and not out.fenced
    else:
        assert out.ok and out.done == (case.decision,)


def test_undo_clears_an_allocation_nobody_else_uses() -> None:
    api = fake(claim())
    writer = PreBindWriter(api)  # type: ignore[arg-type]
    assert writer.apply([devices()]).ok
    writer.undo([devices()])
    assert api.patches[-1] == status("9", reservedFor=None, allocation=None)
    assert api.objects[PATH]["status"] == {}
    # The finalizer stays: the resourceclaim controller removes it from an unused claim.
    assert api.objects[PATH]["metadata"]["finalizers"] == [DELETE_PROTECTION]


def test_undo_keeps_other_consumers_and_their_allocation() -> None:
    """Someone reserved the claim meanwhile: only the gang's pods go, the devices stay."""
    api = fake(claim(LOCAL_JSON, [*POD_JSON, OTHER]))
    PreBindWriter(api).undo([devices()])  # type: ignore[arg-type]
    assert api.patches == [status("7", reservedFor=[OTHER])]
    assert api.objects[PATH]["status"]["allocation"] == LOCAL_JSON


def test_undo_of_a_reservation_leaves_the_allocation() -> None:
    api = fake(claim(LOCAL_JSON, POD_JSON))
    PreBindWriter(api).undo([devices(None)])  # type: ignore[arg-type]
    assert api.patches == [status("7", reservedFor=None)]
    assert api.objects[PATH]["status"] == {"allocation": LOCAL_JSON}


def test_undo_leaves_devices_allocated_to_others_and_a_gone_claim() -> None:
    other = {"devices": {"results": [
        {"request": "gpu", "driver": D, "pool": "node-1", "device": "gpu-7"}]}}
    api = fake(claim(other))
    writer = PreBindWriter(api)  # type: ignore[arg-type]
    writer.undo([devices()])
    del api.objects[PATH]
    writer.undo([devices()])
    assert api.patches == []


class FencedApi(FakeApi):
    """Reads answered; every write refused by the leader fence."""

    def request(self, method: str, path: str, *, body: Any = None, **kw: Any) -> Response:
        if method != "GET":
            raise Fenced(f"{method} {path}: not sent, fenced")
        return super().request(method, path, body=body, **kw)


def test_a_fenced_write_fails_as_fenced_and_takes_nothing_back() -> None:
    api = FencedApi()
    api.objects[PATH] = claim()
    out = PreBindWriter(api).apply([devices()], "ns/g")  # type: ignore[arg-type]
    assert not out.ok and out.fenced and out.failure.startswith("fenced: ")
    assert api.objects[PATH] == claim()
    PreBindWriter(api).undo([devices()], "ns/g")  # type: ignore[arg-type]
    assert api.objects[PATH] == claim()  # the undo refused as well (logged only)


# The config an allocation carries (kube-scheduler's order) ------------------------------------
def _entry(source: ConfigSource, c: DeviceConfig, *requests: str) -> AllocatedConfig:
    return AllocatedConfig(source, replace(c, requests=requests))


def test_config_classes_first_once_each_then_the_claims() -> None:
    a, b = DeviceConfig(D, '{"a":1}'), DeviceConfig(D, '{"b":2}')
    nic = DeviceConfig("nic.example.com", '{"n":3}')
    everywhere = DeviceConfig(D, '{"all":true}')
    for_two = DeviceConfig(D, '{"two":true}', ("gpu", "nic/rdma"))
    spec = ClaimSpec((
        Request("gpu", (Ask("gpu", "gpu"),)),
        Request("nic", (Ask("nic/rdma", "rdma"), Ask("nic/any", "nic")), first_available=True),
        Request("more", (Ask("more", "gpu"),))), config=(everywhere, for_two))
    classes = {"gpu": DeviceClass("gpu", config=(a, b)), "nic": DeviceClass("nic"),
               "rdma": DeviceClass("rdma", config=(nic,))}
    allocation = Allocation((DeviceResult("gpu", DeviceId(D, "p", "g0")),
                             DeviceResult("nic/rdma", DeviceId("nic.example.com", "p", "n0")),
                             DeviceResult("more", DeviceId(D, "p", "g1"))))
    assert allocation_config(spec, classes, allocation) == (
        _entry(ConfigSource.FROM_CLASS, a, "gpu", "more"),
        _entry(ConfigSource.FROM_CLASS, b, "gpu", "more"),
        _entry(ConfigSource.FROM_CLASS, nic, "nic/rdma"),
        _entry(ConfigSource.FROM_CLAIM, everywhere),
        # Once per request it names, as kube-scheduler repeats it.
        _entry(ConfigSource.FROM_CLAIM, for_two, "gpu", "nic/rdma"),
        _entry(ConfigSource.FROM_CLAIM, for_two, "gpu", "nic/rdma"))
    # The other sub-request chosen: its class, and the claim's entry only for "gpu".
    other = replace(allocation, results=(allocation.results[0], DeviceResult(
        "nic/any", DeviceId("nic.example.com", "p", "n1")), allocation.results[2]))
    assert allocation_config(spec, classes, other) == (
        _entry(ConfigSource.FROM_CLASS, a, "gpu", "more"),
        _entry(ConfigSource.FROM_CLASS, b, "gpu", "more"),
        _entry(ConfigSource.FROM_CLAIM, everywhere),
        _entry(ConfigSource.FROM_CLAIM, for_two, "gpu", "nic/rdma"))
    with pytest.raises(ValueError, match="no DeviceClass 'rdma'"):
        allocation_config(spec, {"gpu": classes["gpu"]}, allocation)


def test_config_needs_an_allocation_and_a_device_decision() -> None:
    config = allocation_config(SPEC, CLASSES, LOCAL)
    with pytest.raises(ValueError, match="config without an allocation"):
        devices(None, config=config)
    with pytest.raises(ValueError, match="carries devices"):
        PreBind("ns/ckpt", PreBindKind.SELECTED_NODE, "node-1", config=config)
