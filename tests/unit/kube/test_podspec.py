"""Pod JSON -> PodConstraints: resolved as kube-scheduler resolves them, errors name the field."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.kube.read import convert, podspec, storage
from scheduler.model.constraints import ClaimUse, DeviceClaimUse, HostPort, InclusionPolicy
from scheduler.model.labels import LabelOp, LabelRequirement, LabelSelector

TERM = {"labelSelector": {"matchLabels": {"app": "trainer"}},
        "topologyKey": "kubernetes.io/hostname"}


def pod(spec: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    base = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    return {"metadata": {"name": "p", "namespace": "team-a", "uid": "u",
                         "labels": labels or {"app": "trainer", "team": "a"}},
            "spec": {**base, **spec}}


def test_anti_affinity_defaults_to_the_pods_namespace_and_merges_label_keys() -> None:
    spec = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {**TERM, "matchLabelKeys": ["team"], "mismatchLabelKeys": ["missing"]}]}}}
    c = convert.pod_from_json(pod(spec)).requirements.constraints
    (term,) = c.anti_affinity
    assert term.namespaces == frozenset({"team-a"})
    assert term.selector == LabelSelector.equals({"app": "trainer", "team": "a"})
    assert term.describe() == "app=trainer,team=a per kubernetes.io/hostname"


def test_namespace_selector_and_list_replace_the_default() -> None:
    spec = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {**TERM, "namespaceSelector": {"matchLabels": {"team": "b"}}},
        {**TERM, "namespaces": ["x"]}, {**TERM, "namespaceSelector": {}}]}}}
    a, b, c = convert.pod_from_json(pod(spec)).requirements.constraints.affinity
    assert a.namespaces == frozenset() and a.matches("ns", {"app": "trainer"}, {"team": "b"})
    assert b.namespaces == {"x"} and not b.matches("team-a", {"app": "trainer"}, {})
    assert c.matches("anywhere", {"app": "trainer"}, {})


def test_spread_defaults_and_policies() -> None:
    spec = {"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
         "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchExpressions": [
             {"key": "app", "operator": "In", "values": ["trainer", "web"]}]},
         "minDomains": 3, "nodeTaintsPolicy": "Honor", "matchLabelKeys": ["team"]},
        {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname",
         "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}}]}
    hard, soft = convert.pod_from_json(pod(spec)).requirements.constraints.spread
    assert (hard.min_domains, hard.node_affinity_policy, hard.node_taints_policy) == (
        3, InclusionPolicy.HONOR, InclusionPolicy.HONOR)
    assert LabelRequirement("team", LabelOp.IN, ("a",)) in hard.selector.requirements
    assert hard.required and not soft.required and soft.selector.empty


def test_host_ports_of_containers_and_sidecars_only() -> None:
    spec = {"initContainers": [
        {"name": "init", "ports": [{"containerPort": 1, "hostPort": 7000}]},
        {"name": "side", "restartPolicy": "Always",
         "ports": [{"containerPort": 1, "hostPort": 7001, "protocol": "UDP"}]}],
        "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080,
                                                "hostIP": "10.0.0.1"}, {"containerPort": 81}]}]}
    ports = convert.pod_from_json(pod(spec)).requirements.constraints.host_ports
    assert ports == (HostPort(7001, "UDP"), HostPort(8080, "TCP", "10.0.0.1"))
    assert HostPort(8080).conflicts(HostPort(8080, "TCP", "10.0.0.1"))
    assert not HostPort(8080, "TCP", "10.0.0.2").conflicts(HostPort(8080, "TCP", "10.0.0.1"))


def test_claims_and_unsupported_fields_are_recorded() -> None:
    spec = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d",
                                                                   "readOnly": True}},
                        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
                        {"name": "token", "projected": {"sources": []}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "x"}]}
    c = convert.pod_from_json(pod(spec)).requirements.constraints
    assert c.claims == (ClaimUse("d", True),)
    assert [u.split(":")[0] for u in c.unsupported] == ["spec.volumes[1].ephemeral"]
    assert c.device_claims == (DeviceClaimUse("gpu", claim="x"),)


def test_scheduling_gates_are_read() -> None:
    assert convert.pod_from_json(pod({"schedulingGates": [{"name": "wait"}]})
                                 ).scheduling_gates == ("wait",)


@pytest.mark.parametrize(("spec", "path"), [
    ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {}}]}}},
     "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"),
    ({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {**TERM, "labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}]}}},
     "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
     ".labelSelector.matchExpressions[0].values"),
    ({"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "podAffinityTerm": TERM}]}}},
     "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"),
    ({"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "k",
                                     "whenUnsatisfiable": "DoNotSchedule"}]},
     "spec.topologySpreadConstraints[0].maxSkew"),
    ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "k",
                                     "whenUnsatisfiable": "Maybe"}]},
     "spec.topologySpreadConstraints[0].whenUnsatisfiable"),
    ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "k", "minDomains": 2,
                                     "whenUnsatisfiable": "ScheduleAnyway"}]},
     "spec.topologySpreadConstraints[0].minDomains"),
    ({"containers": [{"name": "c", "ports": [{"containerPort": 1, "hostPort": 70000}]}]},
     "spec.containers[0].ports[0].hostPort"),
    ({"volumes": [{"name": "v", "persistentVolumeClaim": {}}]},
     "spec.volumes[0].persistentVolumeClaim.claimName"),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.uid", "operator": "In",
                                                "values": ["x"]}]}]}}}},
     "spec.affinity.nodeAffinity.required.nodeSelectorTerms[0].matchFields[0].key"),
])
def test_malformed_fields_are_named(spec: dict[str, Any], path: str) -> None:
    with pytest.raises(convert.ConversionError) as err:
        convert.pod_from_json(pod(spec))
    assert err.value.path == path, err.value


def test_memo_ignores_the_token_volume_but_not_the_namespace() -> None:
    token = {"name": "kube-api-access-abcde", "projected": {"sources": []}}
    anti = {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [TERM]}}}
    a = convert.pod_from_json(pod({**anti, "volumes": [token]})).requirements
    b = convert.pod_from_json(pod({**anti, "volumes": [{**token, "name": "kube-api-access-x"}]}))
    assert a is b.requirements
    other = pod(anti)
    other["metadata"]["namespace"] = "team-b"
    assert convert.pod_from_json(other).requirements.constraints.anti_affinity[0].namespaces \
        == {"team-b"}


def test_storage_objects() -> None:
    claim = storage.claim_from_json({
        "metadata": {"name": "c", "namespace": "n", "uid": "1", "annotations": {
            "volume.kubernetes.io/selected-node": "node-1"}},
        "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "10Gi"}}}})
    assert (claim.key, claim.request, claim.selected_node, claim.bound) == (
        "n/c", 10 << 30, "node-1", False)
    pv = storage.volume_from_json({
        "metadata": {"name": "pv", "labels": {"topology.kubernetes.io/zone": "a__b"}},
        "spec": {"capacity": {"storage": "1Ti"}, "storageClassName": "fast",
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "zone", "operator": "In", "values": ["a"]}]}]}},
                 "claimRef": {"namespace": "n", "name": "c"}},
        "status": {"phase": "Bound"}})
    assert pv.reaches("x", {"zone": "a"}) and not pv.reaches("x", {"zone": "b"})
    assert pv.zones() == (("topology.kubernetes.io/zone", frozenset({"a", "b"})),)
    cls = storage.storage_class_from_json({
        "metadata": {"name": "fast"}, "provisioner": "x.example/p",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}]})
    assert cls.wait_for_consumer and cls.allows({"zone": "a"}) and not cls.allows({"zone": "b"})
    assert storage.csinode_from_json({"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": "d", "allocatable": {"count": 16}}, {"name": "e"}]}}) == ("n1", {"d": 16})
    with pytest.raises(convert.ConversionError) as err:
        storage.storage_class_from_json({"metadata": {"name": "s"}, "volumeBindingMode": "Later"})
    assert err.value.path == "volumeBindingMode"


def test_label_selector_nil_and_empty() -> None:
    assert podspec.label_selector(None, "x").matches({}) is False
    assert podspec.label_selector({}, "x").matches({"a": "b"}) is True
