"""The device model's values: semantic versions ordered as semver says, attribute values
compared as ``matchAttribute`` compares them, exact quantities."""

from __future__ import annotations

from fractions import Fraction

import pytest

from scheduler.model.devices import (
    Allocation,
    ClaimSpec,
    Constraint,
    DeviceId,
    DeviceResult,
    ResourceClaim,
    Version,
    allocated_devices,
    qualify,
    same_value,
)
from scheduler.model.resources import QuantityError, exact_quantity


@pytest.mark.parametrize(("low", "high"), [
    ("1.0.0-alpha", "1.0.0-alpha.1"),
    ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
    ("1.0.0-beta.2", "1.0.0-beta.11"),
    ("1.0.0-rc.1", "1.0.0"),
    ("1.9.0", "1.10.0"),
    ("535.104.5", "550.0.0"),
])
def test_versions_order_by_semver_precedence(low: str, high: str) -> None:
    assert Version(low) < Version(high)
    assert not Version(high) < Version(low)


def test_build_metadata_takes_no_part_in_equality() -> None:
    assert Version("1.2.3+b1") == Version("1.2.3+b2")
    assert hash(Version("1.2.3+b1")) == hash(Version("1.2.3"))


@pytest.mark.parametrize("text", ["1.2", "01.2.3", "1.2.3-", "v1.2.3", "1.2.3.4", ""])
def test_malformed_versions_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="semantic version"):
        Version(text)


@pytest.mark.parametrize(("a", "b", "same"), [
    (1, 1, True), (1, True, False), (True, True, True), ("a", "a", True), (1, "1", False),
    (Version("1.2.3+x"), Version("1.2.3+x"), True),
    # matchAttribute compares the text, as kube-scheduler does: build metadata counts there.
    (Version("1.2.3+x"), Version("1.2.3+y"), False),
])
def test_same_value_keeps_types_apart(a: object, b: object, same: bool) -> None:
    assert same_value(a, b) is same  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "value"), [
    ("40Gi", 40 * 2**30), ("500m", Fraction(1, 2)), ("-1", -1), ("1e3", 1000),
    ("1.5k", 1500), ("2Ki", 2048), ("0.1", Fraction(1, 10)), ("1E", 10**18),
])
def test_exact_quantities(text: str, value: Fraction) -> None:
    assert exact_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1x", "Gi", "1e999", "１"])
def test_malformed_quantities_are_refused(text: str) -> None:
    with pytest.raises(QuantityError):
        exact_quantity(text)


def test_names_without_a_domain_belong_to_the_driver() -> None:
    assert qualify("model", "gpu.example.com") == "gpu.example.com/model"
    assert qualify("k8s.io/numa", "gpu.example.com") == "k8s.io/numa"


def test_constraint_covers_its_requests_and_their_subrequests() -> None:
    c = Constraint("d/numa", ("a", "b/small"))
    assert c.covers("a") and c.covers("a/x") and c.covers("b/small")
    assert not c.covers("b/big") and not c.covers("c")
    assert Constraint("d/numa").covers("anything")


def test_admin_access_results_hold_no_device() -> None:
    gpu, mon = DeviceId("d", "p", "gpu-0"), DeviceId("d", "p", "gpu-1")
    allocation = Allocation((DeviceResult("r", gpu), DeviceResult("m", mon, admin_access=True)))
    claim = ResourceClaim("ns", "c", ClaimSpec(), allocation=allocation)
    assert allocated_devices([claim, ResourceClaim("ns", "d", ClaimSpec())]) == {gpu}
    assert str(gpu) == "d/p/gpu-0" and gpu.device == "gpu-0"
