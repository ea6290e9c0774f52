"""A pod made by a training operator (PyTorchJob, MPIJob, TFJob, ...) that names no group is
never a gang of one: it waits, told (condition and warning event) which PodGroup is missing,
until the gang's size is known.

The operator itself is not installed: a stand-in ``pytorchjobs.kubeflow.org`` CRD gives the
pods a real owner (the garbage collector would otherwise remove pods of an unknown owner),
which is all gang-scheduler reads of it.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import InProcessScheduler, Tenant, unschedulable_message

pytestmark = pytest.mark.e2e

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"


def install_pytorchjob_crd(cp: ControlPlane) -> None:
    body = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{PLURAL}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": PLURAL, "singular": "pytorchjob",
                               "kind": "PyTorchJob"},
                     "versions": [{"name": VERSION, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}
    extensions = client.ApiextensionsV1Api(cp.api)
    try:
        rest.call(extensions.create_custom_resource_definition, body)
    except client.ApiException as exc:
        if exc.status != 409:
            raise

    def served() -> bool:
        try:
            rest.call(cp.custom.list_cluster_custom_object, GROUP, VERSION, PLURAL)
            return True
        except client.ApiException:
            return False

    wait_for(served, 60, what="the PyTorchJob CRD served")


def create_pytorchjob(tenant: Tenant, name: str) -> dict[str, Any]:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PyTorchJob",
            "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1},
                                             "Worker": {"replicas": 1}}}}
    return rest.call(tenant.cp.custom.create_namespaced_custom_object, GROUP, VERSION,
                     tenant.namespace, PLURAL, body)


def test_an_operators_pods_without_a_group_wait_and_say_which_group_is_missing(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    install_pytorchjob_crd(tenant.cp)
    tenant.create_nodes(1, gpus=8)
    job = create_pytorchjob(tenant, "ptj")
    owner = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PyTorchJob", "name": "ptj",
             "uid": job["metadata"]["uid"], "controller": True}
    names = ["ptj-master-0", "ptj-worker-0"]
    for name in names:
        tenant.create_pod(name, owner=owner)
    missing = f"the PodGroup {tenant.namespace}/ptj is missing"
    messages = wait_for(lambda: {n: unschedulable_message(tenant.pods()[n]) for n in names}
                        if all(missing in unschedulable_message(tenant.pods()[n])
                               for n in names) else {}, 30,
                        what="both pods told which PodGroup is missing")
    assert all("PyTorchJob" in m for m in messages.values()), messages
    events = wait_for(lambda: [e for e in tenant.events("FailedScheduling")
                               if missing in (e.get("note") or "")], 30,
                      what="a FailedScheduling warning naming the missing group")
    assert {e["type"] for e in events} == {"Warning"}
    live_scheduler.run_cycles()  # several chances: neither pod placed alone
    assert tenant.bound(names) == []
    # The size given (what the operator's gang support would have written): placed together.
    for name in names:
        rest.call(tenant.cp.core.patch_namespaced_pod, name, tenant.namespace,
                  {"metadata": {"annotations": {"gangscheduler.io/min-member": "2"}}},
                  _content_type=rest.MERGE_PATCH)
    wait_for(lambda: tenant.all_bound(names), 30, what="the operator's gang of 2 bound")
