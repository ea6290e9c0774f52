"""Partitionable devices (issue 36, MIG): a device that consumes counters takes them from
its pool's counter set, never past the set's values, counting every allocated device (any
claim's, kube-scheduler's included); a whole GPU and the MIG devices of the same GPU
exclude each other through the counters alone; a reason names the GPU (the set) and the
counter that did not fit; an allocated MIG device counts its largest counter fraction of a
GPU. The devices are the fake driver's (``dra_mig``), read back by the slice reader."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.kube.read.fields import ConversionError
from scheduler.kube.read.slices_convert import resource_slice
from scheduler.model.demand import claim_milli
from scheduler.model.device_counters import (
    left,
    partition_fraction,
    pool_problem,
    shortfall,
)
from scheduler.model.device_inventory import DeviceInventory
from scheduler.model.devices import (
    Allocation,
    CounterSet,
    Device,
    DeviceClass,
    DeviceId,
    DeviceResult,
    DeviceSlice,
    PoolRef,
    ResourceClaim,
    allocated_devices,
    consumed_capacity,
)
from scheduler.placement.device_gang import allocate_gang
from scheduler.placement.device_outcome import DeviceMisfit, NodeAllocation
from scheduler.placement.device_pools import node_devices
from scheduler.placement.devices import allocate
from scheduler.tools.devcluster import dra, dra_mig
from tests.unit.devices.builders import D, ask, claim
from tests.unit.devices.test_shares import GI, shared_gpu

CLASSES = {D: DeviceClass(D, (f'device.driver == "{D}"',))}
#: Selectors as a user writes them: a device without the attribute is no match, not an error.
WHOLE = f'"type" in device.attributes["{D}"] && device.attributes["{D}"].type == "gpu"'


def mig_node(name: str = "n1", gpus: int = 1) -> tuple[DeviceSlice, ...]:
    """The fake driver's slices for a MIG node, read as the scheduler reads them."""
    node = {"metadata": {"name": name, "uid": f"uid-{name}",
                         "labels": {dra.MIG_GPUS_LABEL: "true"}},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}}}
    return tuple(resource_slice(body) for body in dra.resource_slices(node))


def profile(p: str) -> str:
    return f'"profile" in device.attributes["{D}"] && device.attributes["{D}"].profile == "{p}"'


def wants(name: str, *kinds: str) -> ResourceClaim:
    """A claim with one request per kind: a MIG profile, or "gpu" for a whole GPU."""
    return claim(name, *(ask(f"r{i}", 1, D, WHOLE if k == "gpu" else profile(k))
                         for i, k in enumerate(kinds)))


def holding(name: str, *devices: str, node: str = "n1") -> ResourceClaim:
    """A claim someone (kube-scheduler, say) has allocated these devices to."""
    results = tuple(DeviceResult(f"r{i}", DeviceId(D, node, d)) for i, d in enumerate(devices))
    return replace(wants(name, *("gpu",) * len(devices)), allocation=Allocation(results))


def run(claims: list[ResourceClaim], held: tuple[ResourceClaim, ...] = (), gpus: int = 1,
        ) -> NodeAllocation | DeviceMisfit:
    nd = node_devices(mig_node(gpus=gpus), "n1", {})
    return allocate(nd, claims, CLASSES, allocated_devices(held),
                    consumed=consumed_capacity(held))


def got(answer: NodeAllocation | DeviceMisfit) -> dict[str, list[str]] | str:
    if isinstance(answer, DeviceMisfit):
        return answer.describe()
    return {key.split("/")[1]: [r.device.device for r in a.results]
            for key, a in answer.allocations}


def mig(gpu: int, p: str, k: int) -> str:
    return dra_mig.mig_device_name(f"gpu-{gpu}", p, k)


