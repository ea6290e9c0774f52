"""Kubernetes' own gang API (Workload, PodGroup; v1alpha2 and v1beta1) -> one model.

The fixtures are what the 1.36 apiserver returned for examples/workload-podgroup.yaml, and
the same objects spelled the v1beta1 (1.37) way.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.kube.read import convert, native_convert
from scheduler.model import native
from scheduler.model.constraints import DeviceClaimUse
from scheduler.model.native import DisruptionMode, GroupPolicy
from scheduler.model.pods import PreemptionPolicy
from tests.unit.kube.test_convert import fixture, patched

ALPHA, BETA = native.V1ALPHA2, native.V1BETA1
VERSIONS = [(ALPHA, "native_podgroup_v1alpha2.json"), (BETA, "native_podgroup_v1beta1.json")]


@pytest.mark.parametrize(("version", "name"), VERSIONS)
def test_podgroup_reads_the_same_in_both_versions(version: str, name: str) -> None:
    group = native_convert.podgroup_from_json(fixture(name), version)
    assert group.key == "team-b/llm-pretrain-workers"
    assert (group.workload, group.template, group.workload_key) == (
        "llm-pretrain", "workers", "team-b/llm-pretrain")
    assert group.api_version == version
    assert group.policy == GroupPolicy(
        min_count=4, priority=1000, priority_class_name="gang-normal",
        disruption=DisruptionMode.POD_GROUP, topology_key="topology.gangscheduler.io/rack",
        preemption_policy=PreemptionPolicy.PREEMPT_LOWER_PRIORITY if version == BETA else None)
    assert group.scheduled is (version == BETA)  # the v1beta1 fixture carries the condition


@pytest.mark.parametrize(("version", "name"), [
    (ALPHA, "native_workload_v1alpha2.json"), (BETA, "native_workload_v1beta1.json")])
def test_workload_templates_and_labels(version: str, name: str) -> None:
    workload = native_convert.workload_from_json(fixture(name), version)
    assert workload.key == "team-b/llm-pretrain"
    assert workload.labels["gangscheduler.io/queue"] == "team-b"
    assert workload.annotations["gangscheduler.io/expected-runtime"] == "6h"
    template = workload.templates["workers"]
    assert (template.min_count, template.disruption) == (4, DisruptionMode.POD_GROUP)


ALPHA_GROUP = "native_podgroup_v1alpha2.json"
BETA_GROUP = "native_podgroup_v1beta1.json"


@pytest.mark.parametrize(("version", "name", "path", "value", "expected"), [
    # basic policy: pod by pod
    (ALPHA, ALPHA_GROUP, "spec.schedulingPolicy", {"basic": {}}, ("min_count", None)),
    # the API default: single pods may be disrupted
    (ALPHA, ALPHA_GROUP, "spec.disruptionMode", None, ("disruption", DisruptionMode.POD)),
    (BETA, BETA_GROUP, "spec.disruptionMode", {"single": {}},
     ("disruption", DisruptionMode.POD)),
    (ALPHA, ALPHA_GROUP, "spec.schedulingConstraints", None, ("topology_key", None)),
    (ALPHA, ALPHA_GROUP, "spec.priority", None, ("priority", None)),
    (ALPHA, ALPHA_GROUP, "spec.resourceClaims",
     [{"name": "ib", "resourceClaimTemplateName": "infiniband"}],
     ("resource_claims", (DeviceClaimUse("ib", template="infiniband"),))),
    (BETA, BETA_GROUP, "spec.preemptionPolicy", "Never",
     ("preemption_policy", PreemptionPolicy.NEVER)),
])
def test_policy_fields(version: str, name: str, path: str, value: Any,
                       expected: tuple[str, Any]) -> None:
    group = native_convert.podgroup_from_json(patched(fixture(name), path, value), version)
    field, want = expected
    assert getattr(group.policy, field) == want


@pytest.mark.parametrize(("version", "name", "path", "value", "field", "reason"), [
    (ALPHA, ALPHA_GROUP, "spec.schedulingPolicy", {}, "spec.schedulingPolicy",
     "neither basic nor gang"),
    (ALPHA, ALPHA_GROUP, "spec.schedulingPolicy", {"basic": {}, "gang": {"minCount": 2}},
     "spec.schedulingPolicy", "both basic and gang"),
    (ALPHA, ALPHA_GROUP, "spec.schedulingPolicy.gang.minCount", 0,
     "spec.schedulingPolicy.gang.minCount", "must be >= 1"),
    (ALPHA, ALPHA_GROUP, "spec.schedulingPolicy.gang.minCount", "4",
     "spec.schedulingPolicy.gang.minCount", "expected an integer"),
    (ALPHA, ALPHA_GROUP, "spec.disruptionMode", "Sometimes", "spec.disruptionMode",
     "unknown mode"),
    (BETA, BETA_GROUP, "spec.disruptionMode", {"single": {}, "all": {}}, "spec.disruptionMode",
     "exactly one of single or all"),
    (ALPHA, ALPHA_GROUP, "spec.schedulingConstraints.topology", [{"key": "a"}, {"key": "b"}],
     "spec.schedulingConstraints.topology", "at most one"),
    (ALPHA, ALPHA_GROUP, "spec.schedulingConstraints.topology", [{}],
     "spec.schedulingConstraints.topology[0].key", "missing"),
    (ALPHA, ALPHA_GROUP, "spec.podGroupTemplateRef.workload.workloadName", None,
     "spec.podGroupTemplateRef.workload.workloadName", "missing"),
    (BETA, BETA_GROUP, "spec.workloadRef.workloadName", "",
     "spec.workloadRef.workloadName", "missing"),
    (BETA, BETA_GROUP, "spec.preemptionPolicy", "Always", "spec.preemptionPolicy",
     "unknown policy"),
    (BETA, BETA_GROUP, "spec.parentCompositePodGroupName", "parent",
     "spec.parentCompositePodGroupName", "not supported"),
])
def test_bad_podgroups_name_the_field(version: str, name: str, path: str, value: Any,
                                      field: str, reason: str) -> None:
    with pytest.raises(convert.ConversionError) as err:
        native_convert.podgroup_from_json(patched(fixture(name), path, value), version)
    assert (err.value.kind, err.value.key, err.value.path) == (
        "podgroup", "team-b/llm-pretrain-workers", field)
    assert reason in err.value.reason


def test_a_bad_workload_template_names_its_index() -> None:
    obj = patched(fixture("native_workload_v1alpha2.json"),
                  "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount", -1)
    with pytest.raises(convert.ConversionError, match=r"podGroupTemplates\[0\]\.schedulingPolicy"):
        native_convert.workload_from_json(obj, ALPHA)


def test_an_unknown_api_version_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="v1alpha1"):
        native_convert.podgroup_from_json(fixture(ALPHA_GROUP), "scheduling.k8s.io/v1alpha1")


@pytest.mark.parametrize(("value", "expected"), [
    ({"podGroupName": "g"}, "g"), (None, ""), ({}, "")])
def test_pod_names_its_group_in_spec_scheduling_group(value: Any, expected: str) -> None:
    assert convert.pod_from_json(
        patched(fixture("pod.json"), "spec.schedulingGroup", value)).pod_group_name == expected


def test_pod_with_a_malformed_scheduling_group_names_the_field() -> None:
    with pytest.raises(convert.ConversionError, match=r"spec\.schedulingGroup\.podGroupName"):
        convert.pod_from_json(patched(fixture("pod.json"), "spec.schedulingGroup",
                                      {"podGroupName": 7}))
