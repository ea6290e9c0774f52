"""The kwok provider's node groups read from its template nodes and the nodes it made."""

from __future__ import annotations

import re
from typing import Any

import pytest

from scheduler.kube.read.node_groups import (
    DEFAULT_MAX_COUNT,
    GROUP_NAME_ANNOTATION,
    MAX_COUNT_ANNOTATION,
    node_groups,
)
from scheduler.model.resources import GPU


def node(name: str, annotations: dict[str, str], labels: dict[str, str] | None = None
         ) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": annotations,
                         "labels": labels or {"gangscheduler.io/pool": "train"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "pods": "110"}}}


TEMPLATE = node("a100-template", {GROUP_NAME_ANNOTATION: "a100", MAX_COUNT_ANNOTATION: "4"})


def test_a_template_gives_the_group_its_new_nodes_and_limit_and_made_nodes_its_size() -> None:
    made = [node("a100-x1", {GROUP_NAME_ANNOTATION: "a100"}), node("other", {})]
    (group,) = node_groups([TEMPLATE], made)
    assert (group.name, group.size, group.max_size, group.pool) == ("a100", 1, 4, "train")
    assert group.template.allocatable[GPU] == 8
    assert group.template.ready  # a template has no Ready condition, its new nodes will


def test_without_annotations_the_template_names_the_group_and_the_default_maximum_holds() -> None:
    (group,) = node_groups([node("plain", {})], [])
    assert (group.name, group.size, group.max_size) == ("plain", 0, DEFAULT_MAX_COUNT)


def test_a_group_above_its_maximum_may_add_nothing() -> None:
    made = [node(f"a100-x{i}", {GROUP_NAME_ANNOTATION: "a100"}) for i in range(5)]
    (group,) = node_groups([TEMPLATE], made)
    assert group.headroom == 0


def test_a_bad_count_is_refused_naming_the_template_and_the_annotation() -> None:
    bad = node("a100-template", {MAX_COUNT_ANNOTATION: "four"})
    refusal = re.escape(f"a100-template: metadata.annotations[{MAX_COUNT_ANNOTATION}] must be "
                        "a whole number >= 0, got 'four'")
    with pytest.raises(ValueError, match=refusal):
        node_groups([bad], [])


def test_a_provider_that_groups_by_a_label_names_the_group_by_it() -> None:
    labelled = node("t", {}, {"gangscheduler.io/pool": "train", "group": "a100"})
    made = [node("a100-x1", {GROUP_NAME_ANNOTATION: "a100"})]
    (group,) = node_groups([labelled], made, group_label="group")
    assert (group.name, group.size) == ("a100", 1)
