"""Field readers the device conversions share (``devices_convert``, ``slices_convert``):
strings, objects, a one-term node selector and an exact quantity, each raising
``FieldError`` with the field's path.

Apart so the slice and claim conversions read their fields one way without importing each
other's private helpers.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from scheduler.kube.read.fields import FieldError, read_list
from scheduler.model.pods import NodeSelectorTerm, node_selector_term
from scheduler.model.resources import QuantityError, exact_quantity


def string(obj: Mapping[str, Any], key: str, path: str, required: bool = True) -> str:
    value = obj.get(key)
    if value is None or value == "":
        if required:
            raise FieldError(path, "missing")
        return ""
    if not isinstance(value, str):
        raise FieldError(path, f"expected a string, got {value!r}")
    return value


def as_map(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise FieldError(path, f"expected an object, got {type(value).__name__}")
    return value


def node_selector(raw: Any, path: str) -> NodeSelectorTerm:
    terms = read_list(as_map(raw, path), "nodeSelectorTerms", f"{path}.nodeSelectorTerms")
    if len(terms) != 1:
        raise FieldError(f"{path}.nodeSelectorTerms", f"must have one term, has {len(terms)}")
    try:
        return node_selector_term(as_map(terms[0], f"{path}.nodeSelectorTerms[0]"),
                                  f"{path}.nodeSelectorTerms[0]")
    except ValueError as exc:
        where, _, reason = str(exc).partition(": ")
        raise FieldError(where, reason) from None


def quantity(raw: Any, path: str) -> Fraction:
    try:
        return exact_quantity(str(raw))
    except QuantityError as exc:
        raise FieldError(path, str(exc)) from None
