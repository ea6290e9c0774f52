"""A gang whose pods name ResourceClaims is seen with them resolved against the device
inventory, and waits with a reason naming the pod, its entry and the claim when a claim is
not made yet, not found, or one no node could serve (its DeviceClass not found, a selector
that does not compile); with every claim sound but no node offering devices, it waits naming
that. Real objects of tests/data/dra fed through the informers' handlers into the cache,
decided by ``decide``. Placement with devices: ``test_gang_placement``."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan, PendingReason, ReasonCategory
from scheduler.feed.cache import ClusterCache
from scheduler.kube.read import feed, informer
from scheduler.kube.read.informer import EventType
from tests.unit.kube.fakes import FakeClient
from tests.unit.policies.builders import SOLVE, nodes, policies, queue

DRA = Path(__file__).parents[2] / "data" / "dra"
NOW = 2_000_000_000.0


def load(name: str) -> dict[str, Any]:
    return dict(json.loads((DRA / name).read_text()))


CLAIM = load("resourceclaim-allocated.json")  # made from the template for the pod below
NAMESPACE = CLAIM["metadata"]["namespace"]
MADE = CLAIM["metadata"]["name"]


def pending_pod(entries: list[dict[str, str]] | None = None, made: str | None = MADE
                ) -> dict[str, Any]:
    """The real pod, pending for gang-scheduler; *made*: the claim its status names."""
    pod = copy.deepcopy(load("pod-with-claim.json"))
    pod["spec"]["schedulerName"] = "gang-scheduler"
    for field in ("nodeName", "schedulingGroup", "nodeSelector"):  # a gang of one, any node
        pod["spec"].pop(field, None)
    pod["metadata"].pop("ownerReferences")  # its Job is not fed here
    pod["status"] = {"phase": "Pending"}
    if entries is not None:
        pod["spec"]["resourceClaims"] = entries
    if made is not None:
        pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": made}]
    return pod


@dataclass(frozen=True)
class Case:
    name: str
    pod: dict[str, Any]
    objects: tuple[tuple[informer.ResourceKind, dict[str, Any]], ...]
    says: tuple[str, ...]  # in the pending reason's message


TEMPLATE = (informer.CLAIM_TEMPLATES, load("resourceclaimtemplate.json"))
H100 = load("deviceclass.json")
CLASS = H100["metadata"]["name"]


def broken_class() -> dict[str, Any]:
    cls = copy.deepcopy(H100)
    cls["spec"]["selectors"][0]["cel"]["expression"] = "device.driver =="
    return cls


def claim_selecting(expression: str) -> dict[str, Any]:
    claim = copy.deepcopy(CLAIM)
    claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": expression}}]
    return claim


def cel_claim() -> dict[str, Any]:
    """The real claim with a quantity selector (of another namespace), as this pod's."""
    claim = load("resourceclaim-cel-allocated.json")
    claim["metadata"]["namespace"] = NAMESPACE
    return claim


