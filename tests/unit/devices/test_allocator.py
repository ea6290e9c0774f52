"""The structured allocator on one node, case by case: each allocation mode, firstAvailable,
class and request selectors, matchAttribute (with the backtracking it needs), devices already
held, admin access, limits, pools, and the reasons for everything it refuses."""

from __future__ import annotations

import pytest

from scheduler.model.devices import (
    AllocationMode,
    Constraint,
    Device,
    DeviceClass,
    DeviceId,
    DeviceSlice,
    PoolRef,
    ResourceClaim,
)
from scheduler.model.pods import NodeSelectorRequirement, NodeSelectorTerm, SelectorOperator
from scheduler.placement.device_outcome import DeviceMisfit, NodeAllocation
from scheduler.placement.device_pools import node_devices
from scheduler.placement.devices import Held, allocate
from tests.unit.devices.builders import (
    CLASSES,
    D,
    ask,
    claim,
    eight_gpus,
    first_available,
    gpu,
    node_slice,
)

NUMA = Constraint(f"{D}/numa")


def held(*indexes: int, node: str = "n1") -> frozenset[DeviceId]:
    return frozenset(DeviceId(D, node, f"gpu-{i}") for i in indexes)


def run(*claims: ResourceClaim, taken: frozenset[DeviceId] = frozenset(),
        slices: tuple[DeviceSlice, ...] | None = None, **kw: object
        ) -> NodeAllocation | DeviceMisfit:
    nd = node_devices(slices if slices is not None else (eight_gpus(),), "n1",
                      {"rack": "r1"})
    return allocate(nd, claims, CLASSES, taken, **kw)  # type: ignore[arg-type]


def got(answer: NodeAllocation | DeviceMisfit) -> dict[str, list[tuple[str, str]]]:
    """claim name -> [(request, device)]."""
    assert isinstance(answer, NodeAllocation), answer
    return {k.split("/", 1)[1]: [(r.request, r.device.device) for r in a.results]
            for k, a in answer.allocations}


def why(answer: NodeAllocation | DeviceMisfit) -> str:
    assert isinstance(answer, DeviceMisfit), answer
    return answer.describe()


CASES: list[tuple[str, tuple[ResourceClaim, ...], frozenset[DeviceId],
                  dict[str, list[tuple[str, str]]]]] = [
    ("exact count takes the first devices",
     (claim("c", ask("r", 2)),), frozenset(),
     {"c": [("r", "gpu-0"), ("r", "gpu-1")]}),
    ("held devices are skipped",
     (claim("c", ask("r", 2)),), held(0, 2),
     {"c": [("r", "gpu-1"), ("r", "gpu-3")]}),
    ("All takes every device it selects",
     (claim("c", ask("r", 0, "gpu", f'device.attributes["{D}"].numa == 1',
                     mode=AllocationMode.ALL)),), frozenset(),
     {"c": [("r", f"gpu-{i}") for i in range(4, 8)]}),
    ("a request selector narrows the class",
     (claim("c", ask("r", 1, "a100", f'device.attributes["{D}"].index == 5')),), frozenset(),
     {"c": [("r", "gpu-5")]}),
    ("firstAvailable takes the first sub-request that can be had",
     (claim("c", first_available("x", ask("big", 9), ask("mid", 3), ask("small", 1))),),
     frozenset(),
     {"c": [("x/mid", "gpu-0"), ("x/mid", "gpu-1"), ("x/mid", "gpu-2")]}),
    ("firstAvailable prefers the first when it fits",
     (claim("c", first_available("x", ask("big", 8), ask("small", 1))),), frozenset(),
     {"c": [("x/big", f"gpu-{i}") for i in range(8)]}),
    ("matchAttribute backtracks past the first devices",
     (claim("c", ask("a", 1), ask("b", 3), constraints=(NUMA,)),), held(1),
     {"c": [("a", "gpu-4"), ("b", "gpu-5"), ("b", "gpu-6"), ("b", "gpu-7")]}),
    ("matchAttribute over listed requests leaves the others free",
     (claim("c", ask("a", 2), ask("b", 2), ask("c", 2),
            constraints=(Constraint(f"{D}/numa", ("a", "c")),)),), held(2),
     # a on NUMA 0 leaves c one free device there (gpu-2 is held): a moves to NUMA 1
     {"c": [("a", "gpu-4"), ("a", "gpu-5"), ("b", "gpu-0"), ("b", "gpu-1"),
            ("c", "gpu-6"), ("c", "gpu-7")]}),
    ("matchAttribute naming a firstAvailable request covers its sub-requests",
     (claim("c", ask("a", 3), first_available("x", ask("two", 2), ask("one", 1)),
            constraints=(Constraint(f"{D}/numa", ("a", "x")),)),), frozenset(),
     {"c": [("a", "gpu-0"), ("a", "gpu-1"), ("a", "gpu-2"), ("x/one", "gpu-3")]}),
    ("two claims share the node without sharing a device",
     (claim("c1", ask("r", 3)), claim("c2", ask("r", 3))), held(0),
     {"c1": [("r", "gpu-1"), ("r", "gpu-2"), ("r", "gpu-3")],
      "c2": [("r", "gpu-4"), ("r", "gpu-5"), ("r", "gpu-6")]}),
    ("the search backtracks into an earlier claim for a later claim's constraint",
     (claim("c1", ask("r", 2), constraints=(NUMA,)), claim("c2", ask("r", 4),
                                                           constraints=(NUMA,))), held(5),
     {"c1": [("r", "gpu-4"), ("r", "gpu-6")],
      "c2": [("r", "gpu-0"), ("r", "gpu-1"), ("r", "gpu-2"), ("r", "gpu-3")]}),
]


