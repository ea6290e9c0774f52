"""Installing the apiserver's leader fence (``scheduler.kube.lead.fence_policy``) for a Lease on a
test cluster, and waiting until the apiserver enforces it.

One policy serves every Lease (its match condition picks the binding whose Lease a write is
stamped for), so tests on the shared cluster each bind it to a Lease of their own. The Lease
is created here, free (no holder), because the policy lets everything through while its
parameter does not exist, and so could not be seen to be active: a candidate takes a free
Lease at once, like a missing one.
"""

from __future__ import annotations

from kubernetes import client

from scheduler.kube.client import KubeClient
from scheduler.kube.lead import fence_policy
from scheduler.kube.lead.fence import FenceToken
from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import ControlPlane, wait_for

POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"


def create_free_lease(cp: ControlPlane, namespace: str, name: str) -> None:
    coordination = client.CoordinationV1Api(cp.api)
    rest.call(coordination.create_namespaced_lease, namespace, {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"holderIdentity": "", "leaseDurationSeconds": 1, "leaseTransitions": 0}})


def install(cp: ControlPlane, api: KubeClient, lease_namespace: str, lease_name: str) -> None:
    """The policy (once per cluster), a binding to this Lease, the Lease itself (free), and
    a wait until the apiserver refuses a write stamped with a term the Lease never had."""
    create_free_lease(cp, lease_namespace, lease_name)
    resp = api.request("POST", POLICIES, body=fence_policy.policy())
    assert resp.ok or resp.status == 409, resp.message()
    name = f"{fence_policy.NAME}-{lease_namespace}-{lease_name}"
    resp = api.request("POST", BINDINGS,
                       body=fence_policy.binding(lease_namespace, lease_name, name=name))
    assert resp.ok, resp.message()
    never = FenceToken("nobody", -1, f"{lease_namespace}/{lease_name}")
    wait_for(lambda: not fence_policy.seen(api, never, lease_namespace), 60, 0.2,
             what=f"the leader fence enforced for Lease {lease_namespace}/{lease_name}")
