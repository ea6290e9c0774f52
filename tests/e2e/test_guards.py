"""Runaway guards on the dev cluster, with real Jobs run by the Job controller.

- A Job past its queue's ``maxRuntimeSeconds`` is evicted by gang-scheduler; the
  ``Preempted`` event on the Job names the limit, and the Job's ``podFailurePolicy``
  (``DisruptionTarget`` -> ``FailJob``) ends it.
- A queue whose GPU-hour budget for the day is used up starts no new Job: the pending pod's
  ``PodScheduled=False`` says ``QueueLimit`` and names the budget and when it resets.
- A malformed guard is refused by the CRD's schema, naming the field; the last valid
  version stays in force (a cap of one running Job holds the second).

Pods under kwok run until deleted (no simulated runtime): each Job here is a runaway.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import wait_for
from tests.e2e.live import (
    QUEUE_LABEL,
    QUEUES,
    InProcessScheduler,
    Tenant,
    unschedulable_message,
)

pytestmark = pytest.mark.e2e

LIMIT_S = 15
FAIL_ON_EVICTION = {"rules": [{"action": "FailJob",
                               "onPodConditions": [{"type": "DisruptionTarget"}]}]}


def guard(tenant: Tenant, guards: dict[str, Any]) -> None:
    rest.call(tenant.cp.custom.patch_cluster_custom_object, *QUEUES, tenant.queue,
              {"spec": {"guards": guards}})


def job_condition(tenant: Tenant, name: str, kind: str) -> dict[str, Any] | None:
    job = rest.call(client.BatchV1Api(tenant.cp.api).read_namespaced_job, name,
                    tenant.namespace)
    return next((c for c in job.get("status", {}).get("conditions") or ()
                 if c.get("type") == kind and c.get("status") == "True"), None)


def test_a_job_past_its_queues_max_runtime_is_evicted_naming_the_policy(
        tenant: Tenant, start_scheduler: Callable[..., InProcessScheduler]) -> None:
    tenant.create_nodes(1, gpus=8)
    guard(tenant, {"maxRuntimeSeconds": LIMIT_S})
    start_scheduler()
    tenant.create_job("runaway", parallelism=1, gpus=8, backoffLimit=0,
                      podFailurePolicy=FAIL_ON_EVICTION)
    (pod,) = wait_for(lambda: list(tenant.job_pods("runaway")), 60, what="the Job's pod")
    wait_for(lambda: tenant.all_bound([pod]), 60, what="the runaway Job bound")

    def preempted() -> list[dict[str, Any]]:
        return [e for e in tenant.events("Preempted")
                if (e.get("regarding") or {}).get("kind") == "Job"]
    (event,) = wait_for(preempted, LIMIT_S + 90, what="a Preempted event on the Job")
    note = event.get("note") or ""
    assert f"queue {tenant.queue} allows {LIMIT_S}s of runtime; this gang ran" in note, note
    assert "preempted by gang" not in note, note  # no gang asked for it: the policy did
    failed = wait_for(lambda: job_condition(tenant, "runaway", "Failed")
                      or job_condition(tenant, "runaway", "FailureTarget"), 90,
                      what="the Job failed by its podFailurePolicy")
    assert failed is not None and failed.get("reason") == "PodFailurePolicy", failed
    disruption = next((c for c in tenant.pods().get(pod, {}).get("status", {})
                       .get("conditions") or () if c.get("type") == "DisruptionTarget"), None)
    if disruption is not None:  # (the pod may already be gone)
        assert f"queue {tenant.queue} allows" in disruption.get("message", ""), disruption


def test_a_queue_over_its_daily_gpu_hour_budget_holds_the_next_job(
        tenant: Tenant, start_scheduler: Callable[..., InProcessScheduler]) -> None:
    tenant.create_nodes(2, gpus=8)
    # 0.001 GPU-h = 3.6 GPU-seconds: 8 GPUs use it up in under half a second.
    guard(tenant, {"budget": {"gpuHours": 0.001, "period": "Day"}})
    runner = start_scheduler()
    tenant.create_job("first", parallelism=1, gpus=8)
    (first,) = wait_for(lambda: list(tenant.job_pods("first")), 60, what="the first pod")
    wait_for(lambda: tenant.all_bound([first]), 60, what="the first Job bound")
    time.sleep(2)  # (the budget is used up by then, whatever the machine's load)
    tenant.create_job("second", parallelism=1, gpus=8)
    (second,) = wait_for(lambda: list(tenant.job_pods("second")), 60, what="the second pod")

    def held() -> str:
        message = unschedulable_message(tenant.pods().get(second, {}))
        return message if message.startswith("QueueLimit") else ""
    message = wait_for(held, 90, what="the second Job held by the budget")
    assert f"queue {tenant.queue} reached its GPU-hour budget for today:" in message, message
    assert "of 0.001 GPU-h; resets" in message and "00:00 UTC" in message, message
    runner.run_cycles()
    assert tenant.bound([second]) == []  # room on the second node, but the budget holds it
    assert tenant.bound([first]) == [first]  # what runs keeps running


def test_a_malformed_guard_is_refused_and_the_last_valid_one_stays(
        tenant: Tenant, start_scheduler: Callable[..., InProcessScheduler]) -> None:
    """The CRD's schema refuses what the parser would (``policy validate`` and the live
    ``Valid=False`` path say the same for a Queue applied without it)."""
    tenant.create_nodes(1, gpus=8)
    guard(tenant, {"maxRunningGangs": 1})
    runner = start_scheduler()
    with pytest.raises(client.ApiException) as refused:
        guard(tenant, {"maxRunningGangs": 0})
    assert refused.value.status == 422
    assert "spec.guards.maxRunningGangs" in str(refused.value.body), refused.value.body
    # The valid version (a cap of 1) is in force: a second Job waits for the first.
    tenant.create_job("a", parallelism=1, gpus=1)
    (a,) = wait_for(lambda: list(tenant.job_pods("a")), 60, what="Job a's pod")
    wait_for(lambda: tenant.all_bound([a]), 60, what="Job a bound")
    tenant.create_job("b", parallelism=1, gpus=1)
    (b,) = wait_for(lambda: list(tenant.job_pods("b")), 60, what="Job b's pod")
    message = wait_for(lambda: m if (m := unschedulable_message(tenant.pods().get(b, {})))
                       .startswith("QueueLimit") else "", 60, what="Job b held by the cap")
    assert f"queue {tenant.queue} runs 1 gang(s), its cap (maxRunningGangs 1)" in message, \
        message
    runner.run_cycles()
    assert tenant.bound([b]) == []


def test_a_lone_pods_own_max_runtime_evicts_it_without_queue_guards(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """The annotation alone (no guards on the queue) sets a deadline for a gang of any kind:
    here a lone pod, told on the pod why it was evicted."""
    tenant.create_nodes(1, gpus=8)
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "lone", "labels": {QUEUE_LABEL: tenant.queue},
                         "annotations": {"gangscheduler.io/max-runtime": f"{LIMIT_S}s"}},
            "spec": tenant.pod_spec(gpus=1)}
    rest.call(tenant.cp.core.create_namespaced_pod, tenant.namespace, body)
    wait_for(lambda: tenant.all_bound(["lone"]), 60, what="the lone pod bound")

    def on_the_pod() -> list[dict[str, Any]]:
        return [e for e in tenant.events("Preempted")
                if (e.get("regarding") or {}).get("name") == "lone"]
    (event,) = wait_for(on_the_pod, LIMIT_S + 90, what="a Preempted event on the pod")
    note = event.get("note") or ""
    assert (f"preempted: its gangscheduler.io/max-runtime annotation allows {LIMIT_S}s of "
            "runtime; this gang ran") in note, note