@pytest.mark.parametrize(("title", "claims", "taken", "expected"), CASES,
                         ids=[c[0] for c in CASES])
def test_allocations(title: str, claims: tuple[ResourceClaim, ...],
                     taken: frozenset[DeviceId], expected: dict[str, list[tuple[str, str]]]
                     ) -> None:
    assert got(run(*claims, taken=taken)) == expected


REASONS: list[tuple[str, tuple[ResourceClaim, ...], frozenset[DeviceId], str]] = [
    ("too few devices, and who holds the rest",
     (claim("c", ask("r", 8)),), held(0, 1),
     "claim ns/c, request r on node n1: needs 8 device(s) of class gpu, 6 free match, "
     "2 more held by other claims"),
    ("All with a device held",
     (claim("c", ask("r", 0, mode=AllocationMode.ALL)),), held(3),
     "asks for all devices of class gpu, 1 more held by other claims"),
    ("All with nothing matching",
     (claim("c", ask("r", 0, "gpu", f'device.attributes["{D}"].numa == 9',
                     mode=AllocationMode.ALL)),), frozenset(), "none match"),
    ("a constraint no set satisfies",
     (claim("c", ask("a", 3), ask("b", 2), constraints=(NUMA,)),), frozenset(),
     "claim ns/c on node n1: no set of free devices satisfies matchAttribute "
     f"{D}/numa"),
    ("a constraint on an attribute no device has",
     (claim("c", ask("a", 1), constraints=(Constraint(f"{D}/serial"),)),), frozenset(),
     f"matchAttribute {D}/serial"),
    ("claims that fit alone but not together",
     (claim("c1", ask("r", 5)), claim("c2", ask("r", 4))), frozenset(),
     "claims ns/c1, ns/c2 together need more devices than are free"),
    ("claims whose constraints cannot hold together",
     (claim("c1", ask("r", 3), constraints=(NUMA,)),
      claim("c2", ask("r", 3), constraints=(NUMA,))), held(5, 6),
     "together need more devices"),
    ("every firstAvailable alternative short",
     (claim("c", first_available("x", ask("big", 9), ask("huge", 12))),), frozenset(),
     "x/big: needs 9 device(s) of class gpu, 8 free match; x/huge: needs 12"),
    ("a missing class",
     (claim("c", ask("r", 1, "tpu")),), frozenset(), "request r on node n1: device class "
                                                      "tpu not found"),
    ("more than 32 devices for one claim",
     (claim("c", ask("r", 20), ask("s", 13)),), frozenset(),
     "33 devices requested, more than the limit of 32 per claim"),
    ("admin access when it is not enabled",
     (claim("c", ask("r", 1, admin=True)),), frozenset(), "admin access is requested"),
    ("an unsupported field of the claim",
     (claim("c", ask("r", 1), unsupported=("spec.devices.constraints[0].distinctAttribute",)),),
     frozenset(), "spec.devices.constraints[0].distinctAttribute not supported"),
    ("a request selector failing at evaluation",
     (claim("c", ask("r", 1, "gpu", f'device.attributes["{D}"].serial == "x"')),), frozenset(),
     "claim ns/c, request r on node n1: request r: selector #0: CEL runtime error: no such "
     "key: serial"),
    ("a request selector that does not compile",
     (claim("c", ask("r", 1, "gpu", "device.attributes[")),), frozenset(),
     "request r: selector #0: CEL compile error"),
]


