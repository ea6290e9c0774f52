"""Quantities parse exactly into canonical units; resource vectors add up exactly."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.utils.quantity import parse_quantity as k8s_parse

from scheduler.model.demand import gpus_of
from scheduler.model.resources import (
    EMPTY,
    QuantityError,
    Resources,
    format_amount,
    parse_quantity,
    total,
)


@pytest.mark.parametrize(("text", "resource", "want"), [
    ("500m", "cpu", 500),
    ("1.5", "cpu", 1500),
    ("2", "cpu", 2000),
    ("0.0001", "cpu", 1),  # rounded up to the smallest unit, as Kubernetes does
    ("1e3", "cpu", 1_000_000),
    ("16Gi", "memory", 16 * 1024**3),
    ("129M", "memory", 129_000_000),
    ("128974848", "memory", 128974848),
    ("1.5Gi", "memory", 1536 * 1024**2),
    ("500m", "memory", 1),
    ("8", "nvidia.com/gpu", 8),
    ("+1", "pods", 1),
    (" 4 ", "nvidia.com/gpu", 4),
    (3, "cpu", 3000),
    (2.5, "cpu", 2500),
    (7, "nvidia.com/gpu", 7),
])
def test_parse_table(text: str | int | float, resource: str, want: int) -> None:
    assert parse_quantity(text, resource) == want


@pytest.mark.parametrize(("text", "fragment"), [
    ("abc", "malformed"), ("1.2.3", "malformed"), ("5Gb", "malformed"), ("0x10", "malformed"),
    ("1_000", "malformed"), ("inf", "malformed"), ("nan", "malformed"), ("3e", "malformed"),
    ("", "empty"), ("   ", "empty"), ("-1", "negative"), ("-500m", "negative"),
    (-2, "negative"), (True, "malformed"),
])
def test_bad_quantities_name_the_resource(text: str | int, fragment: str) -> None:
    with pytest.raises(QuantityError, match=rf"^memory: {fragment}"):
        parse_quantity(text, "memory")


SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
            "e3", "E-2", "e+1"]


@given(st.integers(0, 10**12), st.sampled_from(["", ".", ".5", ".125", ".000001"]),
       st.sampled_from(SUFFIXES))
def test_agrees_with_the_kubernetes_parser(number: int, fraction: str, suffix: str) -> None:
    """Our own parser (no ``kubernetes`` import in the core) against the client's, exactly."""
    text = f"{number}{fraction}{suffix}"
    want = k8s_parse(text)
    assert parse_quantity(text, "memory") == math.ceil(want)
    assert parse_quantity(text, "cpu") == math.ceil(want * 1000)


def test_resources_parse_and_describe() -> None:
    res = Resources.parse({"cpu": "1500m", "memory": "16Gi", "nvidia.com/gpu": "8"})
    assert res == Resources.of(cpu=1500, memory=16 << 30, gpu=8)
    assert gpus_of(res) == 8
    assert res.describe() == "1500m cpu, 16Gi memory, 8 nvidia.com/gpu"
    assert format_amount("cpu", 4000) == "4"
    with pytest.raises(QuantityError, match=r"^cpu: malformed"):
        Resources.parse({"cpu": "lots"})


def test_zero_entries_do_not_matter() -> None:
    assert Resources({"cpu": 1, "memory": 0}) == Resources({"cpu": 1})
    assert hash(Resources({"cpu": 1, "memory": 0})) == hash(Resources({"cpu": 1}))
    assert Resources({"cpu": 0}) == EMPTY
    assert Resources.of(cpu=2)["memory"] == 0


def test_arithmetic() -> None:
    a = Resources.of(cpu=4000, gpu=8)
    b = Resources.of(cpu=1000, gpu=2, memory=5)
    assert a + b == Resources.of(cpu=5000, gpu=10, memory=5)
    assert a - b == Resources({"cpu": 3000, "nvidia.com/gpu": 6, "memory": -5})
    assert (a - b).clamp_nonnegative() == Resources.of(cpu=3000, gpu=6)
    assert not (a - b).is_nonnegative()
    assert b * 3 == 3 * b == Resources.of(cpu=3000, gpu=6, memory=15)
    assert total([a, b, b]) == a + b + b
    assert a.max_with(b) == Resources.of(cpu=4000, gpu=8, memory=5)
    assert b.shortfall(a) == Resources.of(memory=5)
    assert Resources.of(gpu=2).fits_in(a) and not b.fits_in(a)


def test_copies_in() -> None:
    pod = Resources.of(cpu=1000, gpu=2)
    assert pod.copies_in(Resources.of(cpu=8000, gpu=7)) == 3
    assert pod.copies_in(Resources.of(cpu=2500, gpu=8)) == 2
    assert pod.copies_in(Resources.of(cpu=8000)) == 0
    assert EMPTY.copies_in(EMPTY) > 10**6


@given(st.dictionaries(st.sampled_from(["cpu", "memory", "pods", "x"]), st.integers(-50, 50)),
       st.dictionaries(st.sampled_from(["cpu", "memory", "pods", "x"]), st.integers(-50, 50)))
def test_add_then_subtract_is_identity(a: dict[str, int], b: dict[str, int]) -> None:
    ra, rb = Resources(a), Resources(b)
    assert (ra + rb) - rb == ra
    assert ra + rb == rb + ra