WHO = f"claim {NAMESPACE}/{MADE}, request gpu"
CASES = [
    Case("template claim not made yet", pending_pod(made=None),
         (TEMPLATE, (informer.DEVICE_CLASSES, load("deviceclass.json"))),
         ("spec.resourceClaims entry gpu (template one-h100): its ResourceClaim does not "
          "exist yet",)),
    Case("a template whose class does not exist, before its claim is made",
         pending_pod(made=None), (TEMPLATE,),
         ("spec.resourceClaims entry gpu (template one-h100): request gpu: device class "
          "nvidia-h100-80gb-hbm3.gpu.example.com not found",)),
    Case("a template not found", pending_pod(made=None), (),
         ("spec.resourceClaims entry gpu (template one-h100): resourceclaimtemplate one-h100 "
          "not found",)),
    Case("template claim made but not seen", pending_pod(), (TEMPLATE,),
         (f"resourceclaim {MADE} not found",)),
    Case("named claim not found",
         pending_pod([{"name": "gpu", "resourceClaimName": "shared"}], made=None), (),
         ("spec.resourceClaims entry gpu (claim shared): resourceclaim shared not found",)),
    Case("the claim's DeviceClass not found", pending_pod(),
         (TEMPLATE, (informer.RESOURCE_CLAIMS, CLAIM)),
         (f"{WHO}: device class {CLASS} not found",)),
    Case("a class selector that does not compile", pending_pod(),
         ((informer.RESOURCE_CLAIMS, CLAIM), (informer.DEVICE_CLASSES, broken_class())),
         (f"{WHO}: class {CLASS}: selector #0: CEL compile error",)),
    Case("a request selector that does not compile", pending_pod(),
         ((informer.RESOURCE_CLAIMS, claim_selecting("device.attributes[")),
          (informer.DEVICE_CLASSES, H100)),
         (f"{WHO}: selector #0 (class {CLASS}): CEL compile error",)),
]

#: Every claim sound, but the slice is another node's (the dev cluster's): no node here
#: offers a device, and the reason says so (a wait: a driver may publish devices).
NO_DEVICES = [
    Case("every claim there, no devices on these nodes", pending_pod(),
         (TEMPLATE, (informer.RESOURCE_CLAIMS, CLAIM),
          (informer.DEVICE_CLASSES, load("deviceclass.json")),
          (informer.RESOURCE_SLICES, load("resourceslice.json"))), ()),
    Case("a quantity selector compiles", pending_pod(
        [{"name": "gpu", "resourceClaimName": cel_claim()["metadata"]["name"]}], made=None),
         ((informer.RESOURCE_CLAIMS, cel_claim()),
          (informer.DEVICE_CLASSES, load("deviceclass-driver.json"))), ()),
]


def plan_of(case: Case) -> CyclePlan:
    cache = ClusterCache()
    handlers = {i.kind: i.handler for i in feed.cache_informers(FakeClient(), cache)}  # type: ignore[arg-type]
    for node in nodes("a100", 2):
        cache.upsert_node(node)
    for kind, obj in case.objects:
        handlers[kind](EventType.ADDED, obj)
    handlers[informer.PODS](EventType.ADDED, case.pod)
    inp = cache.cycle_input(NOW)
    assert len(inp.gangs.pending) == 1
    return decide(inp.snapshot, inp.gangs.pending, policies(queue("default", quota={"a100": 64})),
                  NOW, None, solver=SOLVE)


def reason_of(case: Case) -> PendingReason:
    plan = plan_of(case)
    assert not plan.binds
    (reason,) = plan.pending.values()
    return reason


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_gang_with_device_claims_waits_naming_pod_entry_and_claim(case: Case) -> None:
    reason = reason_of(case)
    assert reason.category is ReasonCategory.DEVICES
    pod = case.pod["metadata"]
    assert reason.message.startswith(f"pod {NAMESPACE}/{pod['name']}: "), reason.message
    for text in case.says:
        assert text in reason.message, reason.message


@pytest.mark.parametrize("case", NO_DEVICES, ids=[c.name for c in NO_DEVICES])
def test_sound_claims_without_devices_wait_naming_the_missing_slices(case: Case) -> None:
    reason = reason_of(case)
    assert reason.category is ReasonCategory.DEVICES
    assert ("all 2 eligible nodes are ruled out: 2 by devices: no ResourceSlice offers "
            "devices on the node") in reason.message, reason.message


def test_an_entry_that_needs_no_claim_asks_for_no_devices() -> None:
    pod = pending_pod(made=None)
    pod["status"]["resourceClaimStatuses"] = [{"name": "gpu"}]
    plan = plan_of(Case("none needed", pod, (TEMPLATE,), ()))
    assert [b.gang_id for b in plan.binds] == [f"{NAMESPACE}/{pod['metadata']['name']}"]
