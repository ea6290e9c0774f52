"""PyTorchJobs run by the real Kubeflow training-operator v1 (v1.8.1) in the session cluster.

The operator is started on demand, once per session (``DevCluster.start_training_operator_
v1``): its controllers watch every pod and Service, which the other tests need not pay for.
It creates no PodGroup (its gang-scheduler integration is off in the dev cluster), so its pods
carry only what the job's templates give them (schedulerName, queue label, priority) and
gang-scheduler sizes the gang from the PyTorchJob itself.

The operator names its pods ``<job>-master-0`` and ``<job>-worker-<i>`` and gives a pod it
recreates (after an eviction) the same name: the generations of a job's pods are told apart
by their uids.
"""

from __future__ import annotations

from typing import Any

from scheduler.tools.devcluster import build, rest
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import QUEUE_LABEL, Tenant

PYTORCHJOBS = ("kubeflow.org", "v1", "pytorchjobs")
#: The label the operator puts on every pod of a job, with the job's name.
JOB_NAME_LABEL = "training.kubeflow.org/job-name"


def ensure_training_operator(cp: ControlPlane) -> None:
    """Start the operator in the session cluster once (built first if `dev-cluster build` has
    not), and wait until its CRD is served: a scheduler started after that lists PyTorchJobs
    at once instead of after its absent-CRD retry."""
    state = cp.cluster.state
    assert state is not None
    if build.TRAINING_OPERATOR.name not in state.versions:
        cp.cluster.start_training_operator_v1(log=lambda line: print(f"[dev-cluster] {line}"))

    def served() -> bool:
        rest.call(cp.custom.list_cluster_custom_object, *PYTORCHJOBS)
        return True

    wait_for(served, 60, what="the PyTorchJob CRD served")


def create_pytorchjob(tenant: Tenant, name: str, workers: int, gpus: int,
                      priority_class: str | None = None, restart_policy: str = "OnFailure",
                      **spec: Any) -> dict[str, Any]:
    """A PyTorchJob of one Master and *workers* Workers, each pod *gpus* GPUs on the tenant's
    pool, scheduler and queue; *spec* adds PyTorchJob spec fields (``runPolicy``, ...)."""
    pod_spec = tenant.pod_spec(gpus)
    # The operator sets the pods' restartPolicy from the replica's (ExitCode: Never); one in
    # the template it overrides, with a warning event.
    del pod_spec["restartPolicy"]
    pod_spec["containers"][0]["name"] = "pytorch"  # the container the operator configures
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    template = {"metadata": {"labels": {QUEUE_LABEL: tenant.queue}}, "spec": pod_spec}
    replica = {"restartPolicy": restart_policy, "template": template}
    body = {"apiVersion": "/".join(PYTORCHJOBS[:2]), "kind": "PyTorchJob",
            "metadata": {"name": name},
            "spec": {**spec, "pytorchReplicaSpecs": {"Master": {**replica, "replicas": 1},
                                                     "Worker": {**replica,
                                                                "replicas": workers}}}}
    return rest.call(tenant.cp.custom.create_namespaced_custom_object, *PYTORCHJOBS[:2],
                     tenant.namespace, PYTORCHJOBS[2], body)


def pytorchjob(tenant: Tenant, name: str) -> dict[str, Any]:
    return rest.call(tenant.cp.custom.get_namespaced_custom_object, *PYTORCHJOBS[:2],
                     tenant.namespace, PYTORCHJOBS[2], name)


def job_conditions(tenant: Tenant, name: str) -> dict[str, str]:
    """The PyTorchJob's status conditions: type -> status."""
    return {c["type"]: c["status"]
            for c in (pytorchjob(tenant, name).get("status") or {}).get("conditions") or ()}


def job_pods(tenant: Tenant, name: str) -> dict[str, dict[str, Any]]:
    """The job's pods not being deleted, by name."""
    items = rest.call(tenant.cp.core.list_namespaced_pod, tenant.namespace,
                      label_selector=f"{JOB_NAME_LABEL}={name}")["items"]
    return {p["metadata"]["name"]: p for p in items
            if not p["metadata"].get("deletionTimestamp")}
