"""Claims that cannot be served, told where users look (issue 35, "bad claims get a clear
reason on the pods and the PodGroup"). First, a gang whose device allocations the apiserver
refuses: here a real ValidatingAdmissionPolicy an admin put on the tenant's
namespace forbids giving a ResourceClaim an allocation. gang-scheduler places the gang,
its claim writes are refused before any member binds, and its pods say so
(``Backoff``, with the apiserver's own message) while it backs off, instead of showing
nothing; no pod binds and no claim keeps an allocation. Once the admin removes the policy,
the gang starts whole at its next retry.

Asserted on state only, with generous timeouts (a loaded 2-core machine).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from scheduler.tools.devcluster import dra, dra_driver, rest
from tests.e2e import dra_support as ds
from tests.e2e import native_support
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import (
    POOL_LABEL,
    QUEUE_LABEL,
    InProcessScheduler,
    Tenant,
    unschedulable_message,
)

pytestmark = pytest.mark.e2e

TIMEOUT_S = 120.0
DENIED = "allocations are frozen in this namespace"


def _freeze_allocations(cp: ControlPlane, namespace: str) -> str:
    """A ValidatingAdmissionPolicy (and its binding) that refuses any update giving a claim
    of *namespace* an allocation it did not have; returns its name."""
    api = client.AdmissionregistrationV1Api(cp.api)
    name = f"freeze-claims-{namespace}"
    rest.call(api.create_validating_admission_policy, {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["resource.k8s.io"], "apiVersions": ["*"],
                "operations": ["UPDATE"],
                "resources": ["resourceclaims", "resourceclaims/status"]}]},
            "validations": [{
                "expression": "!has(object.status) || !has(object.status.allocation) || "
                              "(has(oldObject.status) && has(oldObject.status.allocation))",
                "message": DENIED}]}})
    rest.call(api.create_validating_admission_policy_binding, {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {
                     "kubernetes.io/metadata.name": namespace}}}}})
    return name


def _unfreeze(cp: ControlPlane, name: str) -> None:
    api = client.AdmissionregistrationV1Api(cp.api)
    for delete in (api.delete_validating_admission_policy_binding,
                   api.delete_validating_admission_policy):
        try:
            rest.call(delete, name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def _frozen(cp: ControlPlane, namespace: str, node: str) -> bool:
    """Does the policy refuse an allocation yet (policies take effect asynchronously)? A
    dry-run status patch of a probe claim, with a real device of *node*."""
    device = sorted(ds.devices_of(cp, node))[0]
    body: dict[str, Any] = {"status": {"allocation": {"devices": {"results": [{
        "request": ds.CLAIM, "driver": dra.DRIVER, "pool": node, "device": device}]}}}}
    try:
        rest.call(client.ResourceV1Api(cp.api).patch_namespaced_resource_claim_status,
                  "probe", namespace, body, dry_run="All")
    except ApiException as exc:
        return DENIED in str(exc.body)
    return False


def test_refused_claim_writes_are_told_on_the_pods_and_the_gang_starts_once_allowed(
        control_plane: ControlPlane, tenant: Tenant,
        live_scheduler: InProcessScheduler) -> None:
    cp = control_plane
    (node,) = tenant.create_nodes(1, gpus=2)
    dra_driver.wait_published(cp.api, [node], timeout_s=TIMEOUT_S)
    ns = tenant.namespace
    ds.create_claim(cp, ns, "probe", ds.exactly(dra.DRIVER))
    policy = _freeze_allocations(cp, ns)
    try:
        wait_for(lambda: _frozen(cp, ns, node), TIMEOUT_S, what="the policy in effect")
        ds.create_template(cp, ns, "one-gpu", ds.exactly(dra.DRIVER))
        job = ds.indexed_job("frozen", 2, ds.claiming_pod_spec(
            {POOL_LABEL: tenant.pool}, tenant.scheduler_name, template="one-gpu"),
            {QUEUE_LABEL: tenant.queue})
        rest.call(client.BatchV1Api(cp.api).create_namespaced_job, ns, job)

        def told() -> list[str]:
            pods = tenant.job_pods("frozen")
            said = [unschedulable_message(p) for p in pods.values()]
            return said if len(pods) == 2 and all(
                m.startswith("Backoff: its last bind was refused: claims not bound")
                for m in said) else []

        said = wait_for(told, TIMEOUT_S, what="the pods told their claim writes were refused")
        assert all(DENIED in m for m in said), said
        for _ in live_scheduler.during_cycles(3):  # it keeps trying, and nothing sticks
            assert tenant.bound(list(tenant.job_pods("frozen"))) == []
        assert [ds.results(c) for c in ds.claims(cp, ns)] == [[]] * len(ds.claims(cp, ns))
    finally:
        _unfreeze(cp, policy)

    pods = wait_for(lambda: tenant.job_pods("frozen") if tenant.all_bound(
        list(tenant.job_pods("frozen"))) and len(tenant.job_pods("frozen")) == 2 else {},
        TIMEOUT_S, what="the Job bound whole once the policy was removed")
    claims = {c["metadata"]["ownerReferences"][0]["name"]: c
              for c in ds.claims(cp, ns) if c["metadata"].get("ownerReferences")}
    for name, pod in pods.items():
        (result,) = ds.results(claims[name])
        assert result["pool"] == pod["spec"]["nodeName"] == node
        assert ds.reserved_for(claims[name]) == [name]


def _group_reason(cp: ControlPlane, namespace: str, name: str) -> str:
    group = rest.call(cp.custom.get_namespaced_custom_object, native_support.GROUP,
                      native_support.VERSION, namespace, "podgroups", name)
    scheduled = native_support.condition(group, native_support.SCHEDULED)
    return str(scheduled.get("message") or "")


def test_bad_claims_are_told_on_the_pods_and_the_podgroup_and_good_gangs_still_start(
        control_plane: ControlPlane, tenant: Tenant,
        live_scheduler: InProcessScheduler) -> None:
    """Claims the apiserver accepts but no allocator can serve (issue 35, "Done when"): an
    upstream PodGroup whose pods claim from a template naming a DeviceClass that does not
    exist, and one whose pods ask for more devices than any node has. Each waits with a
    reason naming the class or the shortage, on its pods and on its PodGroup; the
    scheduler keeps running, and a good gang beside them starts."""
    cp = control_plane
    (node,) = tenant.create_nodes(1, gpus=2)
    dra_driver.wait_published(cp.api, [node], timeout_s=TIMEOUT_S)
    ns = tenant.namespace
    ds.create_template(cp, ns, "no-class", ds.exactly("no-such-class.example.com"))
    ds.create_template(cp, ns, "too-many", ds.exactly(dra.DRIVER, count=3))
    ds.create_template(cp, ns, "one-gpu", ds.exactly(dra.DRIVER))
    for group, template in (("unknown", "no-class"), ("short", "too-many"), ("good", "one-gpu")):
        rest.call(cp.custom.create_namespaced_custom_object, native_support.GROUP,
                  native_support.VERSION, ns, "podgroups", {
                      "apiVersion": f"{native_support.GROUP}/{native_support.VERSION}",
                      "kind": "PodGroup",
                      "metadata": {"name": group, "labels": {QUEUE_LABEL: tenant.queue}},
                      "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})
        for i in range(2):
            spec = ds.claiming_pod_spec({POOL_LABEL: tenant.pool}, tenant.scheduler_name,
                                        template=template)
            spec["schedulingGroup"] = {"podGroupName": group}
            rest.call(cp.core.create_namespaced_pod, ns, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{group}-{i}", "labels": {QUEUE_LABEL: tenant.queue}},
                "spec": spec})
    wait_for(lambda: tenant.all_bound(["good-0", "good-1"]), TIMEOUT_S,
             what="the good gang bound beside the bad ones")
    for group, says in (("unknown", "no-such-class.example.com"),
                        ("short", "need devices for their claims")):
        pods = [f"{group}-{i}" for i in range(2)]

        def told(pods: list[str] = pods, says: str = says) -> list[str]:
            said = [unschedulable_message(tenant.pods()[p]) for p in pods]
            return said if all(m.startswith("Devices: ") and says in m for m in said) else []

        def group_told(group: str = group, says: str = says) -> str:
            message = _group_reason(cp, ns, group)
            return message if says in message else ""

        said = wait_for(told, TIMEOUT_S, what=f"the {group} gang's pods told why")
        group_said = wait_for(group_told, TIMEOUT_S, what=f"the {group} PodGroup told why")
        print(f"\n{group}: pods say {said[0]!r}\n  PodGroup says {group_said!r}")
        assert tenant.bound(pods) == []
    assert not live_scheduler.errors
