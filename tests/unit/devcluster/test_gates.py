"""The dev cluster's feature gates: every component of a release gets the gang API's gates."""

from __future__ import annotations

import pytest

from scheduler.tools.devcluster import gates


@pytest.mark.parametrize(("component", "version", "expected"), [
    ("kube-apiserver", "v1.36.3", {"GenericWorkload", "GangScheduling", "WorkloadWithJob",
                                   "WorkloadAwarePreemption", "TopologyAwareWorkloadScheduling"}),
    ("kube-controller-manager", "v1.36.3", {"GenericWorkload", "WorkloadWithJob",
                                            "DRAWorkloadResourceClaims"}),
    ("kube-scheduler", "v1.36.3", {"GenericWorkload", "GangScheduling"}),
    ("kube-apiserver", "v1.37.2", {"GenericWorkload", "WorkloadWithJob"}),
    ("kube-scheduler", "v1.37.2", {"GenericWorkload", "TopologyAwareWorkloadScheduling"}),
])
def test_feature_gates_name_what_each_component_reads(component: str, version: str,
                                                       expected: set[str]) -> None:
    flag = gates.feature_gates_flag(component, version)
    name, _, value = flag.partition("=")
    assert name == "--feature-gates"
    named = dict(pair.split("=") for pair in value.split(","))
    assert expected <= set(named)
    assert set(named.values()) == {"true"}


@pytest.mark.parametrize(("version", "api"), [("v1.36.3", "v1alpha2"), ("v1.37.2", "v1beta1")])
def test_runtime_config_serves_the_release_api_version(version: str, api: str) -> None:
    assert gates.runtime_config_flag(version) == f"--runtime-config=scheduling.k8s.io/{api}=true"


def test_an_unknown_release_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"1\.35.*known: 1\.36, 1\.37"):
        gates.feature_gates_flag("kube-apiserver", "v1.35.4")
