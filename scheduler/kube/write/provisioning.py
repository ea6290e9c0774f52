"""The objects that ask the cluster-autoscaler for a whole gang's nodes: what the "provision"
step (``scheduler.decide.scale_up.ScaleUp``) becomes on the apiserver.

A ProvisioningRequest (``autoscaling.x-k8s.io/v1``, as cluster-autoscaler 1.31 serves it) names
one PodTemplate per pod set and how many pods of it must fit; with the class
``best-effort-atomic-scale-up`` the autoscaler adds nodes for all of them or for none. The
templates are copies of one member pod of each role, so the autoscaler simulates exactly the pods
that will bind (their requests, selectors, tolerations), without the fields that tie a copy to a
node or to this pod. The names derive from the gang's, so a request is found again (and deleted
once the gang is placed or gone) without remembering anything between cycles.

Pure builders: the writes themselves go through the actuator's client like every other write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.decide.plan import ScaleUp

API_VERSION = "autoscaling.x-k8s.io/v1"
#: The autoscaler's class for "all of these nodes or none" (cluster-autoscaler 1.30+).
ATOMIC_SCALE_UP_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
#: Marks the objects gang-scheduler made for a gang, so that its own are found and deleted.
GANG_LABEL = "gangscheduler.io/gang"
#: Spec fields of a member pod that belong to that pod only, not to the pods to provision for.
_POD_ONLY_FIELDS = ("nodeName", "hostname", "subdomain")


def request_name(gang_name: str) -> str:
    """The ProvisioningRequest of gang *gang_name* (its PodTemplates add the role)."""
    return f"gang-{gang_name}"


def template_name(gang_name: str, role: str) -> str:
    return f"{request_name(gang_name)}-{role}"


def pod_template(namespace: str, gang_name: str, role: str,
                 member_spec: Mapping[str, Any]) -> dict[str, Any]:
    """A PodTemplate of one role, from one member pod's ``spec``."""
    spec = {k: v for k, v in member_spec.items() if k not in _POD_ONLY_FIELDS}
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": template_name(gang_name, role), "namespace": namespace,
                     "labels": {GANG_LABEL: gang_name}},
        "template": {"spec": spec},
    }


def provisioning_request(namespace: str, gang_name: str, plan: ScaleUp) -> dict[str, Any]:
    """The ProvisioningRequest for *plan*: one pod set per role, each naming its template."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ProvisioningRequest",
        "metadata": {"name": request_name(gang_name), "namespace": namespace,
                     "labels": {GANG_LABEL: gang_name}},
        "spec": {
            "provisioningClassName": ATOMIC_SCALE_UP_CLASS,
            "podSets": [{"podTemplateRef": {"name": template_name(gang_name, s.role)},
                         "count": s.count} for s in plan.pod_sets],
        },
    }


def provisioning_objects(namespace: str, gang_name: str, plan: ScaleUp,
                         member_specs: Mapping[str, Mapping[str, Any]]
                         ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The PodTemplates (to create first: the request refers to them) and the request.

    *member_specs* maps each role of the plan to one of its pods' ``spec``; a role without one
    is a defect of the caller, refused naming the role."""
    missing = [s.role for s in plan.pod_sets if s.role not in member_specs]
    if missing:
        raise ValueError(f"gang {plan.gang_id}: no member pod spec for role(s) "
                         f"{', '.join(missing)} to build the ProvisioningRequest from")
    templates = [pod_template(namespace, gang_name, s.role, member_specs[s.role])
                 for s in plan.pod_sets]
    return templates, provisioning_request(namespace, gang_name, plan)
