"""Helpers for e2e tests of Kubernetes' own gang API (``scheduling.k8s.io`` Workload, PodGroup).

Why the API version is looked up: the dev cluster runs the pinned Kubernetes release, 1.36
(``v1alpha2``) or 1.37 (``v1beta1``), and the same tests must pass on both. The objects are
written in the served version's own spelling (``template_ref``, ``disruption``), so a test
reads like the YAML a user would write for that release.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from scheduler.tools.devcluster import build, gates, rest
from tests.e2e.cluster_api import wait_for
from tests.e2e.live import QUEUE_LABEL
from tests.e2e.ops_support import LINGER, LINGER_GRACE_S, Ops

GROUP = "scheduling.k8s.io"
VERSION = gates.GANG_API_VERSION[gates.minor(build.KUBE_APISERVER.version)]
SCHEDULED = {"v1alpha2": "PodGroupScheduled", "v1beta1": "PodGroupInitiallyScheduled"}[VERSION]


def template_ref(workload: str, template: str) -> dict[str, Any]:
    """A PodGroup's reference to the Workload template it was made from."""
    if VERSION == "v1alpha2":
        return {"podGroupTemplateRef": {"workload": {"workloadName": workload,
                                                     "podGroupTemplateName": template}}}
    return {"workloadRef": {"workloadName": workload, "templateName": template}}