@pytest.mark.parametrize(("title", "claims", "taken", "words"), REASONS,
                         ids=[r[0] for r in REASONS])
def test_reasons(title: str, claims: tuple[ResourceClaim, ...], taken: frozenset[DeviceId],
                 words: str) -> None:
    assert words in why(run(*claims, taken=taken))


def test_a_class_selector_error_names_the_class() -> None:
    classes = {"bad": DeviceClass("bad", ("device.attributes['x'].y == 1",))}
    nd = node_devices((eight_gpus(),), "n1", {})
    answer = allocate(nd, (claim("c", ask("r", 1, "bad")),), classes)
    assert "class bad: selector #0: CEL runtime error" in why(answer)


def test_admin_access_when_allowed_uses_held_devices_and_holds_none() -> None:
    answer = run(claim("mon", ask("r", 2, admin=True)), taken=held(0, 1), admin_access=True)
    assert isinstance(answer, NodeAllocation)
    assert got(answer) == {"mon": [("r", "gpu-0"), ("r", "gpu-1")]}
    assert all(r.admin_access for _, a in answer.allocations for r in a.results)
    assert answer.devices == frozenset()


def test_devices_with_unsupported_fields_are_left_out_and_said_so() -> None:
    tainted = Device("gpu-9", ((f"{D}/numa", 0),), unsupported=("taints",))
    s = node_slice("n1", (gpu(0), tainted))
    assert got(run(claim("c", ask("r", 1)), slices=(s,))) == {"c": [("r", "gpu-0")]}
    reason = why(run(claim("c", ask("r", 2)), slices=(s,)))
    assert f"left out: {D}/n1/gpu-9: taints not supported" in reason


def test_only_the_newest_complete_generation_counts() -> None:
    old = node_slice("n1", (gpu(0), gpu(1)), generation=1)
    new = node_slice("n1", (gpu(5),), generation=2, name="n1-new")
    assert got(run(claim("c", ask("r", 1)), slices=(old, new))) == {"c": [("r", "gpu-5")]}
    half = node_slice("n1", (gpu(5),), generation=3, count=2, name="n1-half")
    answer = run(claim("c", ask("r", 1)), slices=(old, new, half))
    assert "incomplete" in why(answer)
    every = run(claim("c", ask("r", 0, mode=AllocationMode.ALL)), slices=(old, new, half))
    assert "asks for all devices, but pool gpu.example.com/n1 is being updated" in why(every)


def test_a_pool_with_a_device_twice_or_per_device_node_selection_is_not_used() -> None:
    twice = (node_slice("n1", (gpu(0),), count=2, name="a"),
             node_slice("n1", (gpu(0),), count=2, name="b"))
    assert "duplicate device name gpu-0" in why(run(claim("c", ask("r", 1)), slices=twice))
    counters = DeviceSlice("s", D, PoolRef("n1"), (gpu(0),), node_name="n1",
                           unsupported=("spec.perDeviceNodeSelection",))
    assert "spec.perDeviceNodeSelection not supported" in why(run(claim("c", ask("r", 1)),
                                                          slices=(counters,)))