CASES = [
    ("two 3g.40gb share one GPU", 1, (), [wants("a", "3g.40gb"), wants("b", "3g.40gb")],
     {"a": [mig(0, "3g.40gb", 0)], "b": [mig(0, "3g.40gb", 1)]}),
    ("a 3g.40gb beside three 2g.20gb: the third does not fit the compute slices", 1, (),
     [wants("a", "3g.40gb", "2g.20gb", "2g.20gb", "2g.20gb")],
     "gpu-0: device gpu-0-mig-2g20gb-0 needs 2 compute-slices, 0 of 7 free"),
    ("a whole GPU held by kube-scheduler leaves no slice of it", 1, (holding("ks", "gpu-0"),),
     [wants("a", "3g.40gb")], "gpu-0: device gpu-0-mig-3g40gb-1 needs 3 compute-slices, "
                              "0 of 7 free"),
    ("a slice held leaves no whole GPU", 1, (holding("ks", mig(0, "1g.10gb", 3)),),
     [wants("a", "gpu")], "gpu-0: device gpu-0 needs 7 compute-slices, 6 of 7 free"),
    ("a slice held on gpu-0 sends the whole GPU to gpu-1", 2,
     (holding("ks", mig(0, "1g.10gb", 0)),), [wants("a", "gpu")], {"a": ["gpu-1"]}),
    ("a 3g.40gb held: the next one names the memory slices", 1,
     (holding("ks", mig(0, "3g.40gb", 0), mig(0, "1g.10gb", 6)),), [wants("a", "3g.40gb")],
     "gpu-0: device gpu-0-mig-3g40gb-1 needs 4 memory-slices, 3 of 8 free"),
    ("a gang mixes a whole GPU and slices", 2, (),
     [wants("a", "gpu"), wants("b", "3g.40gb"), wants("c", "3g.40gb")],
     {"a": ["gpu-0"], "b": [mig(1, "3g.40gb", 0)], "c": [mig(1, "3g.40gb", 1)]}),
    ("a gang's slices leave no whole GPU", 1, (), [wants("a", "1g.10gb"), wants("b", "gpu")],
     "gpu-0: device gpu-0 needs 7 compute-slices, 6 of 7 free"),
]


@pytest.mark.parametrize(("gpus", "held", "claims", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_counters_decide_what_fits(gpus: int, held: tuple[ResourceClaim, ...],
                                   claims: list[ResourceClaim],
                                   expected: dict[str, list[str]] | str) -> None:
    answer = got(run(claims, held, gpus))
    if isinstance(expected, str):
        assert isinstance(answer, str) and expected in answer, answer
    else:
        assert answer == expected


def test_a_gang_across_nodes_counts_what_its_earlier_nodes_took_of_a_shared_pool() -> None:
    # A pool reaching every node (network-attached): the first node's choice takes the
    # counters the second node's search must not hand out again.
    slices = tuple(replace(s, node_name="", all_nodes=True) for s in mig_node())
    nodes = {n: node_devices(slices, n, {}) for n in ("n1", "n2")}
    answer = allocate_gang({"n1": [wants("a", "3g.40gb")], "n2": [wants("b", "7g.80gb")]},
                           nodes, CLASSES, {})
    assert isinstance(answer, DeviceMisfit)
    assert "gpu-0: device gpu-0-mig-7g80gb-0 needs 7 compute-slices, 4 of 7 free" in \
        answer.reason


def test_counters_that_do_not_add_up_make_the_pool_invalid() -> None:
    sets = (CounterSet("gpu-0", (("compute-slices", Fraction(7)),)),)
    device = Device("d", consumes=(("gpu-1", (("compute-slices", Fraction(1)),)),))
    assert pool_problem(sets, (device,)) == "device d: counter set gpu-1 not found"
    bad_counter = Device("d", consumes=(("gpu-0", (("memory", Fraction(1)),)),))
    assert pool_problem(sets, (bad_counter,)) == ("device d: counter memory not found in "
                                                 "counter set gpu-0")
    assert pool_problem(sets * 2, ()) == "duplicate counter set name gpu-0"
    pool = (DeviceSlice("a", D, PoolRef("n1", 0, 2), (device,), node_name="n1"),
            DeviceSlice("b", D, PoolRef("n1", 0, 2), counter_sets=sets, node_name="n1"))
    answer = allocate(node_devices(pool, "n1", {}), [claim("c", ask("r", 1, D))], CLASSES)
    assert isinstance(answer, DeviceMisfit) and "counter set gpu-1 not found" in answer.reason


def test_a_slice_with_devices_and_counter_sets_is_refused_by_field() -> None:
    devices, counters = dra.resource_slices({
        "metadata": {"name": "n1", "uid": "u", "labels": {dra.MIG_GPUS_LABEL: "true"}},
        "status": {"allocatable": {"nvidia.com/gpu": "1"}}})
    both = {**devices, "spec": {**devices["spec"],
                                "sharedCounters": counters["spec"]["sharedCounters"]}}
    with pytest.raises(ConversionError, match="only one of sharedCounters and devices"):
        resource_slice(both)


def test_the_fake_driver_splits_a_big_node_within_the_api_limits() -> None:
    slices = mig_node(gpus=8)
    assert [len(s.devices) for s in slices] == [56, 56, 0]
    assert [len(s.counter_sets) for s in slices] == [0, 0, 8]
    assert {s.pool.slice_count for s in slices} == {3}


@pytest.mark.parametrize(("kind", "milli"), [("1g.10gb", 143), ("2g.20gb", 286),
                                             ("3g.40gb", 500), ("7g.80gb", 1000),
                                             ("gpu", 1000)])
def test_an_allocated_slice_counts_its_largest_counter_fraction(kind: str, milli: int) -> None:
    slices = mig_node()
    name = "gpu-0" if kind == "gpu" else mig(0, kind, 0)
    allocated = replace(wants("a", kind), allocation=Allocation(
        (DeviceResult("r0", DeviceId(D, "n1", name)),)))
    inventory = DeviceInventory.of(slices, CLASSES.values(), (allocated,))
    assert claim_milli(allocated, inventory) == milli
    assert claim_milli(wants("b", kind), inventory) == 1000  # whole until allocated


def test_partition_fraction_and_shortfall_read_the_sets() -> None:
    sets = {"gpu-0": {"compute-slices": Fraction(7), "memory-slices": Fraction(8)}}
    three = Device("m", consumes=(("gpu-0", (("compute-slices", Fraction(3)),
                                             ("memory-slices", Fraction(4)))),))
    assert partition_fraction(three, sets) == Fraction(1, 2)
    free, blocked = left(sets, {})
    assert shortfall(three, sets, free, {}) is None and blocked == ""
    free, _ = left(sets, {"gpu-0": {"memory-slices": Fraction(4)}})
    assert shortfall(three, sets, free, {"gpu-0": {"memory-slices": Fraction(1)}}) == (
        "gpu-0: device m needs 4 memory-slices, 3 of 8 free")
    # A set the cluster over-consumes (its driver shrank it) blocks the pool, as upstream.
    _, blocked = left({**sets, "gpu-1": {"compute-slices": Fraction(1)}},
                      {"gpu-1": {"compute-slices": Fraction(2)}})
    assert blocked == "gpu-1: compute-slices is over-consumed (2 of 1 taken)"


KINDS = ["gpu", *dra_mig.PROFILES]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 2), st.lists(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3),
                                   min_size=1, max_size=8), st.integers(1, 3))
