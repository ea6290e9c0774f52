"""Properties of the device allocator over random nodes and claims: a device is never
allocated twice (nor one held by others), every allocation satisfies its selectors, counts
and constraints, a refusal means that no allocation exists (checked by brute force on small
cases), and a gang gets devices for every claim or none."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.model.devices import Constraint, DeviceId, ResourceClaim
from scheduler.placement.device_gang import GangDevices, allocate_gang
from scheduler.placement.device_outcome import NodeAllocation
from scheduler.placement.device_pools import node_devices
from scheduler.placement.devices import allocate
from tests.unit.devices.builders import CLASSES, D, ask, claim, gpu, node_slice

NUMA = Constraint(f"{D}/numa")
A100 = f'device.attributes["{D}"].model == "a100"'

devices_st = st.lists(st.tuples(st.integers(0, 1), st.sampled_from(["a100", "h100"])),
                      min_size=1, max_size=6)


@st.composite
def claims_st(draw: st.DrawFn, prefix: str = "c", most: int = 2) -> list[ResourceClaim]:
    out = []
    for i in range(draw(st.integers(1, most))):
        requests = [ask(f"r{j}", draw(st.integers(1, 2)), "gpu",
                        *((A100,) if draw(st.booleans()) else ()))
                    for j in range(draw(st.integers(1, 2)))]
        constraints = (NUMA,) if draw(st.booleans()) else ()
        out.append(claim(f"{prefix}{i}", *requests, constraints=constraints))
    return out


def _selected(model: str, selectors: Sequence[str]) -> bool:
    return model == "a100" or A100 not in selectors


def _exists(devs: list[tuple[int, int, str]], claims: Sequence[ResourceClaim]) -> bool:
    """Brute force: is there any allocation at all? (devs: (index, numa, model), free.)"""
    def go(ci: int, ri: int, used: frozenset[int], mine: tuple[int, ...]) -> bool:
        if ci == len(claims):
            return True
        c = claims[ci]
        if ri == len(c.spec.requests):
            numas = {devs[k][1] for k in mine}
            if c.spec.constraints and len(numas) > 1:
                return False
            return go(ci + 1, 0, used, ())
        a = c.spec.requests[ri].asks[0]
        pool = [k for k in range(len(devs)) if k not in used
                and _selected(devs[k][2], a.selectors)]
        return any(go(ci, ri + 1, used | set(pick), mine + pick)
                   for pick in combinations(pool, a.count))
    return go(0, 0, frozenset(), ())


@settings(max_examples=150, deadline=None)
@given(devices_st, st.sets(st.integers(0, 5), max_size=3), claims_st())
def test_sound_and_complete_on_one_node(specs: list[tuple[int, str]], held: set[int],
                                        claims: list[ResourceClaim]) -> None:
    devices = tuple(gpu(i, numa, model) for i, (numa, model) in enumerate(specs))
    nd = node_devices((node_slice("n1", devices),), "n1", {})
    taken = frozenset(DeviceId(D, "n1", f"gpu-{i}") for i in held)
    answer = allocate(nd, claims, CLASSES, taken)
    free = [(i, numa, model) for i, (numa, model) in enumerate(specs) if i not in held]
    if not isinstance(answer, NodeAllocation):
        assert not _exists(free, claims), answer
        return
    by_key = {c.key: c for c in claims}
    everything: list[DeviceId] = []
    for key, allocation in answer.allocations:
        c = by_key[key]
        for request in c.spec.requests:
            a = request.asks[0]
            mine = [r.device for r in allocation.results if r.request == a.name]
            assert len(mine) == a.count
            for did in mine:
                _, _, model = free[[f[0] for f in free].index(int(did.device[4:]))]
                assert _selected(model, a.selectors)
        if c.spec.constraints:
            numas = {specs[int(r.device.device[4:])][0] for r in allocation.results}
            assert len(numas) == 1
        everything += [r.device for r in allocation.results]
    assert len(everything) == len(set(everything))  # never twice
    assert not set(everything) & taken  # never what someone holds


@settings(max_examples=100, deadline=None)
@given(devices_st, devices_st, claims_st("a", 2), claims_st("b", 2), st.booleans())
def test_a_gang_gets_every_claim_or_none(one: list[tuple[int, str]], two: list[tuple[int, str]],
                                         on_one: list[ResourceClaim],
                                         on_two: list[ResourceClaim], share: bool) -> None:
    slices = (node_slice("n1", tuple(gpu(i, n, m) for i, (n, m) in enumerate(one))),
              node_slice("n2", tuple(gpu(i, n, m) for i, (n, m) in enumerate(two))))
    nodes = {n: node_devices(slices, n, {}) for n in ("n1", "n2")}
    placement = {"n1": on_one, "n2": on_two + (on_one[:1] if share else [])}
    answer = allocate_gang(placement, nodes, CLASSES, {"n1": {}, "n2": {}})
    if isinstance(answer, GangDevices):
        keys = {c.key for cs in placement.values() for c in cs}
        assert set(answer.by_claim()) == keys
        held = [r.device for _, _, a in answer.allocations for r in a.results]
        assert len(held) == len(set(held))
        for _, node, allocation in answer.allocations:
            assert all(r.device.pool == node for r in allocation.results)
            assert allocation.reaches(node, {})
        assert not share  # a node-local claim shared across two nodes cannot be had
    else:
        per_node = [allocate(nodes[n], placement[n], CLASSES) for n in ("n1", "n2")]
        assert share or not all(isinstance(a, NodeAllocation) for a in per_node)
