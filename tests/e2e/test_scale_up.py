"""Whole-gang scale-up through the ProvisioningRequest API, on the real apiserver with the real
ProvisioningRequest CRD (from cluster-autoscaler's pinned ``apis`` module) and the real Job
controller.

The scheduler's policy lets the tenant's pool scale up (``spec.scaleUp.pools``); the pool has no
node, only a node group template (8 GPUs a node) in the kwok provider's templates ConfigMap. A
4x8-GPU Indexed Job fits nowhere: the scheduler creates ONE ProvisioningRequest for the whole
gang (class ``best-effort-atomic-scale-up``) with its PodTemplate, accepted by the CRD's
validation, and the pods' pending message says they wait for the new nodes.

THE TEST PLAYS THE AUTOSCALER'S PART. The real cluster-autoscaler (kwok cloud provider) cannot
run here: the Go module proxy serves the source zip of
k8s.io/autoscaler/cluster-autoscaler@v0.0.0-20240830133931-adfbe7e45277 but refuses its go.mod
(HTTP 403), so Go cannot resolve the module to build it. What the autoscaler would do is done
here by hand: set ``Provisioned=True`` on the request and add the 4 nodes of the template (with
the kwok provider's group annotation). Then the gang binds whole on the new nodes and the
request and its templates are deleted. Second case: a ``Failed=True`` answer's message is quoted
in the gang's pending reason. What this does not show: the autoscaler's own simulation, its
choice of group, its timing and its scale-down (see scheduler/tools/devcluster/README.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from scheduler.kube.read.node_groups import GROUP_NAME_ANNOTATION, MAX_COUNT_ANNOTATION
from scheduler.kube.read.provisioning_state import GANG_LABEL
from scheduler.kube.read.scale_up_feed import TEMPLATES_CONFIGMAP, TEMPLATES_KEY
from scheduler.kube.write.provisioning import ATOMIC_SCALE_UP_CLASS
from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import wait_for
from tests.e2e.live import GPU, POOL_LABEL, InProcessScheduler, Tenant, unschedulable_message

pytestmark = pytest.mark.e2e

REQUESTS = ("autoscaling.x-k8s.io", "v1", "provisioningrequests")
MEMBERS, GPUS = 4, 8


@pytest.fixture
def group(tenant: Tenant) -> Iterator[str]:
    """A node group of the tenant's (empty) pool, declared as the kwok provider declares its
    groups: a template Node in its templates ConfigMap. Removed afterwards."""
    name = f"a100-{uuid.uuid4().hex[:6]}"
    template = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": f"{name}-template", "labels": {POOL_LABEL: tenant.pool},
                             "annotations": {GROUP_NAME_ANNOTATION: name,
                                             MAX_COUNT_ANNOTATION: "8"}},
                "status": {"allocatable": {GPU: str(GPUS), "cpu": "64", "memory": "512Gi",
                                           "pods": "110"}}}
    namespace, cm_name = TEMPLATES_CONFIGMAP
    body = {"metadata": {"name": cm_name},
            "data": {TEMPLATES_KEY: yaml.safe_dump({"kind": "List", "items": [template]})}}
    core = tenant.cp.core
    rest.call(core.create_namespaced_config_map, namespace, body)
    yield name
    rest.call(core.delete_namespaced_config_map, cm_name, namespace)


@pytest.fixture
def scheduler(tenant: Tenant, group: str,
              start_scheduler: Callable[..., InProcessScheduler]) -> InProcessScheduler:
    return start_scheduler(scheduler_policy={"scaleUp": {"pools": [tenant.pool]}})


def requests(tenant: Tenant) -> list[dict[str, Any]]:
    listed = rest.call(tenant.cp.custom.list_namespaced_custom_object, *REQUESTS[:2],
                       tenant.namespace, REQUESTS[2])
    return list(listed["items"])


def templates(tenant: Tenant) -> list[dict[str, Any]]:
    listed = rest.call(tenant.cp.core.list_namespaced_pod_template, tenant.namespace,
                       label_selector=GANG_LABEL)
    return list(listed["items"])


def submit_and_await_the_request(tenant: Tenant) -> tuple[list[str], dict[str, Any]]:
    tenant.create_job("train", parallelism=MEMBERS, gpus=GPUS, completionMode="Indexed")
    pods = wait_for(lambda: sorted(tenant.job_pods("train")) if len(
        tenant.job_pods("train")) == MEMBERS else [], 30, what="the Job's 4 pods")
    (request,) = wait_for(lambda: requests(tenant), 30, what="the gang's ProvisioningRequest")
    return pods, request


def answer(tenant: Tenant, request: dict[str, Any], kind: str, status: str,
           message: str) -> None:
    """What the autoscaler does to a request it handled: a condition on its status."""
    condition = {"type": kind, "status": status, "reason": f"Test{kind}", "message": message,
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
    rest.call(tenant.cp.custom.patch_namespaced_custom_object_status, *REQUESTS[:2],
              tenant.namespace, REQUESTS[2], request["metadata"]["name"],
              {"status": {"conditions": [condition]}}, _content_type=rest.MERGE_PATCH)


def waits_for_scale_up(message: str, group: str) -> bool:
    """The pending message of a member while its gang's nodes are asked for: the count and
    group the scheduler asked for, then (once the request is read back) that it was asked."""
    return (f"waiting for {MEMBERS} new nodes of node group {group}" in message
            or "asked the autoscaler for new nodes, no answer yet" in message)


def test_a_gang_scaled_from_zero_gets_one_request_then_binds_whole_on_the_new_nodes(
        tenant: Tenant, group: str, scheduler: InProcessScheduler) -> None:
    pods, request = submit_and_await_the_request(tenant)
    assert request["spec"]["provisioningClassName"] == ATOMIC_SCALE_UP_CLASS
    (pod_set,) = request["spec"]["podSets"]
    assert pod_set["count"] == MEMBERS
    (template,) = templates(tenant)
    assert template["metadata"]["name"] == pod_set["podTemplateRef"]["name"]
    spec = template["template"]["spec"]
    assert spec["containers"][0]["resources"]["requests"][GPU] == str(GPUS)
    assert spec["nodeSelector"] == {POOL_LABEL: tenant.pool}
    wait_for(lambda: all(waits_for_scale_up(unschedulable_message(tenant.pods()[p]), group)
                         for p in pods), 30, what="every member saying it waits for the scale-up")
    assert tenant.bound(pods) == []

    # The autoscaler's part (see the module docstring): the request is provisioned, the
    # group's 4 nodes are added from its template.
    answer(tenant, request, "Provisioned", "True", "Capacity is provisioned")
    new_nodes = [tenant.cp.create_node(f"{group}-{i}", gpus=GPUS,
                                       labels={POOL_LABEL: tenant.pool}) for i in range(MEMBERS)]
    for name in new_nodes:
        rest.call(tenant.cp.core.patch_node, name,
                  {"metadata": {"annotations": {GROUP_NAME_ANNOTATION: group}}})

    wait_for(lambda: tenant.all_bound(pods), 30, what="the gang bound whole")
    assert sorted(tenant.nodes_of(pods).values()) == sorted(new_nodes)  # one member a node
    wait_for(lambda: not requests(tenant) and not templates(tenant), 30,
             what="the request and its templates deleted once the gang is placed")
    assert len(scheduler.live.scale_up_feed.node_groups()) == 1


def test_a_gang_the_autoscaler_cannot_provision_waits_quoting_its_reason(
        tenant: Tenant, group: str, scheduler: InProcessScheduler) -> None:
    pods, request = submit_and_await_the_request(tenant)
    said = "no node group has room for all 4 pods in zone a"
    answer(tenant, request, "Failed", "True", said)
    wait_for(lambda: all(said in unschedulable_message(tenant.pods()[p]) for p in pods),
             30, what="the autoscaler's words in every member's pending message")
    assert "gave up" in unschedulable_message(tenant.pods()[pods[0]])
    assert len(requests(tenant)) == 1  # a failed request stays until a person deletes it
    assert tenant.bound(pods) == []
