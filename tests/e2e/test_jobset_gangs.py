"""JobSet gangs with the real JobSet and Job controllers: a leader and its workers start
together or not at all, one gang per replicated Job on request, a failure-policy restart is
placed whole again, and ``startupPolicy: InOrder`` runs one replicated Job after the other;
under contention (``tests/e2e/contention.py``) too.

Skipped when the session cluster runs without the training operators
(``GANG_SCHEDULER_E2E_OPERATORS=0``).
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.tools.devcluster import rest
from tests.e2e import native_support
from tests.e2e.cluster_api import SIMULATED_EXIT_CODE, SIMULATED_RUNTIME, ControlPlane, wait_for
from tests.e2e.contention import (
    IGNORE_DISRUPTIONS,
    PER_RANK_BACKOFF,
    queued_preempted_resumed,
)
from tests.e2e.live import QUEUE_LABEL, InProcessScheduler, Tenant, unschedulable_message

pytestmark = pytest.mark.e2e

JOBSETS = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
RJOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


@pytest.fixture(autouse=True)
def operators(control_plane: ControlPlane) -> None:
    if not control_plane.operators:
        pytest.skip("the session cluster runs without the training operators")


def create_jobset(tenant: Tenant, name: str, jobs: dict[str, tuple[int, int]],
                  runtime_s: float | None = None, annotations: dict[str, str] | None = None,
                  **spec: Any) -> dict[str, Any]:
    """A JobSet of *tenant*'s one-GPU pods: replicated Job -> (replicas, pods per Job)."""
    notes = {SIMULATED_RUNTIME: str(runtime_s)} if runtime_s is not None else {}
    template = {"metadata": {"labels": {QUEUE_LABEL: tenant.queue}, "annotations": notes},
                "spec": tenant.pod_spec(gpus=1)}
    body = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"replicatedJobs": [
                {"name": rjob, "replicas": replicas,
                 "template": {"spec": {"parallelism": pods, "completions": pods,
                                       "backoffLimit": 0, "template": template}}}
                for rjob, (replicas, pods) in jobs.items()], **spec}}
    return rest.call(tenant.cp.custom.create_namespaced_custom_object, *JOBSETS[:2],
                     tenant.namespace, JOBSETS[2], body)


def jobset_pods(tenant: Tenant, name: str, rjob: str | None = None) -> dict[str, Any]:
    """The JobSet's pods not being deleted, by name (of one replicated Job if given)."""
    return {n: p for n, p in tenant.pods().items()
            if p["metadata"]["labels"].get(JOBSET_LABEL) == name
            and (rjob is None or p["metadata"]["labels"].get(RJOB_LABEL) == rjob)
            and not p["metadata"].get("deletionTimestamp")}


def jobset_status(tenant: Tenant, name: str) -> dict[str, Any]:
    js = rest.call(tenant.cp.custom.get_namespaced_custom_object, *JOBSETS[:2],
                   tenant.namespace, JOBSETS[2], name)
    return dict(js.get("status") or {})


def conditions(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status.get("conditions") or []}