def test_never_over_a_counter_set(gpus: int, asked: list[list[str]], batch: int) -> None:
    """Claims allocated in batches (a batch: one search, like a gang's node), each batch
    beside what the earlier ones hold: the counters of every allocated device never exceed
    its GPU's set, and a whole GPU never shares its GPU with a slice."""
    slices = mig_node(gpus=gpus)
    consumes = {d.name: dict(d.consumes) for s in slices for d in s.devices}
    held: list[ResourceClaim] = []
    claims = [wants(f"c{i}", *kinds) for i, kinds in enumerate(asked)]
    for start in range(0, len(claims), batch):
        todo = claims[start:start + batch]
        answer = run(todo, tuple(held), gpus)
        if isinstance(answer, DeviceMisfit):
            continue
        made = answer.as_dict()
        held += [replace(c, allocation=made[c.key]) for c in todo]
    used: dict[tuple[str, str], Fraction] = {}
    devices = [r.device.device for c in held if c.allocation for r in c.allocation.results]
    assert len(devices) == len(set(devices))
    for name in devices:
        for set_name, counters in consumes[name].items():
            for counter, amount in counters:
                used[(set_name, counter)] = used.get((set_name, counter), Fraction(0)) + amount
    for (set_name, counter), amount in used.items():
        assert amount <= dra_mig.WHOLE[counter], (set_name, counter, devices)
    for g in range(gpus):
        if f"gpu-{g}" in devices:
            assert not [d for d in devices if d.startswith(f"gpu-{g}-mig-")]


def test_a_gang_mixes_a_whole_gpu_a_share_and_a_slice_on_one_node() -> None:
    """The three kinds side by side: the whole GPU takes gpu-0's counters, so the slice
    goes to gpu-1; the share takes part of a shareable GPU of another pool."""
    shared = DeviceSlice("n1-shared", D, PoolRef("n1-shared"), (shared_gpu(9, gib=16),),
                         node_name="n1")
    nd = node_devices((*mig_node(gpus=2), shared), "n1", {})
    share = claim("s", replace(ask("r0", 1, D, f'device.attributes["{D}"].index == 9'),
                               capacity=(("memory", Fraction(8 * GI)),)))
    answer = allocate(nd, [wants("a", "gpu"), share, wants("b", "3g.40gb")], CLASSES)
    assert got(answer) == {"a": ["gpu-0"], "s": ["gpu-9"], "b": [mig(1, "3g.40gb", 0)]}
    assert isinstance(answer, NodeAllocation)
    (result,) = answer.as_dict()["ns/s"].results
    assert result.share_id and dict(result.consumed) == {f"{D}/memory": 8 * GI}