def disruption(whole: bool) -> Any:
    """``disruptionMode``: the whole group (PodGroup / all) or single pods (Pod / single)."""
    if VERSION == "v1alpha2":
        return "PodGroup" if whole else "Pod"
    return {"all": {}} if whole else {"single": {}}


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The condition of type *kind* in ``status.conditions`` ({} when absent)."""
    return next((dict(c) for c in (obj.get("status") or {}).get("conditions") or ()
                 if c.get("type") == kind), {})


@dataclass
class Native:
    """One test's gangs in the upstream API, on top of its ``Ops`` tenant."""

    ops: Ops

    @property
    def ns(self) -> str:
        return self.ops.ns

    def _create(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": f"{GROUP}/{VERSION}", **body}
        return rest.call(self.ops.cp.custom.create_namespaced_custom_object, GROUP, VERSION,
                         self.ns, plural, body)

    def get(self, plural: str, name: str) -> dict[str, Any]:
        return rest.call(self.ops.cp.custom.get_namespaced_custom_object, GROUP, VERSION,
                         self.ns, plural, name)

    def patch_podgroup(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return rest.call(self.ops.cp.custom.patch_namespaced_custom_object, GROUP, VERSION,
                         self.ns, "podgroups", name, patch)

    def objects(self, plural: str) -> list[dict[str, Any]]:
        items = rest.call(self.ops.cp.custom.list_namespaced_custom_object, GROUP, VERSION,
                          self.ns, plural)["items"]
        return list(items)

    def policy(self, min_count: int, priority_class: str | None = None,
               whole: bool = True) -> dict[str, Any]:
        """The fields a PodGroupTemplate and a PodGroup share."""
        out: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}},
                               "disruptionMode": disruption(whole)}
        if priority_class:
            out["priorityClassName"] = priority_class
        return out

    def manifests(self, name: str, size: int, gpus: int, scheduler_name: str,
                  queue: str | None = None, priority_class: str | None = None,
                  linger: bool = False) -> list[dict[str, Any]]:
        """A Workload, its PodGroup and *size* pods naming it, as a user writes them; only
        *scheduler_name* tells which scheduler runs it."""
        labels = {QUEUE_LABEL: queue} if queue else {}
        workload = {"kind": "Workload", "metadata": {"name": name, "labels": labels},
                    "spec": {"podGroupTemplates": [
                        {"name": "workers", **self.policy(size, priority_class)}]}}
        group = {"kind": "PodGroup", "metadata": {"name": name},
                 "spec": {**template_ref(name, "workers"), **self.policy(size, priority_class)}}
        pods = []
        for i in range(size):
            spec = self.ops.tenant.pod_spec(gpus, scheduler_name)
            spec["schedulingGroup"] = {"podGroupName": name}
            spec["terminationGracePeriodSeconds"] = LINGER_GRACE_S if linger else 30
            if priority_class:
                spec["priorityClassName"] = priority_class
            meta: dict[str, Any] = {"name": f"{name}-{i}", "labels": {"gang": name}}
            if linger:
                meta["finalizers"] = [LINGER]
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
        return [workload, group, *pods]

    def apply(self, objects: list[dict[str, Any]]) -> list[str]:
        """Create *objects* (Workloads, PodGroups, pods); the pods' names."""
        names = []
        for obj in objects:
            if obj["kind"] == "Workload":
                self._create("workloads", obj)
            elif obj["kind"] == "PodGroup":
                self._create("podgroups", obj)
            else:
                rest.call(self.ops.cp.core.create_namespaced_pod, self.ns, obj)
                names.append(obj["metadata"]["name"])
        return names

    def gang(self, name: str, size: int, gpus: int, queue: str | None = None,
             priority_class: str | None = None, linger: bool = False) -> list[str]:
        """A whole gang for this tenant's gang-scheduler; its pods' names."""
        return self.apply(self.manifests(name, size, gpus, self.ops.tenant.scheduler_name,
                                         queue, priority_class, linger))

    def indexed_job(self, name: str, parallelism: int, gpus: int,
                    scheduler_name: str | None = None) -> dict[str, Any]:
        """An Indexed Job (completions = parallelism): with ``WorkloadWithJob`` the Job
        controller itself creates its Workload and PodGroup and names it in the pods (1.37:
        with ``spec.scheduling`` asking for a gang of minCount = parallelism)."""
        template = {"metadata": {"labels": {QUEUE_LABEL: self.ops.tenant.queue}},
                    "spec": self.ops.tenant.pod_spec(gpus, scheduler_name)}
        spec: dict[str, Any] = {"parallelism": parallelism, "completions": parallelism,
                                "completionMode": "Indexed", "backoffLimit": 0,
                                "template": template}
        if VERSION != "v1alpha2":
            # 1.37: a Job is pod by pod (basic) unless spec.scheduling asks for a gang.
            spec["scheduling"] = {"schedulingPolicy": {"gang": {"minCount": parallelism}}}
        body = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "labels": {QUEUE_LABEL: self.ops.tenant.queue}},
                "spec": spec}
        return rest.call(client.BatchV1Api(self.ops.cp.api).create_namespaced_job, self.ns,
                         body)

    def group_of_job(self, job: str) -> dict[str, Any] | None:
        """The PodGroup the Job controller made for *job* (None: not yet)."""
        for group in self.objects("podgroups"):
            owners = group["metadata"].get("ownerReferences") or ()
            if any(o.get("kind") == "Job" and o.get("name") == job for o in owners):
                return group
        return None

    def scheduled(self, name: str) -> dict[str, Any]:
        """The PodGroup's scheduling condition ({} when absent)."""
        return condition(self.get("podgroups", name), SCHEDULED)

    def wait_scheduled(self, name: str, status: str, timeout_s: float = 30) -> dict[str, Any]:
        """Wait until PodGroup *name*'s scheduling condition has *status*; the condition."""
        def check() -> dict[str, Any]:
            found = self.scheduled(name)
            return found if found.get("status") == status else {}
        return wait_for(check, timeout_s, what=f"PodGroup {name} {SCHEDULED}={status}")

    def wait_group_of_job(self, job: str) -> dict[str, Any]:
        def check() -> dict[str, Any]:
            return self.group_of_job(job) or {}
        return wait_for(check, 30, what=f"the PodGroup of Job {job}")

    def wait_job_pods(self, job: str, count: int) -> dict[str, dict[str, Any]]:
        def check() -> dict[str, dict[str, Any]]:
            pods = self.ops.tenant.job_pods(job)
            return pods if len(pods) == count else {}
        return wait_for(check, 30, what=f"{count} pods of Job {job}")
