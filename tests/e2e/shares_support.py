"""What the GPU-share e2e tests (``test_dra_shares``, ``test_dra_mig``, ``test_plugin_shares``)
share: a tenant's Indexed Jobs of 4 pods on a node of shareable GPUs, and the kube-scheduler
pods the DRA ones use to check that the two schedulers agree.

Each of those tests plays the same story with another way of asking for part of a GPU: a first
Job binds whole on the node's two GPUs, the queue is charged two GPUs for it, a second Job
waits whole with a reason naming what does not fit (and stays so over further cycles), and
binds whole once the first is deleted. The story's steps are here once; what differs (the pod
spec, the reason, what is checked on the bound pods) stays in the tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from scheduler.tools.devcluster import rest
from tests.e2e import dra_support as ds
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import QUEUE_LABEL, InProcessScheduler, Tenant, unschedulable_message

TIMEOUT_S = 60.0
PODS = 4  # per Job: two on each of the node's two GPUs


@dataclass(frozen=True)
class ShareJobs:
    """The tenant's Jobs of ``PODS`` pods, scheduled by *live* (the test's live scheduler)."""

    cp: ControlPlane
    tenant: Tenant
    live: InProcessScheduler

    def submit(self, name: str, pod_spec: dict[str, Any]) -> None:
        """Create Job *name* of ``PODS`` pods of *pod_spec* in the tenant's queue."""
        job = ds.indexed_job(name, PODS, pod_spec, {QUEUE_LABEL: self.tenant.queue})
        rest.call(client.BatchV1Api(self.cp.api).create_namespaced_job, self.tenant.namespace,
                  job)

    def delete(self, name: str) -> None:
        rest.call(client.BatchV1Api(self.cp.api).delete_namespaced_job, name,
                  self.tenant.namespace, propagation_policy="Background")

    def bound_whole(self, name: str) -> dict[str, dict[str, Any]]:
        """Job *name*'s pods by name once all ``PODS`` are bound ({} before)."""
        pods = self.tenant.job_pods(name)
        return pods if len(pods) == PODS and self.tenant.all_bound(list(pods)) else {}

    def wait_bound_whole(self, name: str, what: str) -> dict[str, dict[str, Any]]:
        return wait_for(lambda: self.bound_whole(name), TIMEOUT_S, what=what)

    def wait_charged_two_gpus(self) -> None:
        """The queue's usage in the tenant's pool reaches two GPUs: the four shares on the
        node are charged the GPUs' worth they hold, not a whole GPU each (4, at bind time)."""
        def charged() -> int | None:
            view = self.live.live.view()
            row = next((q for q in view.queues if q.name == self.tenant.queue), None) \
                if view else None
            pool = next((p for p in row.pools if p.pool == self.tenant.pool), None) \
                if row else None
            return pool.allocated if pool is not None and pool.allocated == 2 else None

        assert wait_for(charged, TIMEOUT_S, what="the queue charged two GPUs for four halves") \
            == 2

    def wait_told(self, name: str, fits_not: Callable[[str], bool],
                  what: str) -> list[str]:
        """The unschedulable messages of Job *name*'s ``PODS`` pods, once every one satisfies
        *fits_not* (names what does not fit); none of the pods is bound."""
        def told() -> list[str]:
            pods = self.tenant.job_pods(name)
            said = [unschedulable_message(p) for p in pods.values()]
            return said if len(pods) == PODS and all(fits_not(m) for m in said) else []

        said = wait_for(told, TIMEOUT_S, what=what)
        assert self.tenant.bound(list(self.tenant.job_pods(name))) == []
        return said

    def stays_pending(self, name: str) -> None:
        """Job *name* is still wholly unbound after two more cycles."""
        self.live.run_cycles(2)
        assert self.tenant.bound(list(self.tenant.job_pods(name))) == []


@dataclass(frozen=True)
class KubeSchedulerClaims:
    """Pods of the real kube-scheduler claiming devices beside the tenant's Jobs, and the
    claims the templates made for them (``ds.claiming_pod_spec``)."""

    cp: ControlPlane
    tenant: Tenant
    node_selector: dict[str, str]

    def create_pod(self, name: str, template: str) -> None:
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": ds.claiming_pod_spec(self.node_selector, "default-scheduler",
                                             template=template)}
        rest.call(client.CoreV1Api(self.cp.api).create_namespaced_pod, self.tenant.namespace,
                  body)

    def delete_pod(self, name: str) -> None:
        rest.code_of(client.CoreV1Api(self.cp.api).delete_namespaced_pod, name,
                     self.tenant.namespace, grace_period_seconds=0)

    def claim_of(self, pod: str) -> dict[str, Any]:
        """The claim made for *pod* ({} when there is none)."""
        return next((c for c in ds.claims(self.cp, self.tenant.namespace)
                     if c["metadata"]["ownerReferences"][0]["name"] == pod), {})

    def claims_by_pod(self) -> dict[str, dict[str, Any]]:
        return {c["metadata"]["ownerReferences"][0]["name"]: c
                for c in ds.claims(self.cp, self.tenant.namespace)}

    def wait_allocated(self, pod: str, what: str) -> dict[str, Any]:
        """*pod*'s claim once kube-scheduler has allocated it."""
        return wait_for(lambda: (lambda c: c if c and ds.results(c) else {})(self.claim_of(pod)),
                        TIMEOUT_S, what=what)

    def delete_and_wait_gone(self, pod: str) -> None:
        self.delete_pod(pod)
        wait_for(lambda: not self.claim_of(pod), TIMEOUT_S, what=f"{pod}'s claim deleted")

    def wait_refused(self, pod: str, what: str) -> None:
        """kube-scheduler reports it cannot allocate *pod*'s claims; the claim stays
        unallocated."""
        def refused() -> bool:
            events = rest.call(client.EventsV1Api(self.cp.api).list_namespaced_event,
                               self.tenant.namespace)["items"]
            return any(e.get("reason") == "FailedScheduling"
                       and (e.get("regarding") or {}).get("name") == pod
                       and "cannot allocate all claims" in (e.get("note") or "")
                       for e in events)

        wait_for(refused, TIMEOUT_S, what=what)
        assert not ds.results(self.claim_of(pod))
