"""The dev cluster's training operators, JobSet and Kubeflow Trainer, run for real: their
webhooks (on loopback, trusted through the cluster CA) admit and refuse, and their controllers
turn JobSets into Jobs and TrainJobs into a JobSet, a PodGroup and pods that gang-scheduler
places whole.

Skipped when the session cluster runs without them (``GANG_SCHEDULER_E2E_OPERATORS=0``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import SIMULATED_RUNTIME, ControlPlane, wait_for
from tests.e2e.contention import (
    IGNORE_DISRUPTIONS,
    PER_RANK_BACKOFF,
    queued_preempted_resumed,
)
from tests.e2e.live import GPU, GROUP_LABEL, POOL_LABEL, QUEUE_LABEL, InProcessScheduler, Tenant

pytestmark = pytest.mark.e2e

JOBSETS = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
TRAINER = "trainer.kubeflow.org"
RUNTIMES = (TRAINER, "v1alpha1", "trainingruntimes")
TRAINJOBS = (TRAINER, "v1alpha1", "trainjobs")
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
RJOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


@pytest.fixture(autouse=True)
def operators(control_plane: ControlPlane) -> None:
    if not control_plane.operators:
        pytest.skip("the session cluster runs without the training operators")


def jobset(name: str, pod_spec: dict[str, Any], jobs: dict[str, int],
           annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A JobSet of one-pod Jobs: replicated job name -> replicas."""
    template = {"metadata": {"annotations": annotations or {}}, "spec": pod_spec}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name},
            "spec": {"replicatedJobs": [
                {"name": job, "replicas": replicas,
                 "template": {"spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0,
                                       "template": template}}}
                for job, replicas in jobs.items()], **spec}}


def test_a_jobset_becomes_jobs_whose_pods_run_and_it_completes(control_plane: ControlPlane,
                                                               namespace: str) -> None:
    node = control_plane.create_node(gpus=0)
    pod_spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                "nodeSelector": {"kubernetes.io/hostname": node},
                "containers": [{"name": "main", "image": "registry.invalid/x",
                                "resources": {"requests": {"cpu": "100m"}}}]}
    body = jobset("pair", pod_spec, {"leader": 1, "workers": 2}, {SIMULATED_RUNTIME: "1"})
    created = rest.call(control_plane.custom.create_namespaced_custom_object, *JOBSETS[:2],
                        namespace, JOBSETS[2], body)
    # The defaulting webhook ran: what the user left out is filled in.
    assert created["spec"]["successPolicy"]["operator"] == "All", created["spec"]
    batch = client.BatchV1Api(control_plane.api)

    def jobs() -> list[dict[str, Any]]:
        return list(rest.call(batch.list_namespaced_job, namespace)["items"])

    wait_for(lambda: len(jobs()) == 3, 60, what="the JobSet's 3 Jobs")
    assert sorted(j["metadata"]["name"] for j in jobs()) == [
        "pair-leader-0", "pair-workers-0", "pair-workers-1"]

    def status() -> dict[str, Any]:
        js = rest.call(control_plane.custom.get_namespaced_custom_object, *JOBSETS[:2],
                       namespace, JOBSETS[2], "pair")
        return {c["type"]: c["status"] for c in js.get("status", {}).get("conditions") or []}

    wait_for(lambda: status().get("Completed") == "True", 90, what="the JobSet Completed")
    pods = rest.call(control_plane.core.list_namespaced_pod, namespace)["items"]
    assert {p["metadata"]["labels"][JOBSET_LABEL] for p in pods} == {"pair"}


def test_the_jobset_webhook_refuses_an_invalid_jobset(control_plane: ControlPlane,
                                                      namespace: str) -> None:
    """Refused by the validating webhook (the CRD schema cannot see that the success policy
    names a replicated job that does not exist)."""
    body = jobset("bad", {"restartPolicy": "Never",
                          "containers": [{"name": "main", "image": "registry.invalid/x"}]},
                  {"workers": 1},
                  successPolicy={"operator": "All", "targetReplicatedJobs": ["nope"]})
    with pytest.raises(client.ApiException) as refused:
        rest.call(control_plane.custom.create_namespaced_custom_object, *JOBSETS[:2],
                  namespace, JOBSETS[2], body)
    assert refused.value.status in (400, 403, 422), refused.value
    message = json.loads(refused.value.body or "{}").get("message", "")
    assert 'admission webhook "vjobset.kb.io" denied the request' in message, message
    assert "nope" in message, message


