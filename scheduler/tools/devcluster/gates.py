"""Feature gates and API versions the dev cluster turns on, per Kubernetes release.

Why: Kubernetes' own gang API (Workload-Aware Scheduling: ``scheduling.k8s.io`` Workload and
PodGroup, a pod's ``spec.schedulingGroup``) is alpha in 1.36 and beta in 1.37, and off by
default in both. A test of gang-scheduler reading that API needs the apiserver to serve it and
validate its fields, the Job controller to create Workloads and PodGroups for Indexed Jobs
(``WorkloadWithJob``), and kube-scheduler to schedule such gangs itself (so the same YAML can
be run by either scheduler). Each component gets only the gates it reads; the names come from
``pkg/features/kube_features.go`` of the pinned release.

Dynamic Resource Allocation needs none of its own: ``DynamicResourceAllocation`` is GA and
locked on since 1.35 and ``resource.k8s.io/v1`` is served by default; what the dev cluster
adds for it is the resourceclaim controller (controllers.py) and a fake driver
(dra_driver.py). Claims a PodGroup holds (``DRAWorkloadResourceClaims``) are the gang API's.
"""

from __future__ import annotations

from collections.abc import Mapping

#: What each component needs for the gang API, by Kubernetes minor release ("1.36").
_GATES: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "1.36": {
        # The apiserver validates the alpha fields (priority, disruptionMode, topology,
        # resourceClaims) and forbids them while their gate is off.
        "kube-apiserver": ("GenericWorkload", "GangScheduling", "WorkloadAwarePreemption",
                           "TopologyAwareWorkloadScheduling", "WorkloadWithJob",
                           "DRAWorkloadResourceClaims"),
        # DRAWorkloadResourceClaims: the resourceclaim controller makes a PodGroup's claims
        # from its templates and knows a claim reserved for a PodGroup is its pods' (without
        # it, it reserves the claim for each bound pod besides).
        "kube-controller-manager": ("GenericWorkload", "WorkloadWithJob",
                                    "DRAWorkloadResourceClaims"),
        "kube-scheduler": ("GenericWorkload", "GangScheduling", "WorkloadAwarePreemption",
                           "TopologyAwareWorkloadScheduling"),
    },
    "1.37": {
        # GangScheduling and WorkloadAwarePreemption are folded into GenericWorkload (beta).
        "kube-apiserver": ("GenericWorkload", "TopologyAwareWorkloadScheduling",
                           "WorkloadWithJob", "DRAWorkloadResourceClaims",
                           "PodGroupPreemptionPolicy"),
        "kube-controller-manager": ("GenericWorkload", "WorkloadWithJob",
                                    "DRAWorkloadResourceClaims"),
        "kube-scheduler": ("GenericWorkload", "TopologyAwareWorkloadScheduling",
                           "PodGroupPreemptionPolicy"),
    },
}

#: The ``scheduling.k8s.io`` version each release serves Workload and PodGroup at.
GANG_API_VERSION: Mapping[str, str] = {"1.36": "v1alpha2", "1.37": "v1beta1"}


def minor(version: str) -> str:
    """``v1.36.3`` -> ``1.36``."""
    major_minor = version.lstrip("v").split(".")[:2]
    return ".".join(major_minor)


def _release(version: str) -> str:
    release = minor(version)
    if release not in _GATES:
        raise ValueError(f"Kubernetes {version}: no feature gates known for {release} "
                         f"(known: {', '.join(sorted(_GATES))})")
    return release


def feature_gates_flag(component: str, version: str) -> str:
    """``--feature-gates=A=true,B=true`` for *component* at Kubernetes *version*."""
    gates = _GATES[_release(version)][component]
    return "--feature-gates=" + ",".join(f"{g}=true" for g in gates)


def runtime_config_flag(version: str) -> str:
    """``--runtime-config`` serving the gang API's version (alpha and beta APIs are off by
    default)."""
    return f"--runtime-config=scheduling.k8s.io/{GANG_API_VERSION[_release(version)]}=true"
