"""GPU-equivalents (issue 36): a share of a GPU's memory counts the fraction it holds once
allocated, a whole GPU before (never less than the share turns out to be), and sums stay
exact in thousandths; the whole-GPU figure quota charges does not move."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.model.constraints import DeviceClaimUse
from scheduler.model.demand import (
    MILLI,
    Demand,
    claim_milli,
    claims_demand,
    demand_of,
    gpus_text,
    total,
)
from scheduler.model.device_inventory import DeviceInventory
from scheduler.model.devices import Allocation, DeviceId, DeviceResult, ResourceClaim
from tests.unit.devices.builders import CLASSES, D, ask, claim, node_slice
from tests.unit.devices.test_shares import GI, MEM, shared_gpu

SLICE = node_slice("n1", (shared_gpu(0, gib=40), shared_gpu(1, gib=80)))


def _share(name: str, gib: int) -> ResourceClaim:
    a = replace(ask("gpu"), capacity=(("memory", Fraction(gib * GI)),))
    return claim(name, a)


def _allocated(c: ResourceClaim, gib: int, device: int = 0) -> ResourceClaim:
    result = DeviceResult("gpu", DeviceId(D, "n1", f"gpu-{device}"), share_id="s-" + c.name,
                          consumed=((MEM, Fraction(gib * GI)),))
    return replace(c, allocation=Allocation((result,)))


def _inventory(*claims: ResourceClaim) -> DeviceInventory:
    return DeviceInventory.of(slices=(SLICE,), classes=CLASSES.values(), claims=claims)


@pytest.mark.parametrize(("title", "gib", "device", "milli"), [
    ("half of a 40Gi GPU", 20, 0, 500),
    ("a quarter of an 80Gi GPU", 20, 1, 250),
    ("a third, rounded up to a thousandth", 27, 1, 338),
    ("the whole memory", 40, 0, 1000),
])
def test_an_allocated_share_counts_the_fraction_it_holds(
        title: str, gib: int, device: int, milli: int) -> None:
    c = _allocated(_share("c", gib), gib, device)
    assert claim_milli(c, _inventory(c)) == milli


def test_a_share_not_allocated_yet_counts_a_whole_gpu() -> None:
    c = _share("c", 20)
    assert claim_milli(c, _inventory(c)) == MILLI


def test_a_share_on_a_device_not_seen_counts_whole() -> None:
    c = _allocated(_share("c", 20), 20, device=7)
    assert claim_milli(c, _inventory(c)) == MILLI


def test_members_sharing_a_claim_split_its_equivalents_but_gpus_stay_whole() -> None:
    c = _allocated(_share("shared", 20), 20)
    use = DeviceClaimUse(entry="gpu", claim="shared")
    assert claims_demand((use,), "ns", (), _inventory(c), {"ns/shared": 2}) == (1, 250)
    assert claims_demand((use,), "ns", (), _inventory(c)) == (1, 500)


def test_whole_gpu_demands_are_unchanged() -> None:
    assert demand_of(3, (), 3000) == Demand(3)
    assert Demand(2) + Demand(3) == Demand(5)
    assert Demand(4).times(2).milli == 8000


@given(st.lists(st.integers(1, MILLI), max_size=30))
def test_sums_of_shares_are_exact_and_never_above_whole_gpus(shares: list[int]) -> None:
    demands = [demand_of(1, (), m) for m in shares]
    summed = total(demands)
    assert summed.milli == sum(shares)
    assert summed.gpus == len(shares)
    assert summed.milli <= summed.gpus * MILLI


@pytest.mark.parametrize(("milli", "text"), [
    (0, "0"), (2000, "2"), (2500, "2.5"), (125, "0.125"), (1050, "1.05")])
def test_equivalents_read_as_gpus(milli: int, text: str) -> None:
    assert gpus_text(milli) == text
