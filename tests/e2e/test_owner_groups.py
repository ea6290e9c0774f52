"""A training operator's pods (PyTorchJob) with no PodGroup form the gang their own object asks
for: 1 master + 3 workers wait whole behind a running gang and start whole when room appears;
a PyTorchJob whose spec does not read keeps its pods waiting, told which field, until an
explicit size (the min-member annotation) is given.

The operator itself is not run here: a stand-in ``pytorchjobs.kubeflow.org`` CRD holds real
PyTorchJob objects (the garbage collector would otherwise remove pods of an unknown owner) and
the test creates the pods as the training-operator v1 would (its labels, a controller
ownerReference). The scheduler is started once the CRD is served, so its informer lists it at
once instead of after its absent-CRD retry.
"""

from __future__ import annotations

from collections.abc import Callable
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


def create_pytorchjob(tenant: Tenant, name: str, master: Any, workers: Any,
                      gpus: int) -> list[str]:
    """A PyTorchJob and the pods its operator would make for it; their names."""
    replica = {"restartPolicy": "OnFailure",
               "template": {"spec": tenant.pod_spec(gpus)}}
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PyTorchJob",
            "metadata": {"name": name},
            "spec": {"runPolicy": {},
                     "pytorchReplicaSpecs": {"Master": {**replica, "replicas": master},
                                             "Worker": {**replica, "replicas": workers}}}}
    job = rest.call(tenant.cp.custom.create_namespaced_custom_object, GROUP, VERSION,
                    tenant.namespace, PLURAL, body)
    owner = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PyTorchJob", "name": name,
             "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    names = []
    for rtype, count in (("master", 1), ("worker", 3)):
        for index in range(count):
            pod = f"{name}-{rtype}-{index}"
            tenant.create_pod(pod, gpus=gpus, owner=owner, labels={
                "training.kubeflow.org/job-name": name,
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/replica-type": rtype,
                "training.kubeflow.org/replica-index": str(index)})
            names.append(pod)
    return names


def test_a_pytorchjob_without_a_podgroup_waits_whole_then_starts_whole(
        tenant: Tenant, start_scheduler: Callable[..., InProcessScheduler]) -> None:
    install_pytorchjob_crd(tenant.cp)
    scheduler = start_scheduler()
    tenant.create_nodes(2, gpus=8)
    blocker = tenant.create_gang("blocker", size=2, gpus=8)
    wait_for(lambda: tenant.all_bound(blocker), 30, what="the blocking gang bound")
    names = create_pytorchjob(tenant, "ptj", 1, 3, gpus=4)  # 16 GPUs: the whole pool
    wait_for(lambda: all(unschedulable_message(p) for n, p in tenant.pods().items()
                         if n in names), 30, what="the PyTorchJob's pods told why they wait")
    scheduler.run_cycles()  # several chances: none placed alone
    assert tenant.bound(names) == []
    for pod in blocker:
        tenant.delete_pod(pod)
    wait_for(lambda: tenant.all_bound(names), 30, what="the PyTorchJob's gang of 4 bound")
    assert len(set(tenant.nodes_of(names).values())) == 2


def test_an_unreadable_pytorchjob_waits_naming_the_field_until_sized_explicitly(
        tenant: Tenant, start_scheduler: Callable[..., InProcessScheduler]) -> None:
    install_pytorchjob_crd(tenant.cp)
    start_scheduler()
    tenant.create_nodes(1, gpus=8)
    names = create_pytorchjob(tenant, "bad", 1, "three", gpus=1)
    field = "spec.pytorchReplicaSpecs.Worker.replicas"
    wait_for(lambda: all(field in unschedulable_message(p) for n, p in tenant.pods().items()
                         if n in names), 30, what="the pods told which field does not read")
    assert tenant.bound(names) == []
    # An explicit size keeps precedence over the object: placed together.
    for name in names:
        rest.call(tenant.cp.core.patch_namespaced_pod, name, tenant.namespace,
                  {"metadata": {"annotations": {"gangscheduler.io/min-member": "4"}}},
                  _content_type=rest.MERGE_PATCH)
    wait_for(lambda: tenant.all_bound(names), 30, what="the explicitly sized gang bound")
