"""Kubernetes' own Workloads and PodGroups no test wrote, in both API versions.

The properties: the converters return a value or raise ``ConversionError`` naming the object
(never another exception); what they return is sane (minCount >= 1 or basic); a cache fed any
such PodGroups and Workloads, with pods naming them, builds a cycle input and ``decide`` plans
on it without crashing.
"""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.queues import PolicySet
from scheduler.decide import cycle
from scheduler.feed.cache import ClusterCache
from scheduler.kube.read import convert, native_convert
from scheduler.kube.read.convert import ConversionError
from scheduler.model import native
from tests.unit.reliability import strategies as fuzz

FUZZ = settings(max_examples=fuzz.FUZZ_EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
VERSIONS = {native.V1ALPHA2: "v1alpha2", native.V1BETA1: "v1beta1"}


def versioned(kind: str) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """(API version, a damaged fixture of *kind* in that version)."""
    return st.sampled_from(sorted(VERSIONS)).flatmap(
        lambda v: st.tuples(st.just(v), fuzz.damaged(fuzz.fixture(
            f"native_{kind}_{VERSIONS[v]}"))))


@FUZZ
@given(versioned("podgroup"))
def test_podgroups(case: tuple[str, dict[str, Any]]) -> None:
    version, obj = case
    try:
        group = native_convert.podgroup_from_json(obj, version)
    except ConversionError as exc:
        assert exc.kind == "podgroup" and str(exc)
        return
    assert group.name and group.api_version == version
    assert group.policy.min_count is None or group.policy.min_count >= 1


@FUZZ
@given(versioned("workload"))
def test_workloads(case: tuple[str, dict[str, Any]]) -> None:
    version, obj = case
    try:
        workload = native_convert.workload_from_json(obj, version)
    except ConversionError as exc:
        assert exc.kind == "workload" and str(exc)
        return
    assert all(t.min_count is None or t.min_count >= 1 for t in workload.templates.values())


@settings(max_examples=max(20, fuzz.FUZZ_EXAMPLES // 10), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(versioned("podgroup"), max_size=3), st.lists(versioned("workload"), max_size=2),
       st.lists(fuzz.pods(), max_size=4))
def test_a_cache_of_broken_native_groups_still_plans(
        groups: list[tuple[str, dict[str, Any]]], workloads: list[tuple[str, dict[str, Any]]],
        pods: list[dict[str, Any]]) -> None:
    cache = ClusterCache()
    for version, obj in groups:
        with contextlib.suppress(ConversionError):
            cache.upsert_native_group(native_convert.podgroup_from_json(obj, version))
    for version, obj in workloads:
        with contextlib.suppress(ConversionError):
            cache.upsert_workload(native_convert.workload_from_json(obj, version))
    for obj in pods:
        spec = obj.get("spec")
        obj = {**obj, "spec": {**(spec if isinstance(spec, dict) else {}),
                               "schedulingGroup": {"podGroupName": "llm-pretrain-workers"},
                               "schedulerName": "gang-scheduler"}}
        with contextlib.suppress(ConversionError):
            cache.upsert_pod(convert.pod_from_json(obj))
    inp = cache.cycle_input(0.0)
    cycle.decide(inp.snapshot, inp.gangs.pending, PolicySet(), 1.0)
