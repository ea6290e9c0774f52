"""RayClusters and RayJobs run by the real KubeRay operator (v1.5.0) on a busy pool: their pods
form the gang the RayCluster asks for (``scheduler/kube/read/operator_convert.py``: the head
plus each worker group's replicas), with no PodGroup.

1. A RayCluster of 1 head + 3 workers (4 GPUs each: the whole pool of 2 x 8 GPUs) is created
   behind a running gang of one 8-GPU pod at its own priority: KubeRay creates all 4 pods at
   once, and none binds, each told why, while that gang runs, though half of them would fit
   beside it; once it goes, all 4 bind together (no pod of the cluster before the blocker
   went) and KubeRay calls the cluster ``ready``.
2. A gang of higher priority (8 + 4 GPUs) preempts it: every pod of the cluster, and the
   RayCluster, gets a ``Preempted`` event, and all 4 pods go; KubeRay recreates them; the new
   pods wait whole, none bound (though one would fit beside the preemptor), while the
   preemptor runs, and start whole again once it ends (KubeRay's status follows: no worker
   ready, then 3).

A RayJob's cluster is sized the same way: its pods start whole, and only then (KubeRay waits
for the cluster to be ready) does KubeRay create the submitter Job, a gang of its own.

KubeRay runs with no webhook and no batch-scheduler integration (``operators.KUBERAY``): kwok
marks the pods Running and Ready, which is all KubeRay waits for (it probes nothing itself;
the RayJob's dashboard is never reached, so the RayJob stays ``Running``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scheduler.tools.devcluster import build, rest
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.contention import RUN_TIMEOUT_S, priority_class
from tests.e2e.live import (
    GROUP_LABEL,
    QUEUE_LABEL,
    QUEUES,
    InProcessScheduler,
    PodWatch,
    Tenant,
    unschedulable_message,
)

pytestmark = pytest.mark.e2e

RAY = ("ray.io", "v1")
CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
#: The RayCluster of the first test: a head and 3 workers of 4 GPUs each.
GANG_GPUS = 16


@pytest.fixture
def kuberay(control_plane: ControlPlane) -> None:
    """KubeRay in the session cluster, started once (built first if `dev-cluster build` has
    not). Before any scheduler of the test: its informer then lists RayClusters at once."""
    state = control_plane.cluster.state
    assert state is not None
    if build.KUBERAY.name not in state.versions:
        control_plane.cluster.start_kuberay(log=lambda line: print(f"[dev-cluster] {line}"))


def gang(tenant: Tenant, name: str, gpus: list[int], priority: str) -> list[str]:
    """A PodGroup gang of one pod per entry of *gpus* (that many GPUs each) at *priority*."""
    tenant.create_group(name, len(gpus))
    names = [f"{name}-{i}" for i in range(len(gpus))]
    for pod, count in zip(names, gpus, strict=True):
        rest.call(tenant.cp.core.create_namespaced_pod, tenant.namespace, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "labels": {QUEUE_LABEL: tenant.queue, GROUP_LABEL: name}},
            "spec": {**tenant.pod_spec(count), "priorityClassName": priority}})
    return names


def ray_pod_template(tenant: Tenant, container: str, gpus: int,
                     priority: str | None) -> dict[str, Any]:
    """A head or worker template: the tenant's scheduler, queue and pool, *gpus* GPUs."""
    spec = tenant.pod_spec(gpus)
    spec.pop("restartPolicy")  # KubeRay's own default
    spec["containers"][0].update(name=container, image="registry.invalid/ray:2.46.0")
    if priority:
        spec["priorityClassName"] = priority
    return {"metadata": {"labels": {QUEUE_LABEL: tenant.queue}}, "spec": spec}


def raycluster_spec(tenant: Tenant, workers: int, gpus: int,
                    priority: str | None = None) -> dict[str, Any]:
    return {"headGroupSpec": {"rayStartParams": {},
                              "template": ray_pod_template(tenant, "ray-head", gpus, priority)},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": workers, "minReplicas": 0,
                                  "maxReplicas": workers, "rayStartParams": {},
                                  "template": ray_pod_template(tenant, "ray-worker", gpus,
                                                               priority)}]}


def create(tenant: Tenant, plural: str, kind: str, name: str,
           spec: dict[str, Any]) -> dict[str, Any]:
    return rest.call(tenant.cp.custom.create_namespaced_custom_object, *RAY, tenant.namespace,
                     plural, {"apiVersion": "/".join(RAY), "kind": kind,
                              "metadata": {"name": name}, "spec": spec})


