"""Device selectors in CEL: the variables a selector sees, Kubernetes' quantity and semver
extensions, string functions, and errors (a selector that does not compile or fails is an
error with words, never a silent no)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from scheduler.model.devices import Device, Version
from scheduler.placement.device_cel import (
    SelectorError,
    compile_selector,
    evaluate,
    expand_bind,
    matches,
)

D = "gpu.example.com"
GPU = Device(
    "gpu-0",
    attributes=((f"{D}/model", "NVIDIA A100-SXM4-40GB"), (f"{D}/index", 3),
                (f"{D}/mig", False), (f"{D}/driverVersion", Version("535.104.5+build7")),
                ("numa.k8s.io/node", 1)),
    capacity=((f"{D}/memory", Fraction(40 * 2**30)), (f"{D}/cores", Fraction(1, 2))))


def ok(expression: str) -> bool:
    return evaluate(compile_selector(expression), D, GPU)


@pytest.mark.parametrize(("expression", "expected"), [
    # the variables
    (f'device.driver == "{D}"', True),
    (f'device.attributes["{D}"].index == 3', True),
    (f'device.attributes["{D}"].mig', False),
    ('device.attributes["numa.k8s.io"].node == 1', True),
    (f'device.attributes["{D}"].index > 2.5', True),  # numbers compare across types
    # a domain the device lacks is an empty map: membership is false, not an error
    ('"model" in device.attributes["nic.example.com"]', False),
    (f'"model" in device.attributes["{D}"]', True),
    (f'has(device.attributes["{D}"].serial)', False),
    # quantities
    (f'device.capacity["{D}"].memory.compareTo(quantity("40Gi")) == 0', True),
    (f'device.capacity["{D}"].memory == quantity("40960Mi")', True),
    (f'device.capacity["{D}"].memory.isGreaterThan(quantity("32Gi"))', True),
    (f'device.capacity["{D}"].memory.isLessThan(quantity("32Gi"))', False),
    (f'device.capacity["{D}"].memory.asInteger() == 42949672960', True),
    (f'device.capacity["{D}"].cores.isInteger()', False),
    (f'device.capacity["{D}"].cores.asApproximateFloat() == 0.5', True),
    (f'device.capacity["{D}"].cores == quantity("500m")', True),
    (f'device.capacity["{D}"].cores.add(quantity("500m")) == quantity("1")', True),
    (f'device.capacity["{D}"].cores.sub(1).sign() == -1', True),
    ('isQuantity("1Gi") && !isQuantity("1Gx")', True),
    # semantic versions
    (f'device.attributes["{D}"].driverVersion.isGreaterThan(semver("535.0.0"))', True),
    (f'device.attributes["{D}"].driverVersion.compareTo(semver("550.0.0")) < 0', True),
    (f'device.attributes["{D}"].driverVersion == semver("535.104.5")', True),
    (f'device.attributes["{D}"].driverVersion.major() == 535', True),
    (f'device.attributes["{D}"].driverVersion.minor() == 104', True),
    (f'device.attributes["{D}"].driverVersion.patch() == 5', True),
    ('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),
    ('isSemver("1.2.3") && !isSemver("1.2")', True),
    # strings
    (f'device.attributes["{D}"].model.startsWith("NVIDIA")', True),
    (f'device.attributes["{D}"].model.endsWith("40GB")', True),
    (f'device.attributes["{D}"].model.contains("A100")', True),
    (f'device.attributes["{D}"].model.matches("^NVIDIA A[0-9]+")', True),
    (f'device.attributes["{D}"].model.lowerAscii().contains("a100-sxm4")', True),
    (f'device.attributes["{D}"].model.split("-")[1] == "SXM4"', True),
    (f'device.attributes["{D}"].model.substring(7, 11) == "A100"', True),
    (f'device.attributes["{D}"].model.indexOf("A100") == 7', True),
    (f'size(device.attributes["{D}"].model) == 21', True),
    # cel.bind, as Kubernetes' documentation writes selectors
    (f'cel.bind(g, device.attributes["{D}"], g.index == 3 && !g.mig)', True),
    (f'cel.bind(g, device.attributes["{D}"], cel.bind(m, g.model, m.endsWith("GB")))', True),
    (f'cel.bind(g, device.attributes["{D}"], g.index > 3)', False),
])
def test_selectors(expression: str, expected: bool) -> None:
    assert ok(expression) is expected


@pytest.mark.parametrize(("expression", "words"), [
    ("device.attributes[", "CEL compile error"),
    ("", "empty expression"),
    (f'device.attributes["{D}"].serial == "x"', "no such key: serial"),
    (f'device.attributes["{D}"].model', "not bool"),
    ('quantity("12x").sign() == 1', "malformed quantity"),
    ('semver("1.2").major() == 1', "semantic version"),
    (f'device.attributes["{D}"].index == "3" || device.nope()', "CEL runtime error"),
    (f'device.capacity["{D}"].cores.asInteger() == 0', "int64"),
    ("cel.bind(x, 1)", "CEL runtime error"),  # malformed: left for CEL to refuse
])
def test_errors_are_errors_with_words(expression: str, words: str) -> None:
    with pytest.raises(SelectorError, match=words):
        ok(expression)
    answer = matches(expression, D, GPU)
    assert isinstance(answer, str) and words in answer


def test_an_error_in_a_branch_that_is_not_needed_is_no_error() -> None:
    """CEL's logical operators absorb errors when the other side decides (as cel-go)."""
    assert ok(f'device.driver == "{D}" || device.attributes["{D}"].serial == "x"')
    assert not ok(f'device.driver == "x" && device.attributes["{D}"].serial == "x"')


def test_compiled_once_per_expression_text() -> None:
    expression = f'device.attributes["{D}"].index >= 0'
    assert compile_selector(expression) is compile_selector(expression)


def test_names_without_domain_would_belong_to_the_driver() -> None:
    """Converters qualify names with the driver's domain; a selector reads them there."""
    bare = Device("x", attributes=((f"{D}/kind", "gpu"),))
    assert matches(f'device.attributes["{D}"].kind == "gpu"', D, bare) is True


@pytest.mark.parametrize(("expression", "expanded"), [
    ("cel.bind(a, 1, a == 1)", "[1].map(a, a == 1)[0]"),
    ('cel.bind(a, f(1, [2, 3]), a == "x,)")', '[f(1, [2, 3])].map(a, a == "x,)")[0]'),
    ("cel.bind(a, 1, cel.bind(b, a, b))", "[1].map(a, [a].map(b, b)[0])[0]"),
    ('"cel.bind(a, 1, a)" == s', '"cel.bind(a, 1, a)" == s'),  # inside a string: untouched
    ("mycel.bind(a, 1, a)", "mycel.bind(a, 1, a)"),
    ("cel.bind(a, 1)", "cel.bind(a, 1)"),
    ("cel.bind(a.b, 1, a)", "cel.bind(a.b, 1, a)"),
])
def test_cel_bind_is_rewritten_as_a_one_element_map(expression: str, expanded: str) -> None:
    assert expand_bind(expression) == expanded
