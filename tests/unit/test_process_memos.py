"""The process-wide memos (slots in a module's own store, ``scheduler.kit.memo``): the same
answer kept or not, a malformed text never kept, a full table cleared rather than grown."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.kube.read import convert
from scheduler.model import resources
from scheduler.model.resources import QuantityError, parse_quantity


def test_a_quantity_is_kept_and_a_malformed_one_is_not() -> None:
    resources._QUANTITIES.clear()
    assert parse_quantity("16Gi", "memory") == parse_quantity("16Gi", "memory") == 16 << 30
    assert resources._QUANTITIES == {("memory", "16Gi"): 16 << 30}
    for _ in range(2):
        with pytest.raises(QuantityError):
            parse_quantity("12x", "cpu")
    assert ("cpu", "12x") not in resources._QUANTITIES


def test_a_full_table_is_cleared_and_answers_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    resources._QUANTITIES.clear()
    monkeypatch.setattr(resources.QUANTITIES, "bound", 2)
    answers = [parse_quantity(f"{i}m", "cpu") for i in range(5)]
    assert answers == [0, 1, 2, 3, 4] and len(resources._QUANTITIES) <= 2
    assert parse_quantity("1500m", "cpu") == 1500


def test_a_spec_shape_is_converted_once() -> None:
    pod: dict[str, Any] = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}
    first = convert.pod_from_json(pod)
    second = convert.pod_from_json({**pod, "metadata": {**pod["metadata"], "name": "q"}})
    assert second.requirements is first.requirements
    assert convert.REQUIREMENTS.bound == 4096