def read(tenant: Tenant, plural: str, name: str) -> dict[str, Any]:
    return rest.call(tenant.cp.custom.get_namespaced_custom_object, *RAY, tenant.namespace,
                     plural, name)


def cluster_pods(tenant: Tenant, cluster: str) -> list[str]:
    """The RayCluster's pods not being deleted, by name."""
    return sorted(n for n, p in tenant.pods().items()
                  if (p["metadata"].get("labels") or {}).get(CLUSTER_LABEL) == cluster
                  and not p["metadata"].get("deletionTimestamp"))


def waiting_whole(tenant: Tenant, runner: InProcessScheduler, pods: Callable[[], list[str]],
                  size: int) -> list[str]:
    """Wait until *size* pods exist, each waiting for the gang's GPUs (the RayCluster's 4 x 4:
    sized from it, not from the pods seen), then check none binds over 4 scheduler passes;
    returns them."""
    def all_made() -> list[str]:
        names = pods()
        return names if len(names) == size else []

    names = wait_for(all_made, RUN_TIMEOUT_S, what=f"{size} pods of the RayCluster")
    wait_for(lambda: all(f"needs {GANG_GPUS} nvidia.com/gpu" in unschedulable_message(
        tenant.pods().get(n, {})) for n in names), 60,
        what=f"every pod of the RayCluster told it waits for {GANG_GPUS} GPUs together")
    for _ in runner.during_cycles(4):
        assert tenant.bound(pods()) == [], "a pod of the RayCluster bound beside the gang"
    assert pods() == names, "KubeRay replaced waiting pods"
    return names


def running_whole(tenant: Tenant, pods: Callable[[], list[str]], size: int) -> list[str]:
    names = pods()
    if len(names) == size and tenant.all_bound(names) and set(
            tenant.phases(names).values()) == {"Running"}:
        return names
    return []


def ray_status(tenant: Tenant, name: str) -> tuple[str, int, str]:
    """KubeRay's view of RayCluster *name*: its state, ready workers, and whether its head is
    ready (the ``HeadPodReady`` condition's status)."""
    status = read(tenant, "rayclusters", name).get("status") or {}
    head = next((c.get("status") for c in status.get("conditions") or ()
                 if c.get("type") == "HeadPodReady"), "")
    return str(status.get("state") or ""), int(status.get("readyWorkerReplicas") or 0), head


def preempted(tenant: Tenant, kind: str) -> set[str]:
    """The names of the objects of *kind* with a ``Preempted`` event."""
    return {(e.get("regarding") or {}).get("name", "") for e in tenant.events("Preempted")
            if (e.get("regarding") or {}).get("kind") == kind}


def test_a_raycluster_waits_whole_starts_whole_and_is_preempted_and_recreated_whole(
        tenant: Tenant, kuberay: None,
        start_scheduler: Callable[..., InProcessScheduler]) -> None:
    runner = start_scheduler()
    tenant.create_nodes(2, gpus=8)
    rest.call(tenant.cp.custom.patch_cluster_custom_object, *QUEUES, tenant.queue,
              {"spec": {"preemption": {"withinQueue": "LowerPriority"}}})
    low, high = priority_class(tenant, "low", 100), priority_class(tenant, "high", 1000)
    name = "rc"

    def pods() -> list[str]:
        return cluster_pods(tenant, name)

    with PodWatch(tenant.cp, tenant.namespace) as watch:
        # 1. Queued whole behind a running gang at its own priority.
        blocker = gang(tenant, "blocker", [8], low)
        wait_for(lambda: tenant.all_bound(blocker), 60, what="the blocker gang bound")
        create(tenant, "rayclusters", "RayCluster", name,
               raycluster_spec(tenant, workers=3, gpus=4, priority=low))
        first = waiting_whole(tenant, runner, pods, 4)
        roles = {tenant.pods()[n]["metadata"]["labels"][NODE_TYPE_LABEL] for n in first}
        assert roles == {"head", "worker"}, roles
        assert tenant.all_bound(blocker), "the blocker went while the RayCluster waited"

        for pod in blocker:
            tenant.delete_pod(pod)
        wait_for(lambda: running_whole(tenant, pods, 4), RUN_TIMEOUT_S,
                 what="the RayCluster running whole once the blocker went")
        watch.seen_deleted(blocker)
        watch.seen_bound(first)
        assert min(watch.first_bound[n] for n in first) > max(
            watch.deleted[n] for n in blocker), "a RayCluster pod bound before the room was free"
        assert len(set(tenant.nodes_of(first).values())) == 2
        wait_for(lambda: ray_status(tenant, name) == ("ready", 3, "True"), 120,
                 what="KubeRay calling the RayCluster ready, its head and 3 workers too")

        # 2. Preempted whole by a higher-priority gang; KubeRay recreates the pods, which
        # wait whole while it runs and start whole once it ends.
        preemptor = gang(tenant, "preemptor", [8, 4], high)
        wait_for(lambda: set(first) <= preempted(tenant, "Pod"), RUN_TIMEOUT_S,
                 what="a Preempted event on every pod of the RayCluster")
        wait_for(lambda: name in preempted(tenant, "RayCluster"), 60,
                 what="a Preempted event on the RayCluster itself")
        wait_for(lambda: tenant.all_bound(preemptor), RUN_TIMEOUT_S,
                 what="the preemptor bound once the RayCluster was evicted")
        watch.seen_deleted(first)
        wait_for(lambda: ray_status(tenant, name)[1:] == (0, "False"), 120,
                 what="KubeRay seeing the head and the workers gone")
        again = waiting_whole(tenant, runner,
                              lambda: [n for n in pods() if n not in first], 4)
        assert tenant.all_bound(preemptor)
        for pod in preemptor:
            tenant.delete_pod(pod)
        wait_for(lambda: running_whole(tenant, lambda: [n for n in pods() if n not in first], 4),
                 RUN_TIMEOUT_S, what="the recreated RayCluster running whole")
        watch.seen_deleted(preemptor)
        watch.seen_bound(again)
        assert min(watch.first_bound[n] for n in again) > max(
            watch.deleted[n] for n in preemptor), "a recreated pod bound beside the preemptor"
        assert watch.rebinds() == {}
        wait_for(lambda: ray_status(tenant, name)[1:] == (3, "True"), 120,
                 what="KubeRay seeing the recreated head and 3 workers ready")

    # KubeRay's side of it, from its own events on the RayCluster.
    created = [e for e in tenant.events()
               if (e.get("regarding") or {}).get("kind") == "RayCluster"
               and e.get("reason") in ("CreatedHeadPod", "CreatedWorkerPod")]
    assert len(created) >= 2, created  # events of one reason may be aggregated


