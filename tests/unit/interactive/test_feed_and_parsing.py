"""The tier label read into gangs (a bad value warned about and read as batch), the user
read from labels, and ``spec.interactive`` parsed with field paths."""

from __future__ import annotations

from typing import Any

import pytest

from policies.interactive import NO_CAPS, InteractivePolicy, user_of
from policies.parsing import parse_queue
from scheduler.feed.grouping import GroupingConfig, build_gangs
from scheduler.kube.read.input_warnings import InputWarnings
from scheduler.model import Tier
from scheduler.model.annotation_checks import label_problems
from scheduler.model.workloads import JobInfo, OwnerRef, PodPhase
from tests.unit.test_grouping import pod

TIER = "gangscheduler.io/tier"


@pytest.mark.parametrize(("value", "tier"), [
    ("interactive", Tier.INTERACTIVE), ("batch", Tier.BATCH), ("Interactive", Tier.BATCH),
    ("interactve", Tier.BATCH), ("", Tier.BATCH), (None, Tier.BATCH)])
def test_the_tier_of_a_lone_pod(value: str | None, tier: Tier) -> None:
    labels = {} if value is None else {TIER: value}
    (gang,) = build_gangs([pod("nb", labels=labels)], {}, {}, GroupingConfig()).pending
    assert gang.tier is tier


def test_read_on_a_job_and_kept_on_the_running_gang() -> None:
    owner = OwnerRef("Job", "j", "juid")
    jobs = {"ns/j": JobInfo("ns", "j", "juid", parallelism=1, labels={TIER: "interactive"})}
    (gang,) = build_gangs([pod("j-0", owner=owner)], {}, jobs, GroupingConfig()).pending
    assert gang.interactive
    out = build_gangs([pod("nb", labels={TIER: "interactive"}, node="n1",
                           phase=PodPhase.RUNNING)], {}, {}, GroupingConfig())
    assert out.running_by_id["ns/nb"].gang.tier is Tier.INTERACTIVE


def test_a_bad_tier_is_warned_naming_the_label_and_what_happens_instead() -> None:
    (problem,) = label_problems({TIER: "interactve"})
    assert problem.startswith(f"label {TIER}: 'interactve' is not one of batch | interactive")
    assert "treated as batch" in problem
    assert label_problems({TIER: "interactive"}) == () == label_problems({"other": "x"})
    warnings = InputWarnings(clock=lambda: 0.0)
    warnings.check("Pod", "v1", {"metadata": {"uid": "u1", "namespace": "ns", "name": "nb",
                                              "labels": {TIER: "notebook"}}})
    (finding,) = warnings.drain()
    assert finding.name == "nb" and "label gangscheduler.io/tier: 'notebook'" in finding.message


def test_user_of_reads_the_label_then_jupyterhub_then_the_namespace() -> None:
    def lone(labels: dict[str, str]) -> Any:
        (g,) = build_gangs([pod("nb", ns="lab", labels={TIER: "interactive", **labels})],
                           {}, {}, GroupingConfig()).pending
        return g

    assert user_of(lone({"gangscheduler.io/user": "alice",
                         "hub.jupyter.org/username": "bob"})) == "alice"
    assert user_of(lone({"hub.jupyter.org/username": "bob"})) == "bob"
    assert user_of(lone({})) == "lab"
    assert user_of(lone({"example.com/owner": "carol"}), "example.com/owner") == "carol"


def _queue(spec: dict[str, Any]) -> tuple[Any, list[Any]]:
    return parse_queue({"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
                        "metadata": {"name": "team-a"}, "spec": {"namespaces": ["*"], **spec}})


def test_spec_interactive_parses() -> None:
    q, errors = _queue({"interactive": {"maxGPUsPerUser": 2, "maxGangsPerUser": 3,
                                        "userLabel": "example.com/owner"}})
    assert errors == [] and q.interactive == InteractivePolicy(2, 3, "example.com/owner")
    q, errors = _queue({})
    assert errors == [] and q.interactive is NO_CAPS


@pytest.mark.parametrize(("spec", "path", "says"), [
    ({"maxGPUsPerUser": -1}, "spec.interactive.maxGPUsPerUser", "from 0 to 1000000, got -1"),
    ({"maxGPUsPerUser": 1.5}, "spec.interactive.maxGPUsPerUser", "got 1.5"),
    ({"maxGangsPerUser": 0}, "spec.interactive.maxGangsPerUser", "from 1 to 1000000, got 0"),
    ({"maxGangsPerUser": True}, "spec.interactive.maxGangsPerUser", "got True"),
    ({"userLabel": "not a label"}, "spec.interactive.userLabel", "must be a label key"),
    ({"maxGPUs": 2}, "spec.interactive.maxGPUs", "unknown field"),
    ("yes", "spec.interactive", "must be a mapping"),
])
def test_bad_spec_interactive_names_the_field(spec: Any, path: str, says: str) -> None:
    q, errors = _queue({"interactive": spec})
    assert q is None
    assert [(e.path, says in e.reason) for e in errors] == [(path, True)], errors