def test_network_attached_devices_carry_their_slice_selector() -> None:
    rack = NodeSelectorTerm((NodeSelectorRequirement("rack", SelectorOperator.IN, ("r1",)),))
    net = DeviceSlice("fabric", D, PoolRef("fabric"), (gpu(0),), node_selector=rack)
    everywhere = DeviceSlice("cloud", D, PoolRef("cloud"), (gpu(7),), all_nodes=True)
    answer = run(claim("c", ask("r", 1)), claim("d", ask("r", 1)), slices=(net, everywhere))
    assert isinstance(answer, NodeAllocation)
    by_claim = answer.as_dict()  # pools in (driver, pool) order: "cloud" before "fabric"
    assert by_claim["ns/c"].results[0].device == DeviceId(D, "cloud", "gpu-7")
    assert by_claim["ns/c"].node_selector is None
    assert by_claim["ns/d"].node_selector == rack
    elsewhere = node_devices((net,), "n2", {"rack": "r2"})
    assert elsewhere.pools == ()


def test_the_search_gives_up_with_a_reason_after_its_budget() -> None:
    many = node_slice("n1", tuple(gpu(i, i % 8) for i in range(32)))
    hard = claim("c", ask("a", 4), ask("b", 4), constraints=(NUMA,))  # 4 per NUMA node
    assert "device search gave up after 50 steps" in why(run(hard, slices=(many,), budget=50))


def test_a_pool_being_replaced_without_this_node_is_ignored() -> None:
    """Generation 1 of a network pool spans two slices, one reaching this node; generation 2
    reaches other nodes only: generation 1 is obsolete, so nothing of the pool is used."""
    rack = NodeSelectorTerm((NodeSelectorRequirement("rack", SelectorOperator.IN, ("r1",)),))
    elsewhere = NodeSelectorTerm((NodeSelectorRequirement("rack", SelectorOperator.IN,
                                                          ("r2",)),))
    old = (DeviceSlice("a1", D, PoolRef("fabric", 1, 2), (gpu(0),), node_selector=rack),
           DeviceSlice("a2", D, PoolRef("fabric", 1, 2), (gpu(1),), node_selector=elsewhere))
    new = DeviceSlice("b", D, PoolRef("fabric", 2, 1), (gpu(0),), node_selector=elsewhere)
    assert node_devices((*old, new), "n1", {"rack": "r1"}).pools == ()
    (pool,) = node_devices(old, "n1", {"rack": "r1"}).pools  # complete: its devices for n1
    assert pool.usable and [o.id.device for o in pool.devices] == ["gpu-0"]


def test_alike_claims_one_device_short_are_refused_without_a_search() -> None:
    """Nine members' one-device claims on eight devices: trying every way of giving eight
    devices to nine alike claims takes factorially many steps; the count says no first,
    well inside a budget of 50 steps, and explains which request is short."""
    node = node_devices([eight_gpus()], "n1", {})
    claims = [claim(f"c{i}", ask("gpu")) for i in range(9)]
    quick = allocate(node, claims, CLASSES, budget=50, explain=False)
    assert isinstance(quick, DeviceMisfit) and "gave up" not in quick.reason
    explained = allocate(node, claims, CLASSES, budget=50)
    assert isinstance(explained, DeviceMisfit) and "gave up" not in explained.reason
    assert "together need more devices than are free" in explained.describe()
    # Eight fit, in the same budget.
    assert isinstance(allocate(node, claims[:8], CLASSES, budget=50), NodeAllocation)


def test_held_reads_several_sets_as_one() -> None:
    a, b = DeviceId("d", "p", "x"), DeviceId("d", "p", "y")
    held = Held(frozenset({a}), set(), {b})
    assert a in held and b in held and DeviceId("d", "p", "z") not in held