def test_a_rayjobs_cluster_starts_whole_before_its_submitter(
        tenant: Tenant, kuberay: None,
        start_scheduler: Callable[..., InProcessScheduler]) -> None:
    start_scheduler()
    tenant.create_nodes(1, gpus=8)
    submitter = {"metadata": {"labels": {QUEUE_LABEL: tenant.queue}},
                 "spec": {**tenant.pod_spec(0), "restartPolicy": "Never"}}
    submitter["spec"]["containers"][0].update(name="submitter",
                                              image="registry.invalid/ray:2.46.0")
    create(tenant, "rayjobs", "RayJob", "rj", {
        "entrypoint": "python train.py", "submissionMode": "K8sJobMode",
        "rayClusterSpec": raycluster_spec(tenant, workers=1, gpus=4),
        "submitterPodTemplate": submitter})
    cluster = wait_for(lambda: str((read(tenant, "rayjobs", "rj").get("status") or {}).get(
        "rayClusterName") or ""), 60, what="the RayJob's RayCluster named")

    def pods() -> list[str]:
        return cluster_pods(tenant, cluster)

    with PodWatch(tenant.cp, tenant.namespace) as watch:
        names = wait_for(lambda: running_whole(tenant, pods, 2), RUN_TIMEOUT_S,
                         what="the RayJob's cluster (head + worker) running whole")
        job_pods = wait_for(lambda: list(tenant.job_pods("rj")), RUN_TIMEOUT_S,
                            what="the submitter Job's pod (once the cluster is ready)")
        wait_for(lambda: tenant.all_bound(job_pods), RUN_TIMEOUT_S,
                 what="the submitter pod bound (a gang of its own)")
        watch.seen_bound([*names, *job_pods])
        assert max(watch.first_bound[n] for n in names) < min(
            watch.first_bound[n] for n in job_pods), "the submitter ran before its cluster"
    status = read(tenant, "rayjobs", "rj").get("status") or {}
    assert status.get("jobDeploymentStatus") == "Running", status
    # Deleted, or KubeRay would ask the (never reached) dashboard for the job's state for
    # the rest of the session; its finalizer goes even though stopping the job fails.
    rest.call(tenant.cp.custom.delete_namespaced_custom_object, *RAY, tenant.namespace,
              "rayjobs", "rj")
    wait_for(lambda: "rj" not in {j["metadata"]["name"] for j in rest.call(
        tenant.cp.custom.list_namespaced_custom_object, *RAY, tenant.namespace,
        "rayjobs")["items"]}, 60, what="the RayJob deleted (KubeRay's finalizer removed)")
