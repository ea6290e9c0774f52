"""HAMi's GPU-share convention (issue 36): a node's registered GPUs and a pod's
``nvidia.com/gpumem`` / ``gpucores`` ask read as consumable capacity, placed per GPU by the
DRA allocator across a gang (all or nothing, whole and fractional members mixed), and the
chosen GPUs written back in HAMi's pod annotation format."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from scheduler.kube.read import convert, hami_convert
from scheduler.kube.read.fields import ConversionError, FieldError
from scheduler.kube.write import hami_annotations
from scheduler.model import hami
from scheduler.model.demand import claim_milli, gpus_of
from scheduler.model.device_inventory import DeviceInventory
from scheduler.model.devices import Allocation, ResourceClaim
from scheduler.model.resources import GPU
from scheduler.placement.device_gang import GangDevices, allocate_gang
from scheduler.placement.device_outcome import DeviceMisfit
from scheduler.placement.device_pools import node_devices
from tests.unit.reliability.strategies import ADVERSARIAL_JSON, ADVERSARIAL_TEXT

MIB = 2**20
REG = hami.HAMI_REGISTER_ANNOTATION
PATH = f"metadata.annotations[{REG}]"


def gpu(i: int, mem: object = 16384, count: int = 10, **extra: Any) -> dict[str, Any]:
    index = {"index": i} if i else {}  # HAMi leaves index 0 out (omitempty)
    return {"id": f"GPU-{i:04d}", "count": count, "devmem": mem, "devcore": 100,
            "type": "NVIDIA-A10", "numa": 0, "mode": "hami-core", "health": True, **index,
            **extra}


def registered(*gpus: dict[str, Any]) -> dict[str, str]:
    return {REG: json.dumps(list(gpus))}


# The node reader ---------------------------------------------------------------------------
def test_a_node_registers_shareable_gpus_by_uuid_with_memory_cores_and_slots() -> None:
    found = hami_convert.node_gpus("n1", registered(gpu(1, mem=8192), gpu(0)))
    assert found is not None and found.node_name == "n1" and found.driver == hami.DRIVER
    assert [d.name for d in found.devices] == ["GPU-0000", "GPU-0001"]  # by index
    first = found.devices[0]
    assert first.shareable and first.attribute(f"{hami.DRIVER}/index") == 0
    assert dict(first.capacity) == {hami.MEMORY: 16384 * MIB, hami.CORES: 100,
                                    hami.SLOTS: 10}


@pytest.mark.parametrize(("title", "annotations", "field", "words"), [
    ("not JSON", {REG: "GPU-1,10,16384,100,A10,0,true:"}, PATH, "not JSON"),
    ("not a list", {REG: "{}"}, PATH, "a list"),
    ("no UUID", registered({**gpu(0), "id": ""}), f"{PATH}[0].id", "UUID"),
    ("a UUID with a separator", registered({**gpu(0), "id": "a,b"}), f"{PATH}[0].id", "UUID"),
    ("memory not a number", registered(gpu(0, mem="16G")), f"{PATH}[0].devmem", "integer"),
    ("no memory", registered(gpu(0, mem=0)), f"{PATH}[0].devmem", "1.."),
    ("no slots", registered(gpu(0, count=0)), f"{PATH}[0].count", "1.."),
    ("a negative index", registered(gpu(1, index=-1)), f"{PATH}[0].index", "0.."),
    ("one index twice", registered(gpu(1), {**gpu(2), "index": 1}), f"{PATH}[1]", "twice"),
])
def test_a_bad_registration_names_the_field(title: str, annotations: dict[str, str],
                                            field: str, words: str) -> None:
    with pytest.raises(FieldError) as e:
        hami_convert.node_gpus("n1", annotations)
    assert e.value.path == field and words in e.value.reason, title


@pytest.mark.parametrize(("title", "annotations", "offered"), [
    ("no annotation: no slice", {}, None),
    ("an unhealthy GPU is left out", registered(gpu(0, health=False), gpu(1)), ["GPU-0001"]),
    ("every GPU unhealthy: no slice", registered(gpu(0, health=False)), None),
])
def test_what_a_node_offers(title: str, annotations: dict[str, str],
                            offered: list[str] | None) -> None:
    found = hami_convert.node_gpus("n1", annotations)
    assert (None if found is None else [d.name for d in found.devices]) == offered, title


def test_a_gpu_in_another_mode_is_not_offered_and_says_why() -> None:
    found = hami_convert.node_gpus("n1", registered(gpu(0, mode="mig")))
    assert found is not None and found.devices[0].unsupported == (f"{PATH}[0].mode: mig",)


# The pod reader ----------------------------------------------------------------------------
def share(name: str = "main", gpus: object = 1, mem: object = None,
          cores: object = None, part: str = "limits") -> dict[str, Any]:
    given = {GPU: gpus} if gpus is not None else {}
    if mem is not None:
        given[hami.GPUMEM] = mem
    if cores is not None:
        given[hami.GPUCORES] = cores
    return {"name": name, "resources": {part: given}}


@pytest.mark.parametrize(("title", "containers", "asks"), [
    ("half of one GPU's memory", [share(mem="8192")],
     [("main", 1, {hami.MEMORY: 8192 * MIB})]),
    ("memory and cores", [share(mem=4096, cores="30")],
     [("main", 1, {hami.CORES: 30, hami.MEMORY: 4096 * MIB})]),
    ("two GPUs, each a share", [share(gpus="2", mem="1000")],
     [("main", 2, {hami.MEMORY: 1000 * MIB})]),
    ("a whole GPU: all its cores, its memory by default", [share(cores=100)],
     [("main", 1, {hami.CORES: 100})]),
    ("read from requests too", [share(mem="100", part="requests")],
     [("main", 1, {hami.MEMORY: 100 * MIB})]),
    ("a plain GPU asks for no share", [share()], []),
    ("two containers, one sharing", [share("a"), share("b", mem="10")],
     [("b", 1, {hami.MEMORY: 10 * MIB})]),
])
def test_a_containers_share_ask(title: str, containers: list[dict[str, Any]],
                                asks: list[tuple[str, int, dict[str, int]]]) -> None:
    read = hami_convert.share_requests(containers)
    got = [(r.name, r.asks[0].count, dict(r.asks[0].capacity)) for r in read]
    assert got == asks, title
    assert all(r.asks[0].class_name == hami.CLASS.name for r in read)


LIMITS = "spec.containers[0].resources.limits"


@pytest.mark.parametrize(("title", "containers", "field", "words"), [
    ("memory without a GPU", [share(gpus=None, mem="10")], f"{LIMITS}[{GPU}]", "at least 1"),
    ("zero GPUs", [share(gpus="0", mem="10")], f"{LIMITS}[{GPU}]", "at least 1"),
    ("memory not a quantity", [share(mem="lots")], f"{LIMITS}[{hami.GPUMEM}]", "malformed"),
    ("memory zero", [share(mem="0")], f"{LIMITS}[{hami.GPUMEM}]", "leave it out"),
    ("cores over 100", [share(cores="150")], f"{LIMITS}[{hami.GPUCORES}]", "at most 100"),
    ("a memory percentage", [{"name": "m", "resources": {"limits": {
        GPU: 1, hami.GPUMEM_PERCENTAGE: 50}}}], f"{LIMITS}[{hami.GPUMEM_PERCENTAGE}]",
     "not supported"),
])
def test_a_bad_share_ask_names_the_field(title: str, containers: list[dict[str, Any]],
                                         field: str, words: str) -> None:
    with pytest.raises(FieldError) as e:
        hami_convert.share_requests(containers)
    assert e.value.path == field and words in e.value.reason, title


def pod(name: str, *containers: dict[str, Any], node: str = "",
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "annotations": annotations or {}},
            "spec": {"containers": list(containers), "nodeName": node,
                     "schedulerName": "gang-scheduler"},
            "status": {"phase": "Running" if node else "Pending"}}


def test_a_sharing_pod_asks_through_its_own_claim_and_not_through_its_gpu_request() -> None:
    info = convert.pod_from_json(pod("p-0", share(mem="8192")))
    assert gpus_of(info.requirements.requests) == 0  # counted by its claim, not twice
    assert hami.GPUMEM not in info.requirements.requests  # a device capacity, no node's
    assert hami.USE in info.requirements.constraints.device_claims
    assert dict(info.claim_statuses)[hami.USE.entry] == "p-0~hami.io"
    claim = hami_convert.share_claim(pod("p-0", share(mem="8192")))
    assert claim is not None and claim.key == "ns/p-0~hami.io" and claim.allocation is None


def test_a_pod_with_a_bad_share_ask_is_not_converted_and_the_error_names_the_field() -> None:
    with pytest.raises(ConversionError) as e:
        convert.pod_from_json(pod("p-0", share(mem="0")))
    assert e.value.path == f"{LIMITS}[{hami.GPUMEM}]"


def test_a_bound_pods_annotation_reads_back_as_the_shares_it_holds() -> None:
    text = "GPU-0001,NVIDIA,8192,0:;;GPU-0000,NVIDIA,100,30:GPU-0001,NVIDIA,100,30:;"
    claim = hami_convert.share_claim(pod(
        "p-0", share("a", mem="8192"), {"name": "idle"}, share("b", gpus=2, mem=100, cores=30),
        node="n1", annotations={hami.HAMI_ALLOCATED_ANNOTATION: text}))
    assert claim is not None and claim.allocation is not None
    held = [(r.request, r.device.device, dict(r.consumed)[hami.MEMORY] // MIB,
             dict(r.consumed)[hami.CORES]) for r in claim.allocation.results]
    assert held == [("a", "GPU-0001", 8192, 0), ("b", "GPU-0000", 100, 30),
                    ("b", "GPU-0001", 100, 30)]
    assert [c.uid for c in claim.reserved_for] == ["uid-p-0"]
    # and writing it gives HAMi's text back
    names = ["a", "idle", "b"]
    assert hami_annotations.devices_text(claim.allocation, names) == text


@pytest.mark.parametrize(("text", "words"), [
    ("GPU-1,NVIDIA,8192:;", "UUID,type,MiB,cores"),
    ("GPU-1,NVIDIA,lots,0:;", "integers"),
    ("GPU-1,NVIDIA,-1,0:;", "negative"),
    (";GPU-1,NVIDIA,1,0:;", "1 containers"),
])
def test_a_bad_allocated_annotation_names_it(text: str, words: str) -> None:
    with pytest.raises(FieldError) as e:
        hami_convert.allocation_of(text, "n1", ["main"])
    assert hami.HAMI_ALLOCATED_ANNOTATION in e.value.path and words in e.value.reason


# Placement across a gang, through the DRA allocator ----------------------------------------
def claims(*asks: tuple[str, dict[str, Any]]) -> list[ResourceClaim]:
    out = []
    for name, c in asks:
        found = hami_convert.share_claim(pod(name, c))
        assert found is not None
        out.append(found)
    return out


def place(node_gpus: dict[str, dict[str, str]], placement: dict[str, list[ResourceClaim]],
          held: list[ResourceClaim] = ()) -> GangDevices | DeviceMisfit:  # type: ignore[assignment]
    slices = [s for n, a in node_gpus.items() if (s := hami_convert.node_gpus(n, a))]
    inventory = DeviceInventory.of(slices, [hami.CLASS], held)
    nodes = {n: node_devices(slices, n, {}) for n in node_gpus}
    return allocate_gang(placement, nodes, {hami.CLASS.name: hami.CLASS}, {},
                         consumed=inventory.consumed())


def per_gpu(answer: GangDevices | DeviceMisfit) -> Counter[str]:
    assert isinstance(answer, GangDevices), answer
    return Counter(r.device.device for _, _, a in answer.allocations for r in a.results)


TWO_GPUS = {"n1": registered(gpu(0), gpu(1))}
HALF = share(mem="8192")


@pytest.mark.parametrize(("title", "members", "expected"), [
    ("four halves: two on each GPU", [HALF] * 4, {"GPU-0000": 2, "GPU-0001": 2}),
    ("a whole GPU and two halves", [share(cores=100), HALF, HALF],
     {"GPU-0000": 1, "GPU-0001": 2}),
    ("a two-GPU member and a quarter", [share(gpus=2, mem=4096), share(mem=4096)],
     {"GPU-0000": 2, "GPU-0001": 1}),
    ("cores bound too: four at 30%", [share(mem=100, cores=30)] * 4,
     {"GPU-0000": 3, "GPU-0001": 1}),
])
def test_a_gang_is_placed_per_gpu_never_over_a_gpus_capacity(
        title: str, members: list[dict[str, Any]], expected: dict[str, int]) -> None:
    gang = claims(*((f"p-{i}", c) for i, c in enumerate(members)))
    assert per_gpu(place(TWO_GPUS, {"n1": gang})) == expected, title


@pytest.mark.parametrize(("title", "members", "held_text", "words"), [
    ("a fifth half", [HALF] * 5, None, "memory 8Gi does not fit, 0 of 16Gi free"),
    ("a whole GPU and two halves beside a sliver held", [HALF, HALF, share(cores=100)],
     "GPU-0000,NVIDIA,1,1:;", "does not fit"),
    ("halves beside a running whole GPU", [HALF] * 3, "GPU-0001,NVIDIA,16384,100:;",
     "memory 8Gi does not fit, 0 of 16Gi free"),
    ("more tasks than slots", [share(mem=1)] * 3, None, "slots 1 does not fit, 0 of 1 free"),
])
def test_a_gang_that_does_not_fit_gets_nothing_and_the_reason_names_gpu_and_share(
        title: str, members: list[dict[str, Any]], held_text: str | None, words: str) -> None:
    node = TWO_GPUS if "slots" not in words else {"n1": registered(gpu(0, count=1),
                                                                   gpu(1, count=1))}
    held = []
    if held_text is not None:
        running = hami_convert.share_claim(pod("old", share(mem="1"), node="n1", annotations={
            hami.HAMI_ALLOCATED_ANNOTATION: held_text}))
        assert running is not None
        held.append(running)
    gang = claims(*((f"p-{i}", c) for i, c in enumerate(members)))
    answer = place(node, {"n1": gang}, held)
    assert isinstance(answer, DeviceMisfit), title
    assert "device GPU-000" in answer.reason and words in answer.reason, answer.reason


def test_a_share_counts_its_largest_fraction_of_a_gpu_in_gpu_equivalents() -> None:
    slices = [hami_convert.node_gpus("n1", TWO_GPUS["n1"])]
    held = hami_convert.share_claim(pod("old", HALF, node="n1", annotations={
        hami.HAMI_ALLOCATED_ANNOTATION: "GPU-0000,NVIDIA,8192,25:;"}))
    assert held is not None
    inventory = DeviceInventory.of([s for s in slices if s], [hami.CLASS], [held])
    assert claim_milli(held, inventory) == 500  # memory 1/2 > cores 1/4 > slots 1/10
    unplaced = claims(("new", HALF))[0]
    assert claim_milli(unplaced, inventory) == 1000  # a whole GPU until placed


# Writing ------------------------------------------------------------------------------------
def test_the_annotations_name_each_containers_gpus_and_find_the_pod_on_its_node() -> None:
    gang = claims(("p-0", HALF))
    answer = place(TWO_GPUS, {"n1": gang})
    assert isinstance(answer, GangDevices)
    allocation: Allocation = answer.by_claim()["ns/p-0~hami.io"]
    written = hami_annotations.pod_annotations(allocation, ["main"], "n1", 1_700_000_000.9)
    assert written == {
        hami.HAMI_TO_ALLOCATE_ANNOTATION: "GPU-0000,NVIDIA,8192,0:;",
        hami.HAMI_ALLOCATED_ANNOTATION: "GPU-0000,NVIDIA,8192,0:;",
        hami.HAMI_NODE_ANNOTATION: "n1", hami.HAMI_TIME_ANNOTATION: "1700000000",
        hami.HAMI_BIND_PHASE_ANNOTATION: "allocating",
        hami.HAMI_BIND_TIME_ANNOTATION: "1700000000"}
    assert hami_annotations.is_share_claim("ns/p-0~hami.io")
    assert not hami_annotations.is_share_claim("ns/p-0-gpu")


@pytest.mark.parametrize("text", [*ADVERSARIAL_TEXT, *map(json.dumps, ADVERSARIAL_JSON),
                                  json.dumps([gpu(0, mem=v) for v in ADVERSARIAL_JSON]),
                                  "[" * 100_000])
def test_any_annotation_value_is_read_or_refused_naming_the_field(text: str) -> None:
    for read in (lambda: hami_convert.node_gpus("n1", {REG: text}),
                 lambda: hami_convert.allocation_of(text, "n1", ["main"])):
        try:
            read()
        except FieldError as e:
            assert REG in e.path or hami.HAMI_ALLOCATED_ANNOTATION in e.path