def training_runtime(tenant: Tenant, name: str, coscheduling: bool) -> dict[str, Any]:
    """A namespaced TrainingRuntime whose pods go to `tenant`'s scheduler, queue and pool."""
    spec: dict[str, Any] = {
        "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
        "template": {"spec": {"replicatedJobs": [{
            "name": "node",
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step":
                                        "trainer"}},
                "spec": {"template": {
                    "metadata": {"labels": {QUEUE_LABEL: tenant.queue},
                                 "annotations": {SIMULATED_RUNTIME: "2"}},
                    "spec": {**tenant.pod_spec(gpus=0),
                             "containers": [{"name": "node",
                                             "image": "registry.invalid/torch"}]}}}}}]}}}
    if coscheduling:
        spec["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 120}}
    return {"apiVersion": f"{TRAINER}/v1alpha1", "kind": "TrainingRuntime",
            "metadata": {"name": name}, "spec": spec}


def trainjob(name: str, runtime: str, nodes: int, gpus: int) -> dict[str, Any]:
    per_node = {"cpu": "1", "memory": "1Gi", GPU: str(gpus)}
    return {"apiVersion": f"{TRAINER}/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
            "spec": {"runtimeRef": {"apiGroup": TRAINER, "kind": "TrainingRuntime",
                                    "name": runtime},
                     "trainer": {"numNodes": nodes,
                                 "resourcesPerNode": {"requests": per_node,
                                                      "limits": {GPU: str(gpus)}}}}}


def trainjob_complete(tenant: Tenant, name: str) -> bool:
    job = rest.call(tenant.cp.custom.get_namespaced_custom_object, *TRAINJOBS[:2],
                    tenant.namespace, TRAINJOBS[2], name)
    return any(c["type"] == "Complete" and c["status"] == "True"
               for c in job.get("status", {}).get("conditions") or [])


def create_trainjob(tenant: Tenant, body: dict[str, Any]) -> None:
    """Create a TrainJob whose runtime was just created.

    Trainer's validating webhook looks the runtime up in its informer cache, which may not
    have seen the runtime yet on a loaded machine ("specified trainingRuntime must be created
    before the TrainJob is created"): that refusal is retried until the cache catches up.
    """
    def created() -> bool:
        try:
            rest.call(tenant.cp.custom.create_namespaced_custom_object, *TRAINJOBS[:2],
                      tenant.namespace, TRAINJOBS[2], body)
        except client.ApiException as exc:
            if exc.status == 403 and "must be created before" in str(exc.body):
                return False
            raise
        return True

    wait_for(created, 30, what="Trainer's webhook to see the new runtime")


def test_a_trainjob_with_coscheduling_is_one_podgroup_placed_whole_and_completes(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    cp = tenant.cp
    tenant.create_nodes(2, gpus=8)
    rest.call(cp.custom.create_namespaced_custom_object, *RUNTIMES[:2], tenant.namespace,
              RUNTIMES[2], training_runtime(tenant, "torch-gang", coscheduling=True))
    create_trainjob(tenant, trainjob("finetune", "torch-gang", nodes=3, gpus=4))
    # Trainer's PodGroup: every training node is a member, their requests its minResources.
    def group() -> dict[str, Any]:
        try:
            return cp.get_pod_group(tenant.namespace, "finetune")
        except client.ApiException as exc:
            if exc.status == 404:
                return {}
            raise

    def training_pods() -> list[str]:
        return sorted(n for n, p in tenant.pods().items()
                      if p["metadata"]["labels"].get(GROUP_LABEL) == "finetune")

    spec = wait_for(group, 60, what="Trainer's PodGroup")["spec"]
    assert spec["minMember"] == 3, spec
    # Seen with Trainer v2.0.0: minResources counts the runtime's pod template, not the
    # TrainJob's resourcesPerNode, so here (no requests in the template) it is empty.
    assert spec.get("minResources", {}).get(GPU) in (None, "12"), spec
    wait_for(lambda: len(training_pods()) == 3, 60, what="the TrainJob's 3 pods")
    names = training_pods()
    requests = {n: tenant.pods()[n]["spec"]["containers"][0]["resources"]["requests"]
                for n in names}
    assert all(r.get(GPU) == "4" for r in requests.values()), requests
    wait_for(lambda: tenant.all_bound(names), 60, what="the 3 training pods bound")
    assert len(set(tenant.nodes_of(names).values())) == 2, "12 GPUs take both 8-GPU nodes"

    wait_for(lambda: trainjob_complete(tenant, "finetune"), 90, what="the TrainJob Complete")


def test_the_trainer_webhook_refuses_a_trainjob_of_a_missing_runtime(tenant: Tenant) -> None:
    with pytest.raises(client.ApiException) as refused:
        rest.call(tenant.cp.custom.create_namespaced_custom_object, *TRAINJOBS[:2],
                  tenant.namespace, TRAINJOBS[2], trainjob("orphan", "no-such-runtime", 1, 1))
    assert refused.value.status in (400, 403, 422), refused.value
    assert "admission webhook" in str(refused.value.body), refused.value.body


def with_initializer(runtime: dict[str, Any], tenant: Tenant) -> dict[str, Any]:
    """*runtime* with a dataset initializer the training step depends on, as Trainer's own
    runtimes have: the JobSet controller creates the step's Job once the initializer is done."""
    rjobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    init = {"name": "dataset-initializer",
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step":
                                        "dataset-initializer"}},
                "spec": {"template": {
                    "metadata": {"labels": {QUEUE_LABEL: tenant.queue},
                                 "annotations": {SIMULATED_RUNTIME: "1"}},
                    "spec": {**tenant.pod_spec(gpus=0),
                             "containers": [{"name": "dataset-initializer",
                                             "image": "registry.invalid/init"}]}}}}}
    rjobs[0]["dependsOn"] = [{"name": "dataset-initializer", "status": "Complete"}]
    rjobs.insert(0, init)
    return runtime


