"""Only ASCII digits are numbers, wherever the scheduler reads one from text (issue 32, item 5).

Python's ``int()``, ``float()``, ``str.isdigit()``, ``\\d`` and ``Decimal`` take any Unicode
digit; ``kubectl``, Go and the apiserver do not. Each parser a user's text reaches is checked
with the forms it must read and the lookalikes it must refuse.
"""

from __future__ import annotations

import pytest

from policies.parsing import parse_queue
from scheduler.feed import grouping_terms
from scheduler.model.durations import parse_duration, parse_time
from scheduler.model.numerals import is_digits, parse_float, parse_int
from scheduler.model.pods import NodeSelectorRequirement, SelectorOperator
from scheduler.model.resources import QuantityError, parse_quantity
from scheduler.model.shortfall import parse_indexes
from scheduler.model.workloads import MIN_MEMBER_ANNOTATION

FULL_WIDTH_8 = "\uff18"
ARABIC_INDIC_3 = "\u0663"
DEVANAGARI_4 = "\u096a"
SUPERSCRIPT_2 = "\u00b2"  # isdigit() says True, int() raises
LOOKALIKES = [FULL_WIDTH_8, ARABIC_INDIC_3, DEVANAGARI_4, SUPERSCRIPT_2, "1" + ARABIC_INDIC_3]


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("42", 42), (" 7 ", 7), ("-3", -3),
                                             ("+5", 5)])
def test_parse_int_reads_ascii_whole_numbers(text: str, value: int) -> None:
    assert parse_int(text) == value


@pytest.mark.parametrize("text", [*LOOKALIKES, "", " ", "1_000", "1.0", "0x10", "1e3", "--1"])
def test_parse_int_refuses_the_rest(text: str) -> None:
    with pytest.raises(ValueError, match="ASCII"):
        parse_int(text)


@pytest.mark.parametrize("text", LOOKALIKES)
def test_lookalike_digits_are_refused_by_every_parser(text: str) -> None:
    assert not is_digits(text)
    with pytest.raises(ValueError):
        parse_float(text)
    with pytest.raises(ValueError):
        parse_duration(f"{text}h")
    with pytest.raises(QuantityError):
        parse_quantity(text, "nvidia.com/gpu")
    with pytest.raises(QuantityError):
        parse_quantity(f"{text}Gi", "memory")
    with pytest.raises(ValueError):
        parse_indexes(f"0,{text}")
    with pytest.raises(ValueError):
        parse_time(f"2026-11-30T0{text}:00:00Z")
    # A node label or a Gt/Lt value that is no number never matches (never raises).
    gt = NodeSelectorRequirement("gen", SelectorOperator.GT, ("1",))
    assert not gt.matches({"gen": text})
    assert not NodeSelectorRequirement("gen", SelectorOperator.LT, (text,)).matches({"gen": "1"})
    # The min-member annotation: the gang size cannot be known (said, not read as a number).
    size, problem = grouping_terms.min_member("ns/g", [], None, None,
                                              [{MIN_MEMBER_ANNOTATION: text}], per_pod=False)
    assert size == 1 and problem is not None and MIN_MEMBER_ANNOTATION in problem


@pytest.mark.parametrize("text", LOOKALIKES)
def test_a_queue_quota_in_lookalike_digits_is_refused_naming_the_field(text: str) -> None:
    queue, errors = parse_queue({
        "apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue", "metadata": {"name": "q"},
        "spec": {"quotas": [{"pool": "a100", "nominal": {"nvidia.com/gpu": text}}]}})
    assert queue is None
    assert [(e.path, e.reason) for e in errors] == [(
        "spec.quotas[0].nominal.nvidia.com/gpu",
        f"must be a Kubernetes quantity like 8, '256' or '2Ti', got {text!r}")]


def test_ascii_forms_still_read() -> None:
    assert parse_float("1.5") == 1.5 and is_digits("0123")
    assert parse_quantity("8", "nvidia.com/gpu") == 8
    assert parse_indexes("0,2-3") == frozenset({0, 2, 3})
    assert NodeSelectorRequirement("gen", SelectorOperator.GT, ("1",)).matches({"gen": "2"})
    assert grouping_terms.min_member("ns/g", [], None, None, [{MIN_MEMBER_ANNOTATION: "4"}],
                                     per_pod=False) == (4, None)
