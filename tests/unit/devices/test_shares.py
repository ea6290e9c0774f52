"""Consumable capacity (issue 36): a device that allows multiple allocations is shared by
requests for parts of its capacity, never over it, counting the shares the cluster's claims
already hold; what one request takes follows the capacity's requestPolicy as upstream does;
a share that does not fit is named with its device and amounts; and the allocation is read
and written with ``shareID`` and ``consumedCapacity``."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.kube.read.devices_convert import resource_claim
from scheduler.kube.read.fields import ConversionError
from scheduler.kube.read.slices_convert import resource_slice
from scheduler.kube.write.claim_allocation import allocation_json
from scheduler.model.device_capacity import (
    UNBOUNDED_SHARES,
    consumption,
    most_shares,
    overflow,
)
from scheduler.model.devices import (
    Allocation,
    AllocationMode,
    CapacityPolicy,
    Device,
    ResourceClaim,
    consumed_capacity,
)
from scheduler.placement.device_gang import allocate_gang
from scheduler.placement.device_outcome import DeviceMisfit, NodeAllocation
from scheduler.placement.device_pools import node_devices
from scheduler.placement.devices import allocate
from tests.unit.devices.builders import CLASSES, D, ask, claim, node_slice

GI = 2**30
MEM = f"{D}/memory"


def shared_gpu(i: int, gib: int = 40, policy: CapacityPolicy | None = None) -> Device:
    return Device(f"gpu-{i}", ((f"{D}/index", i),), ((MEM, Fraction(gib * GI)),), (), True,
                  ((MEM, policy),) if policy else ())


def share_claim(name: str, gib: float | None, count: int = 1) -> ResourceClaim:
    a = ask("gpu", count)
    if gib is not None:
        a = replace(a, capacity=(("memory", Fraction(gib) * GI),))
    return claim(name, a)


def shares(answer: NodeAllocation | DeviceMisfit) -> dict[str, list[tuple[str, int]]]:
    assert isinstance(answer, NodeAllocation), answer
    return {key: [(r.device.device, int(dict(r.consumed).get(MEM, 0)) // GI)
                  for r in a.results] for key, a in answer.allocations}


NODE = node_devices([node_slice("n1", (shared_gpu(0), shared_gpu(1)))], "n1", {})
STEP_4GI = CapacityPolicy(default=Fraction(4 * GI), minimum=Fraction(4 * GI),
                          step=Fraction(4 * GI))


@pytest.mark.parametrize(("title", "asked", "device", "taken"), [
    ("a named amount is taken as is", {"memory": Fraction(10 * GI)}, shared_gpu(0), 10),
    ("no amount and no policy: the whole capacity", {}, shared_gpu(0), 40),
    ("no amount: the policy's default", {}, shared_gpu(0, policy=STEP_4GI), 4),
    ("rounded up to min + n*step", {"memory": Fraction(9 * GI)},
     shared_gpu(0, policy=STEP_4GI), 12),
    ("below the minimum: the minimum", {"memory": Fraction(GI)},
     shared_gpu(0, policy=STEP_4GI), 4),
    ("up to the next valid value", {"memory": Fraction(15 * GI)},
     shared_gpu(0, policy=CapacityPolicy(Fraction(10 * GI),
                                         (Fraction(10 * GI), Fraction(20 * GI)))), 20),
])
def test_what_a_request_takes_follows_the_request_policy(
        title: str, asked: dict[str, Fraction], device: Device, taken: int) -> None:
    got = consumption(asked, device, D)
    assert got == {MEM: Fraction(taken * GI)}, title


@pytest.mark.parametrize(("title", "asked", "device", "reason"), [
    ("a capacity the device does not have", {"cores": Fraction(1)}, shared_gpu(0),
     f"device gpu-0 has no capacity {D}/cores"),
    ("above every valid value", {"memory": Fraction(30 * GI)},
     shared_gpu(0, policy=CapacityPolicy(Fraction(10 * GI), (Fraction(10 * GI),))),
     "memory 30Gi not allowed by its requestPolicy"),
    ("above the range's maximum", {"memory": Fraction(30 * GI)},
     shared_gpu(0, policy=replace(STEP_4GI, maximum=Fraction(20 * GI))),
     "memory 32Gi not allowed by its requestPolicy"),
])
def test_a_request_the_policy_refuses_names_the_device(
        title: str, asked: dict[str, Fraction], device: Device, reason: str) -> None:
    got = consumption(asked, device, D)
    assert isinstance(got, str) and reason in got, title


def test_overflow_names_the_share_and_what_is_free() -> None:
    why = overflow(shared_gpu(0), {MEM: Fraction(30 * GI)}, {MEM: Fraction(20 * GI)})
    assert why == f"device gpu-0: a share of {MEM} 20Gi does not fit, 10Gi of 40Gi free"
    assert overflow(shared_gpu(0), {MEM: Fraction(20 * GI)}, {MEM: Fraction(20 * GI)}) is None


@pytest.mark.parametrize(("title", "claims", "expected"), [
    ("four halves fill two GPUs, in device order",
     [share_claim(f"c{i}", 20) for i in range(4)],
     {"ns/c0": [("gpu-0", 20)], "ns/c1": [("gpu-0", 20)], "ns/c2": [("gpu-1", 20)],
      "ns/c3": [("gpu-1", 20)]}),
    ("a whole-capacity request takes a device alone",
     [share_claim("c0", None), share_claim("c1", 10)],
     {"ns/c0": [("gpu-0", 40)], "ns/c1": [("gpu-1", 10)]}),
    ("one claim's two devices are two shares", [share_claim("c0", 30, count=2)],
     {"ns/c0": [("gpu-0", 30), ("gpu-1", 30)]}),
])
def test_shares_are_packed_within_capacity(title: str, claims: list[ResourceClaim],
                                           expected: dict[str, list[tuple[str, int]]]) -> None:
    assert shares(allocate(NODE, claims, CLASSES)) == expected, title


def test_the_clusters_shares_count_and_a_misfit_names_the_share() -> None:
    first = allocate(NODE, [share_claim(f"c{i}", 20) for i in range(4)], CLASSES)
    assert isinstance(first, NodeAllocation)
    running = [replace(share_claim(f"c{i}", 20), allocation=a)
               for i, (_, a) in enumerate(first.allocations)]
    consumed = consumed_capacity(running)
    assert consumed == {d: {MEM: Fraction(40 * GI)} for d in first.devices}
    late = allocate(NODE, [share_claim("late", 20)], CLASSES, consumed=consumed)
    assert isinstance(late, DeviceMisfit)
    assert f"device gpu-1: a share of {MEM} 20Gi does not fit, 0 of 40Gi free" in late.reason
    smaller = allocate(NODE, [share_claim("late", 20)], CLASSES,
                       consumed={d: {MEM: Fraction(20 * GI)} for d in first.devices})
    assert shares(smaller) == {"ns/late": [("gpu-0", 20)]}


def test_a_gang_of_halves_waits_whole_when_one_does_not_fit() -> None:
    claims = [share_claim(f"c{i}", 20) for i in range(5)]
    answer = allocate_gang({"n1": claims}, {"n1": NODE}, CLASSES, {"n1": {}})
    assert isinstance(answer, DeviceMisfit)
    assert "20Gi does not fit" in answer.reason


def test_share_ids_are_distinct_uuids_and_repeatable() -> None:
    claims = [share_claim(f"c{i}", 10) for i in range(4)]
    one, two = allocate(NODE, claims, CLASSES), allocate(NODE, claims, CLASSES)
    assert isinstance(one, NodeAllocation) and one == two
    ids = [r.share_id for _, a in one.allocations for r in a.results]
    assert len(set(ids)) == 4 and all(len(i) == 36 for i in ids)


@settings(max_examples=150, deadline=None)
@given(gibs=st.lists(st.one_of(st.none(), st.integers(1, 40)), min_size=1, max_size=6),
       used=st.lists(st.integers(0, 40), min_size=2, max_size=2),
       step=st.booleans())
def test_never_over_a_devices_capacity(gibs: list[int | None], used: list[int],
                                       step: bool) -> None:
    """Whatever is asked and however full the devices are, the shares on each device, with
    the cluster's, stay within its capacity; and a refusal means some claim alone cannot
    fit anywhere or the sum of what they take exceeds what is free."""
    policy = STEP_4GI if step else None
    devices = (shared_gpu(0, policy=policy), shared_gpu(1, policy=policy))
    node = node_devices([node_slice("n1", devices)], "n1", {})
    ids = [o.id for o in node.offered()]
    consumed = {ids[i]: {MEM: Fraction(u * GI)} for i, u in enumerate(used)}
    claims = [share_claim(f"c{i}", g) for i, g in enumerate(gibs)]
    answer = allocate(node, claims, CLASSES, consumed=consumed)
    if isinstance(answer, DeviceMisfit):
        return
    total = {d: dict(c) for d, c in consumed.items()}
    for _, allocation in answer.allocations:
        for r in allocation.results:
            assert r.share_id
            total[r.device][MEM] += dict(r.consumed)[MEM]
    assert all(t[MEM] <= 40 * GI for t in total.values()), total


def _slice_json(policy: dict[str, Any] | None = None) -> dict[str, Any]:
    cap: dict[str, Any] = {"value": "40Gi"}
    if policy is not None:
        cap["requestPolicy"] = policy
    return {"metadata": {"name": "s"},
            "spec": {"driver": D, "nodeName": "n1", "pool": {"name": "n1", "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0", "allowMultipleAllocations": True,
                                  "capacity": {"memory": cap}}]}}


def test_a_shareable_device_and_its_policy_are_read() -> None:
    policy = {"default": "4Gi", "validRange": {"min": "4Gi", "step": "4Gi"}}
    device = resource_slice(_slice_json(policy)).devices[0]
    assert device.shareable and not device.unsupported
    assert device.policies == ((MEM, STEP_4GI),)


def test_a_request_policy_on_a_device_held_whole_is_refused_by_name() -> None:
    raw = _slice_json({"default": "4Gi"})
    del raw["spec"]["devices"][0]["allowMultipleAllocations"]
    with pytest.raises(ConversionError, match=r"capacity\[memory\]\.requestPolicy"):
        resource_slice(raw)


def test_a_claim_with_shares_round_trips_through_the_writer() -> None:
    answer = allocate(NODE, [share_claim("c0", 20)], CLASSES)
    assert isinstance(answer, NodeAllocation)
    allocation: Allocation = answer.as_dict()["ns/c0"]
    written = allocation_json(allocation)
    result = written["devices"]["results"][0]
    assert result["consumedCapacity"] == {"memory": str(20 * GI)}
    assert result["shareID"] == allocation.results[0].share_id
    raw = {"metadata": {"name": "c0", "namespace": "ns"},
           "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
               "deviceClassName": "gpu", "capacity": {"requests": {"memory": "20Gi"}}}}]}},
           "status": {"allocation": written}}
    read = resource_claim(raw)
    assert read.allocation is not None and read.allocation.results == allocation.results
    assert read.spec.requests[0].asks[0].capacity == (("memory", Fraction(20 * GI)),)


def test_most_shares_bounds_what_a_shareable_device_may_still_serve() -> None:
    assert most_shares(shared_gpu(0, policy=STEP_4GI), {MEM: Fraction(32 * GI)}) == 2
    assert most_shares(shared_gpu(0), {}) == UNBOUNDED_SHARES


def test_all_takes_the_selected_devices_with_room_for_the_request() -> None:
    """Upstream's rule: an ``All`` request with consumable capacity takes every selected
    device that can still hold its share, not every device selected."""
    everything = replace(ask("gpu"), mode=AllocationMode.ALL, count=0)
    node_ids = [o.id for o in NODE.offered()]
    answer = allocate(NODE, [claim("c0", everything)], CLASSES,
                      consumed={node_ids[0]: {MEM: Fraction(GI)}})
    assert shares(answer) == {"ns/c0": [("gpu-1", 40)]}