def test_a_trainjob_without_coscheduling_is_grouped_by_its_jobset_after_its_initializer(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """No ``podGroupPolicy``: Trainer makes a JobSet and gang-scheduler groups by it. The
    dataset initializer runs first (its own gang: the training step's Job does not exist
    yet), then the 3 training nodes are one gang of 3, placed whole, and the TrainJob
    completes."""
    cp = tenant.cp
    tenant.create_nodes(2, gpus=8)
    runtime = with_initializer(training_runtime(tenant, "torch-plain", coscheduling=False),
                               tenant)
    rest.call(cp.custom.create_namespaced_custom_object, *RUNTIMES[:2], tenant.namespace,
              RUNTIMES[2], runtime)
    create_trainjob(tenant, trainjob("plain", "torch-plain", nodes=3, gpus=4))

    def step(name: str) -> list[str]:
        return sorted(n for n, p in tenant.pods().items()
                      if p["metadata"]["labels"].get(JOBSET_LABEL) == "plain"
                      and p["metadata"]["labels"].get("jobset.sigs.k8s.io/replicatedjob-name")
                      == name)

    (init,) = wait_for(lambda: step("dataset-initializer"), 90, what="the initializer pod")
    assert not any(GROUP_LABEL in p["metadata"]["labels"] for p in tenant.pods().values())
    wait_for(lambda: tenant.phases([init]).get(init) == "Succeeded", 60,
             what="the initializer done")
    names = wait_for(lambda: step("node") if len(step("node")) == 3 else [], 90,
                     what="the training step's 3 pods, created after the initializer")
    wait_for(lambda: tenant.all_bound(names), 60, what="the 3 training pods bound")
    assert len(set(tenant.nodes_of(names).values())) == 2, "12 GPUs take both 8-GPU nodes"

    wait_for(lambda: trainjob_complete(tenant, "plain"), 120, what="the TrainJob Complete")


# Under contention (issue 33): queued behind a running gang, preempted, resumed ------------------
def contended_runtime(tenant: Tenant, name: str, priority: str, coscheduling: bool,
                      initializer: bool, timeout_s: int = 5) -> dict[str, Any]:
    """``training_runtime`` at *priority*, its Jobs recreating evicted pods (after their
    per-rank backoff), optionally with a dataset initializer and a coscheduling PodGroup
    timing out after *timeout_s*."""
    runtime = training_runtime(tenant, name, coscheduling)
    if coscheduling:
        runtime["spec"]["podGroupPolicy"]["coscheduling"]["scheduleTimeoutSeconds"] = timeout_s
    if initializer:
        runtime = with_initializer(runtime, tenant)
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        job = rjob["template"]["spec"]
        job.update(PER_RANK_BACKOFF, podFailurePolicy=IGNORE_DISRUPTIONS)
        job["template"]["spec"]["priorityClassName"] = priority
        if rjob["name"] == "node":  # the trainer step runs until preempted, then again
            job["template"]["metadata"]["annotations"].pop(SIMULATED_RUNTIME, None)
    return runtime


def trainer_pods(tenant: Tenant, name: str) -> list[str]:
    """The TrainJob's training-step pods not being deleted."""
    return sorted(n for n, p in tenant.pods().items()
                  if p["metadata"]["labels"].get(JOBSET_LABEL) == name
                  and p["metadata"]["labels"].get(RJOB_LABEL) == "node"
                  and not p["metadata"].get("deletionTimestamp"))


@pytest.mark.parametrize(("coscheduling", "initializer"), [
    (False, True), (True, False), (True, True)],
    ids=["jobset-with-initializer", "coscheduling", "coscheduling-with-initializer"])
def test_a_trainjob_queued_past_its_timeout_preempted_and_resumed_runs_whole(
        tenant: Tenant, live_scheduler: InProcessScheduler, coscheduling: bool,
        initializer: bool) -> None:
    """3 training nodes of 4 GPUs behind a running gang (8 s, past a coscheduling timeout of
    5 s), then preempted and recreated by the Job controller: each time the 3 run whole. With
    coscheduling and an initializer, Trainer's PodGroup counts the initializer's pod too
    (minMember 4): the initializer runs alone first, then the 3 trainers are the PodGroup's
    gang (issue 33 item 3)."""
    cp = tenant.cp
    tenant.create_nodes(2, gpus=8)
    name = "tj"

    def create(low: str) -> None:
        rest.call(cp.custom.create_namespaced_custom_object, *RUNTIMES[:2], tenant.namespace,
                  RUNTIMES[2], contended_runtime(tenant, "rt", low, coscheduling, initializer))
        create_trainjob(tenant, trainjob(name, "rt", nodes=3, gpus=4))

    def waiting() -> None:
        if coscheduling:
            group = cp.get_pod_group(tenant.namespace, name)
            assert group["spec"]["minMember"] == (4 if initializer else 3), group["spec"]
            assert (group.get("status") or {}).get("phase") not in ("Failed", "Running")

    resumed = queued_preempted_resumed(tenant, live_scheduler, create,
                                       lambda: trainer_pods(tenant, name), size=3,
                                       queued_s=8.0, waiting=waiting)
    assert len(set(tenant.nodes_of(list(resumed.again)).values())) == 2


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trainer-runtime-coscheduling.yaml"
#: The example's PodGroup timeout here (its own is 120 s): see the test below.
EXAMPLE_TIMEOUT_S = 10


def test_the_coscheduling_example_on_a_busy_pool_runs_past_its_timeout_and_resumes(
        tenant: Tenant, start_scheduler: Callable[..., InProcessScheduler]) -> None:
    """``examples/trainer-runtime-coscheduling.yaml`` (4 nodes of 8 GPUs, a PodGroup with
    ``scheduleTimeoutSeconds: 120``), changed only to run in the tenant's namespace, pool,
    queue and scheduler, at the contention's priority, and with a timeout of
    ``EXAMPLE_TIMEOUT_S``: applied while the pool is busy, it waits past its timeout (issue 33
    saw it given up after 2 min 14 s), runs once the pool frees, and runs again after a
    preemption (Trainer never recreates its PodGroup).

    Why 10 s rather than the example's 120 s: the scheduler reads a PodGroup's timeout as a
    length like any other (``scheduler/decide/housekeeping.py``: it bounds only how long a
    gang stays partly bound; one that waits is never given up), so waiting past 10 s puts
    the gang past a real timeout as waiting past 120 s did, two minutes sooner."""
    runner = start_scheduler(eviction_grace_period_seconds=5)  # its pods ask 120 s
    tenant.create_nodes(4, gpus=8)
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d["kind"] != "Namespace"]
    runtime, job = (next(d for d in docs if d["kind"] == kind)
                    for kind in ("TrainingRuntime", "TrainJob"))
    coscheduling = runtime["spec"]["podGroupPolicy"]["coscheduling"]
    assert coscheduling["scheduleTimeoutSeconds"] > EXAMPLE_TIMEOUT_S, coscheduling
    name, timeout = job["metadata"]["name"], EXAMPLE_TIMEOUT_S

    def create(low: str) -> None:
        coscheduling["scheduleTimeoutSeconds"] = timeout
        for doc in (runtime, job):
            doc["metadata"].pop("namespace", None)
        (rjob,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
        pod = rjob["template"]["spec"]["template"]
        pod["metadata"]["labels"][QUEUE_LABEL] = tenant.queue
        pod["spec"].update(schedulerName=tenant.scheduler_name, priorityClassName=low,
                           nodeSelector={POOL_LABEL: tenant.pool})
        rest.call(tenant.cp.custom.create_namespaced_custom_object, *RUNTIMES[:2],
                  tenant.namespace, RUNTIMES[2], runtime)
        create_trainjob(tenant, job)

    def pods() -> list[str]:
        return sorted(n for n, p in tenant.pods().items()
                      if p["metadata"]["labels"].get(GROUP_LABEL) == name
                      and not p["metadata"].get("deletionTimestamp"))

    def not_given_up() -> None:
        group = tenant.cp.get_pod_group(tenant.namespace, name)
        assert group["spec"]["scheduleTimeoutSeconds"] == timeout, group["spec"]  # waited past
        status = tenant.group_status(name)
        assert status.get("phase") not in ("Failed", "Scheduled", "Running"), status

    queued_preempted_resumed(tenant, runner, create, pods, size=4, queued_s=timeout + 5.0,
                             waiting=not_given_up)
    wait_for(lambda: tenant.group_status(name).get("phase") == "Running", 60,
             what="its PodGroup Running again")