def test_a_jobset_is_one_gang_across_its_replicated_jobs(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """A leader Job and two worker Jobs of two pods: 5 pods on room for 4 never start in
    part; a second node lets all 5 start together, and the JobSet completes."""
    tenant.create_nodes(1, gpus=4)
    create_jobset(tenant, "pair", {"leader": (1, 1), "workers": (2, 2)}, runtime_s=2)
    names = wait_for(lambda: sorted(jobset_pods(tenant, "pair")) if len(
        jobset_pods(tenant, "pair")) == 5 else [], 90, what="the JobSet's 5 pods")
    wait_for(lambda: all("needs 5 nvidia.com/gpu" in unschedulable_message(tenant.pods()[n])
                         for n in names), 30,
             what="every pod of the JobSet told it waits for room for all 5")
    live_scheduler.run_cycles()  # several cycles with 4 of the 5 GPUs free
    assert tenant.bound(names) == [], "a JobSet started in part"
    tenant.cp.create_node(f"{tenant.pool}-n1", gpus=4, labels={"gangscheduler.io/pool":
                                                                tenant.pool})
    wait_for(lambda: tenant.all_bound(names), 60, what="the whole JobSet bound")
    wait_for(lambda: conditions(jobset_status(tenant, "pair")).get("Completed") == "True", 120,
             what="the JobSet Completed")


def test_one_gang_per_replicated_job_on_request(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """``gangscheduler.io/gang-scope: replicated-job``: on room for 4, the 4 workers start
    whole while the leader waits (or the other way round), never 5 in part."""
    tenant.create_nodes(1, gpus=4)
    create_jobset(tenant, "split", {"leader": (1, 1), "workers": (2, 2)},
                  annotations={"gangscheduler.io/gang-scope": "replicated-job"})
    leader = wait_for(lambda: sorted(jobset_pods(tenant, "split", "leader")) if len(
        jobset_pods(tenant, "split", "leader")) == 1 else [], 90, what="the leader pod")
    workers = wait_for(lambda: sorted(jobset_pods(tenant, "split", "workers")) if len(
        jobset_pods(tenant, "split", "workers")) == 4 else [], 90, what="the 4 worker pods")
    wait_for(lambda: tenant.all_bound(workers) or tenant.all_bound(leader), 60,
             what="one replicated Job's gang bound")
    live_scheduler.run_cycles()  # several chances to start the other one in part
    bound = set(tenant.bound(leader + workers))
    assert bound in ({*workers}, {*leader}), bound  # whole gangs, the other one waiting


def test_a_failure_policy_restart_is_placed_whole_again(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """A worker fails; the JobSet's failurePolicy (maxRestarts 1) recreates every Job, and
    the new pods are one gang again, all bound, while the old ones go."""
    tenant.create_nodes(1, gpus=8)
    create_jobset(tenant, "retry", {"leader": (1, 1), "workers": (1, 2)},
                  failurePolicy={"maxRestarts": 1})
    first = wait_for(lambda: sorted(jobset_pods(tenant, "retry")) if len(
        jobset_pods(tenant, "retry")) == 3 else [], 90, what="the JobSet's 3 pods")
    wait_for(lambda: tenant.all_bound(first), 60, what="the JobSet bound")
    wait_for(lambda: set(tenant.phases(first).values()) == {"Running"}, 30, what="running")
    worker = next(n for n in first
                  if tenant.pods()[n]["metadata"]["labels"][RJOB_LABEL] == "workers")
    rest.call(tenant.cp.core.patch_namespaced_pod, worker, tenant.namespace,
              {"metadata": {"annotations": {SIMULATED_EXIT_CODE: "1",
                                            SIMULATED_RUNTIME: "0"}}},
              _content_type=rest.MERGE_PATCH)
    wait_for(lambda: jobset_status(tenant, "retry").get("restarts") == 1, 90,
             what="the JobSet restarted by its failure policy")
    again = wait_for(lambda: sorted(n for n in jobset_pods(tenant, "retry") if n not in first)
                     if len([n for n in jobset_pods(tenant, "retry") if n not in first]) == 3
                     else [], 90, what="the restarted JobSet's 3 new pods")
    wait_for(lambda: tenant.all_bound(again), 60, what="the restarted JobSet bound whole")
    assert conditions(jobset_status(tenant, "retry")).get("Failed") != "True"


# Under contention (issue 33): queued behind a running gang, preempted, resumed ------------------
def contended_jobset(tenant: Tenant, name: str, priority: str, jobs: dict[str, int],
                     **spec: Any) -> None:
    """A JobSet of one-GPU pods at *priority* (replicated Job -> pods of its one Job), each
    Job recreating evicted pods (``podFailurePolicy``, after its per-rank backoff); the
    first replicated Job's container has the readiness probe of jobset's startup-driver-ready
    example."""
    rjobs = []
    for i, (rjob, pods) in enumerate(jobs.items()):
        pod_spec = {**tenant.pod_spec(gpus=1), "priorityClassName": priority}
        if i == 0:
            pod_spec["containers"] = [{**pod_spec["containers"][0], "readinessProbe": {
                "exec": {"command": ["echo", "ready"]}, "initialDelaySeconds": 30}}]
        rjobs.append({"name": rjob, "template": {"spec": {
            "parallelism": pods, "completions": pods, **PER_RANK_BACKOFF,
            "podFailurePolicy": IGNORE_DISRUPTIONS,
            "template": {"metadata": {"labels": {QUEUE_LABEL: tenant.queue}},
                         "spec": pod_spec}}}})
    rest.call(tenant.cp.custom.create_namespaced_custom_object, *JOBSETS[:2], tenant.namespace,
              JOBSETS[2], {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                           "metadata": {"name": name},
                           "spec": {"replicatedJobs": rjobs, **spec}})


def test_the_startup_driver_ready_example_runs_in_order_queued_preempted_and_resumed(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """jobset's startup-driver-ready example (``startupPolicy: InOrder``, a driver, then 4
    workers once it is ready): the driver alone is a whole gang, told that the workers come
    after it; behind a running gang it waits, then runs, the workers follow as a gang of 4,
    and after a preemption both run again."""
    tenant.create_nodes(1, gpus=8)
    name = "startup-driver-ready"

    def driver_told_why() -> None:
        (driver,) = jobset_pods(tenant, name, "driver").values()
        message = unschedulable_message(driver)
        assert "workers (4 pods) only once every Job of driver is ready (startupPolicy " \
               "InOrder)" in message, message
        assert jobset_pods(tenant, name, "workers") == {}, "workers before the driver ran"

    resumed = queued_preempted_resumed(
        tenant, live_scheduler,
        lambda low: contended_jobset(tenant, name, low, {"driver": 1, "workers": 4},
                                     startupPolicy={"startupPolicyOrder": "InOrder"}),
        lambda: sorted(jobset_pods(tenant, name)), size=5, waiting=driver_told_why)
    assert len(resumed.again) == 5


def test_a_jobset_queued_preempted_and_resumed_runs_whole_and_its_jobs_podgroups_say_so(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """A leader and 4 workers, one gang, behind a running gang, then preempted and resumed;
    on 1.36 the Job controller gives each of its Indexed Jobs a ``scheduling.k8s.io``
    PodGroup, which says scheduled once the JobSet's gang is bound (issue 33 item 7)."""
    tenant.create_nodes(1, gpus=8)
    resumed = queued_preempted_resumed(
        tenant, live_scheduler,
        lambda low: contended_jobset(tenant, "pair", low, {"leader": 1, "workers": 4}),
        lambda: sorted(jobset_pods(tenant, "pair")), size=5)
    assert len(resumed.again) == 5

    def unscheduled() -> list[str]:
        """The namespace's ``scheduling.k8s.io`` PodGroups not (yet) said scheduled."""
        groups = rest.call(tenant.cp.custom.list_namespaced_custom_object, native_support.GROUP,
                           native_support.VERSION, tenant.namespace, "podgroups")["items"]
        return [g["metadata"]["name"] for g in groups if native_support.condition(
            g, native_support.SCHEDULED).get("status") != "True"]

    wait_for(lambda: not unscheduled(), 60, what="the Job controller's PodGroups scheduled")
