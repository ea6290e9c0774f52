"""The objects that ask the cluster-autoscaler for a whole gang's nodes: what the "provision"
step (``scheduler.decide.scale_up.ScaleUp``) becomes on the apiserver.

A ProvisioningRequest (``autoscaling.x-k8s.io/v1``, as cluster-autoscaler 1.31 serves it) names
one PodTemplate per pod set and how many pods of it must fit; with the class
``best-effort-atomic-scale-up`` the autoscaler adds nodes for all of them or for none. The
templates are copies of one member pod of each role, so the autoscaler simulates exactly the pods
that will bind (their requests, selectors, tolerations), without the fields that tie a copy to a
node or to this pod. The names derive from the gang's, so a request is found again (and deleted
once the gang is placed or gone) without remembering anything between cycles.

The members themselves are annotated as consuming their gang's request (`CONSUME_ANNOTATION`):
the autoscaler then leaves them out of its ordinary scale-up for unschedulable pods, which knows
no gangs and would add nodes for part of a gang (up to a group's maximum) beside the
all-or-nothing request; and it books the provisioned capacity for them. The members of a gang
in such a pool that has no request (it waits for quota, or no group can take it whole) get the
autoscaler's per-pod scale-up delay set to ten years (`SCALE_UP_DELAY_ANNOTATION`), for the same
reason: otherwise it adds nodes for as many of them as a group allows, which the gang cannot use.
Whatever asked for its nodes, a gang of several members bound in such a pool is marked
not safe to evict (``keep_from_scale_down``): the autoscaler's scale-down would otherwise
repack one member of a running gang elsewhere and stall the rest.

The builders are pure; ``ScaleUpWriter`` makes the writes, through the client it is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Any

import structlog

from scheduler.decide.plan import CyclePlan, ScaleUp
from scheduler.kube.client import (
    MERGE_PATCH,
    ApiError,
    Requester,
    Response,
    TransportError,
    path_segment,
)
from scheduler.kube.read.provisioning_state import API_VERSION, GANG_LABEL
from scheduler.model.gangs import PodRef
from scheduler.model.workloads import SAFE_TO_EVICT_ANNOTATION

#: The autoscaler's class for "all of these nodes or none" (cluster-autoscaler 1.30+).
ATOMIC_SCALE_UP_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
#: On a member pod: the request it will consume, and that request's class (the autoscaler's
#: ``ProvisioningRequestPodAnnotationKey`` and ``ProvisioningClassPodAnnotationKey``).
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
#: On a member of a gang in a pool that may scale up but without a request (``held``): the
#: autoscaler considers a pod for its scale-up only once it is older than this, i.e. never.
#: A request made later takes over (its consumers are left out of that scale-up anyway).
SCALE_UP_DELAY_ANNOTATION = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"
HOLD_DELAY = "87600h"
#: The autoscaler's value of ``SAFE_TO_EVICT_ANNOTATION`` that blocks draining the pod's node.
NOT_SAFE_TO_EVICT = "false"
log = structlog.get_logger()

#: Spec fields of a member pod that belong to that pod only, not to the pods to provision for.
_POD_ONLY_FIELDS = ("nodeName", "hostname", "subdomain")


def request_name(gang_name: str) -> str:
    """The ProvisioningRequest of gang *gang_name* (its PodTemplates add the role)."""
    return f"gang-{gang_name}"


def template_name(gang_name: str, role: str) -> str:
    return f"{request_name(gang_name)}-{role}"


def consumer_patch(gang_name: str) -> dict[str, Any]:
    """The merge patch that marks a member pod as consuming its gang's request."""
    return {"metadata": {"annotations": {CONSUME_ANNOTATION: request_name(gang_name),
                                         CLASS_ANNOTATION: ATOMIC_SCALE_UP_CLASS}}}


def hold_patch() -> dict[str, Any]:
    """The merge patch that keeps a member out of the autoscaler's scale-up for pods."""
    return {"metadata": {"annotations": {SCALE_UP_DELAY_ANNOTATION: HOLD_DELAY}}}


def keep_from_scale_down_patch() -> dict[str, Any]:
    """The merge patch that stops the autoscaler's scale-down from evicting a gang member."""
    return {"metadata": {"annotations": {SAFE_TO_EVICT_ANNOTATION: NOT_SAFE_TO_EVICT}}}


def keep_from_scale_down(client: Requester, pods: Iterable[PodRef]) -> str:
    """Mark *pods* (a gang's, before they bind) as not to be evicted by the autoscaler's
    scale-down: why one could not be, or "". Before the bind, not after: a member bound
    unmarked could be drained in between. A pod gone is left to the bind to find."""
    for pod in pods:
        path = f"/api/v1/namespaces/{path_segment(pod.namespace)}/pods/{path_segment(pod.name)}"
        try:
            response = client.request("PATCH", path, body=keep_from_scale_down_patch(),
                                      content_type=MERGE_PATCH)
        except TransportError as error:
            return f"{pod.name} not marked safe from scale-down: {error}"
        if not response.ok and response.status != HTTPStatus.NOT_FOUND:
            return f"{pod.name} not marked safe from scale-down: " \
                   f"{ApiError('PATCH', path, response)}"
    return ""


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


