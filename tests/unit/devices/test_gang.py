"""Devices for a whole gang's placement: every claim allocated or a reason, never part;
shared claims once; claims allocated before checked, not allocated again."""

from __future__ import annotations

from dataclasses import replace

from scheduler.model.devices import DeviceId, DeviceSlice, PoolRef
from scheduler.model.pods import NodeSelectorRequirement, NodeSelectorTerm, SelectorOperator
from scheduler.placement.device_gang import GangDevices, allocate_gang
from scheduler.placement.device_outcome import DeviceMisfit
from scheduler.placement.device_pools import node_devices
from tests.unit.devices.builders import CLASSES, D, ask, claim, eight_gpus, gpu

LABELS = {"n1": {"rack": "r1"}, "n2": {"rack": "r1"}, "n3": {"rack": "r2"}}
RACK = NodeSelectorTerm((NodeSelectorRequirement("rack", SelectorOperator.IN, ("r1",)),))
FABRIC = DeviceSlice("rack-r1", D, PoolRef("rack-r1"), (gpu(100), gpu(101)), node_selector=RACK)
# The rack pool sorts after the nodes' pools ("rack-r1" > "n3"): node-local GPUs go first.
SLICES = (eight_gpus("n1"), eight_gpus("n2"), eight_gpus("n3"), FABRIC)
NODES = {n: node_devices(SLICES, n, LABELS[n]) for n in LABELS}


def test_each_member_gets_devices_on_its_node() -> None:
    a, b, c = (claim(f"m{i}", ask("r", 8)) for i in range(3))
    answer = allocate_gang({"n1": [a], "n2": [b, c]}, NODES, CLASSES, LABELS)
    assert isinstance(answer, DeviceMisfit)  # n2 has 8 GPUs + 2 fabric, not 16
    answer = allocate_gang({"n1": [a], "n2": [b], "n3": [c]}, NODES, CLASSES, LABELS)
    assert isinstance(answer, GangDevices)
    pools = {key: {r.device.pool for r in alloc.results} for key, alloc in
             answer.by_claim().items()}
    assert pools == {"ns/m0": {"n1"}, "ns/m1": {"n2"}, "ns/m2": {"n3"}}
    assert len(answer.devices) == 24


def test_all_or_nothing() -> None:
    ok, greedy = claim("ok", ask("r", 1)), claim("greedy", ask("r", 11))
    answer = allocate_gang({"n1": [ok], "n2": [greedy]}, NODES, CLASSES, LABELS)
    assert isinstance(answer, DeviceMisfit)
    assert answer.claim == "ns/greedy" and answer.node == "n2"


def test_network_devices_are_not_handed_out_twice_across_nodes() -> None:
    fabric = [claim(f"f{i}", ask("r", 1, "gpu", f'device.attributes["{D}"].index >= 100'))
              for i in range(3)]
    answer = allocate_gang({"n1": fabric[:1], "n2": fabric[1:2]}, NODES, CLASSES, LABELS)
    assert isinstance(answer, GangDevices)
    assert answer.devices == {DeviceId(D, "rack-r1", "gpu-100"), DeviceId(D, "rack-r1", "gpu-101")}
    answer = allocate_gang({"n1": fabric[:1], "n2": fabric[1:]}, NODES, CLASSES, LABELS)
    assert isinstance(answer, DeviceMisfit) and "1 more held" not in answer.reason
    assert answer.node == "n2"


def test_held_devices_are_respected_across_the_gang() -> None:
    taken = frozenset(DeviceId(D, "n2", f"gpu-{i}") for i in range(4))
    fits = allocate_gang({"n2": [claim("m", ask("r", 6))]}, NODES, CLASSES, LABELS, taken)
    assert isinstance(fits, GangDevices) and not fits.devices & taken  # 4 local + 2 rack
    answer = allocate_gang({"n2": [claim("m", ask("r", 7))]}, NODES, CLASSES, LABELS, taken)
    assert isinstance(answer, DeviceMisfit)
    assert "needs 7 device(s) of class gpu, 6 free match, 4 more held by other claims" in (
        answer.reason)


def test_a_shared_claim_is_allocated_once() -> None:
    shared = claim("shared", ask("r", 1, "gpu", f'device.attributes["{D}"].index >= 100'))
    answer = allocate_gang({"n1": [shared, shared], "n2": [shared]}, NODES, CLASSES, LABELS)
    assert isinstance(answer, GangDevices)
    assert [key for key, _, _ in answer.allocations] == ["ns/shared"]


def test_a_shared_node_local_claim_pins_its_users_to_one_node() -> None:
    shared = claim("shared", ask("r", 1))
    answer = allocate_gang({"n1": [shared], "n2": [shared]}, NODES, CLASSES, LABELS)
    assert isinstance(answer, DeviceMisfit)
    assert answer.describe() == ("claim ns/shared on node n2: its devices (allocated for node "
                                 "n1) cannot be used from this node")


def test_claims_allocated_before_are_checked_not_allocated_again() -> None:
    first = allocate_gang({"n1": [claim("done", ask("r", 2))]}, NODES, CLASSES, LABELS)
    assert isinstance(first, GangDevices)
    done = replace(claim("done", ask("r", 2)), allocation=first.by_claim()["ns/done"])
    again = allocate_gang({"n1": [done]}, NODES, CLASSES, LABELS)
    assert again == GangDevices()
    elsewhere = allocate_gang({"n3": [done]}, NODES, CLASSES, LABELS)
    assert isinstance(elsewhere, DeviceMisfit) and "cannot be used from this node" in (
        elsewhere.reason)


def test_a_claim_refused_anywhere_is_refused_before_any_node() -> None:
    bad = claim("bad", ask("r", 1), unsupported=("spec.devices.requests[0].exactly.capacity",))
    answer = allocate_gang({"n1": [claim("ok", ask("r", 1))], "n2": [bad]}, NODES, CLASSES,
                           LABELS)
    assert isinstance(answer, DeviceMisfit) and answer.claim == "ns/bad"
    assert "exactly.capacity not supported" in answer.reason
