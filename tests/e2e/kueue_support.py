"""Kueue objects for the e2e tests of the Kueue mode: a tenant's ResourceFlavor, ClusterQueue
and LocalQueue, and Jobs submitted to Kueue the way its users do (suspended, with the
``kueue.x-k8s.io/queue-name`` label), read back through Kueue's Workloads.

Each tenant gets its own flavor (its node pool as ``nodeLabels``, which Kueue injects into the
pods it admits), its own ClusterQueue (only its namespace) and LocalQueue, so tests sharing the
session's Kueue do not share quota.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes import client

from scheduler.run.kueue_mode import QUEUE_NAME_LABEL
from scheduler.tools.devcluster import build, rest
from tests.e2e.cluster_api import ControlPlane
from tests.e2e.live import GPU, POOL_LABEL, QUEUE_LABEL, Tenant

KUEUE = ("kueue.x-k8s.io", "v1beta2")
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def ensure_kueue(cp: ControlPlane) -> None:
    """Start Kueue in the session cluster once (built first if `dev-cluster build` has not:
    also with ``GANG_SCHEDULER_E2E_OPERATORS=0``, which leaves out JobSet and Trainer)."""
    state = cp.cluster.state
    assert state is not None
    if build.KUEUE.name not in state.versions:
        cp.cluster.start_kueue(log=lambda line: print(f"[dev-cluster] {line}"))


@dataclass
class KueueTenant:
    """A tenant's Kueue objects: flavor ``rf-<pool>``, ClusterQueue ``cq-<pool>``, LocalQueue
    ``lq`` in its namespace."""

    tenant: Tenant

    @property
    def cp(self) -> ControlPlane:
        return self.tenant.cp

    @property
    def flavor(self) -> str:
        return f"rf-{self.tenant.pool}"

    @property
    def cluster_queue(self) -> str:
        return f"cq-{self.tenant.pool}"

    def create_queues(self, gpus: int, preemption: dict[str, str] | None = None) -> None:
        """Flavor, ClusterQueue with *gpus* GPUs of quota (and ample CPU and memory), and the
        LocalQueue ``lq``."""
        t = self.tenant
        self._create_cluster("resourceflavors", {
            "kind": "ResourceFlavor", "metadata": {"name": self.flavor},
            "spec": {"nodeLabels": {POOL_LABEL: t.pool}}})
        spec: dict[str, Any] = {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": t.namespace}},
            "resourceGroups": [{
                "coveredResources": ["cpu", "memory", GPU],
                "flavors": [{"name": self.flavor, "resources": [
                    {"name": "cpu", "nominalQuota": "1000"},
                    {"name": "memory", "nominalQuota": "10Ti"},
                    {"name": GPU, "nominalQuota": str(gpus)}]}]}]}
        if preemption:
            spec["preemption"] = preemption
        self._create_cluster("clusterqueues", {
            "kind": "ClusterQueue", "metadata": {"name": self.cluster_queue}, "spec": spec})
        rest.call(self.cp.custom.create_namespaced_custom_object, *KUEUE, t.namespace,
                  "localqueues", {"apiVersion": "/".join(KUEUE), "kind": "LocalQueue",
                                  "metadata": {"name": "lq"},
                                  "spec": {"clusterQueue": self.cluster_queue}})

    def create_priority_class(self, name: str, value: int) -> str:
        """A WorkloadPriorityClass unique to this tenant; returns its name."""
        full = f"{name}-{self.tenant.pool}"
        self._create_cluster("workloadpriorityclasses", {
            "kind": "WorkloadPriorityClass", "metadata": {"name": full}, "value": value})
        return full

    def _create_cluster(self, plural: str, body: dict[str, Any]) -> None:
        body = {"apiVersion": "/".join(KUEUE), **body}
        rest.call(self.cp.custom.create_cluster_custom_object, *KUEUE, plural, body)

    def create_job(self, name: str, size: int, priority_class: str | None = None,
                   scheduler_name: str | None = None) -> dict[str, Any]:
        """A Job of *size* one-GPU pods for LocalQueue ``lq``: suspended until Kueue admits
        it, with no node selector of its own (Kueue injects its flavor's); for the tenant's
        scheduler unless *scheduler_name* says another."""
        t = self.tenant
        pod = t.pod_spec(gpus=1, scheduler_name=scheduler_name)
        pod.pop("nodeSelector")
        labels = {QUEUE_NAME_LABEL: "lq"}
        if priority_class:
            labels[PRIORITY_LABEL] = priority_class
        body = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "labels": labels},
                "spec": {"parallelism": size, "completions": size, "suspend": True,
                         "backoffLimit": 100,
                         "template": {"metadata": {"labels": {QUEUE_LABEL: t.queue}},
                                      "spec": pod}}}
        return rest.call(client.BatchV1Api(self.cp.api).create_namespaced_job, t.namespace,
                         body)

    # Reading -----------------------------------------------------------------------------
    def job(self, name: str) -> dict[str, Any]:
        return rest.call(client.BatchV1Api(self.cp.api).read_namespaced_job, name,
                         self.tenant.namespace)

    def workload(self, job: str) -> dict[str, Any] | None:
        """The Workload Kueue made for *job* (None: none yet)."""
        items = rest.call(self.cp.custom.list_namespaced_custom_object, *KUEUE,
                          self.tenant.namespace, "workloads")["items"]
        for w in items:
            if any(o.get("kind") == "Job" and o.get("name") == job
                   for o in w["metadata"].get("ownerReferences") or ()):
                return dict(w)
        return None

    def condition(self, job: str, kind: str) -> dict[str, Any]:
        """Condition *kind* of *job*'s Workload ({} when it has none, or no Workload)."""
        w = self.workload(job) or {}
        for c in (w.get("status") or {}).get("conditions") or ():
            if c.get("type") == kind:
                return dict(c)
        return {}

    def admitted(self, job: str) -> bool:
        return self.condition(job, "Admitted").get("status") == "True"

    def live_pods(self, job: str) -> dict[str, dict[str, Any]]:
        """The Job's pods not being deleted."""
        return {n: p for n, p in self.tenant.job_pods(job).items()
                if not p["metadata"].get("deletionTimestamp")}

    def bound(self, job: str) -> int:
        return sum(1 for p in self.live_pods(job).values() if p["spec"].get("nodeName"))