class ScaleUpWriter:
    """Keeps one ProvisioningRequest (and its PodTemplates) for each gang the plan asks nodes
    for, and deletes a gang's once it is no longer pending: placed, or gone.

    A request is created once and then left to the autoscaler; a gang still pending keeps its
    request whatever the autoscaler answered (a failed one stays, quoted in the gang's reason,
    until a person deletes it to ask again). *existing*: gangs whose requests the read side
    listed, so a request made before a restart is withdrawn too. A write that fails is logged
    and tried again on the next cycle."""

    def __init__(self, client: Requester) -> None:
        self.client = client
        self._made: set[str] = set()  # gang ids with a request, made or listed
        self._marked: set[tuple[str, str]] = set()  # (kind, uid) of members annotated

    def apply(self, plan: CyclePlan, existing: Iterable[str] = ()) -> None:
        self._made.update(existing)
        for scale_up in plan.scale_ups:
            if scale_up.gang_id not in self._made and self._ask(scale_up):
                self._made.add(scale_up.gang_id)
            members = plan.members.get(scale_up.gang_id)
            if scale_up.gang_id in self._made and members is not None:
                self._mark(scale_up.gang_id, members.pods,  # also members recreated since
                           consumer_patch(scale_up.gang_id.split("/", 1)[1]))
        for gang_id in plan.scale_up_held:
            members = plan.members.get(gang_id)
            if members is not None:
                self._mark(gang_id, members.pods, hold_patch(), kind="held")
        asked = {s.gang_id for s in plan.scale_ups}
        for gang_id in sorted(self._made - asked - plan.pending.keys()):
            if self._withdraw(gang_id):
                self._made.discard(gang_id)

    def _ask(self, scale_up: ScaleUp) -> bool:
        namespace, gang_name = scale_up.gang_id.split("/", 1)
        specs: dict[str, Mapping[str, Any]] = {}
        try:
            for pod_set in scale_up.pod_sets:
                if pod_set.sample is None:
                    log.warning("scale_up_without_pod", gang=scale_up.gang_id, role=pod_set.role)
                    return False
                pod = self._call("GET", f"/api/v1/namespaces/{path_segment(namespace)}/pods/"
                                        f"{path_segment(pod_set.sample.name)}").json()
                specs[pod_set.role] = pod.get("spec") or {}
            templates, request = provisioning_objects(namespace, gang_name, scale_up, specs)
            for template in templates:
                self._create(f"/api/v1/namespaces/{path_segment(namespace)}/podtemplates",
                             template)
            self._create(_requests_path(namespace), request)
        except (ApiError, TransportError) as error:
            log.warning("scale_up_not_asked", gang=scale_up.gang_id, error=str(error))
            return False
        log.info("scale_up_asked", gang=scale_up.gang_id, group=scale_up.group,
                 nodes=scale_up.nodes)
        return True

    def _mark(self, gang_id: str, pods: Iterable[PodRef], patch: Mapping[str, Any],
              kind: str = "consumer") -> None:
        """Merge *patch* into the members' metadata, once per member and *kind*."""
        for pod in pods:
            if (kind, pod.uid) in self._marked:
                continue
            path = (f"/api/v1/namespaces/{path_segment(pod.namespace)}/pods/"
                    f"{path_segment(pod.name)}")
            response = self.client.request("PATCH", path, body=patch, content_type=MERGE_PATCH)
            if response.ok or response.status == HTTPStatus.NOT_FOUND:  # gone: nothing to mark
                self._marked.add((kind, pod.uid))
            else:
                log.warning("scale_up_member_not_marked", gang=gang_id, pod=pod.name, kind=kind,
                            error=str(ApiError("PATCH", path, response)))

    def _withdraw(self, gang_id: str) -> bool:
        namespace, gang_name = gang_id.split("/", 1)
        try:
            self._call("DELETE", f"{_requests_path(namespace)}/"
                                 f"{path_segment(request_name(gang_name))}", missing_ok=True)
            self._call("DELETE", f"/api/v1/namespaces/{path_segment(namespace)}/podtemplates",
                       query={"labelSelector": f"{GANG_LABEL}={gang_name}"})
        except (ApiError, TransportError) as error:
            log.warning("scale_up_not_withdrawn", gang=gang_id, error=str(error))
            return False
        log.info("scale_up_withdrawn", gang=gang_id)
        return True

    def _create(self, path: str, body: Mapping[str, Any]) -> None:
        response = self.client.request("POST", path, body=body)
        if not response.ok and response.status != HTTPStatus.CONFLICT:  # made already: kept
            raise ApiError("POST", path, response)

    def _call(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
              missing_ok: bool = False) -> Response:
        response = self.client.request(method, path, query=query)
        if not response.ok and not (missing_ok and response.status == HTTPStatus.NOT_FOUND):
            raise ApiError(method, path, response)
        return response


def _requests_path(namespace: str) -> str:
    return f"/apis/{API_VERSION}/namespaces/{path_segment(namespace)}/provisioningrequests"
