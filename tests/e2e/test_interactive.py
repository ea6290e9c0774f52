"""The interactive tier on the dev cluster, with real Jobs run by the Job controller.

One 8-GPU node; the tenant's queue caps each user at 2 interactive GPUs
(``spec.interactive.maxGPUsPerUser``):

1. a batch Job fills the node;
2. an interactive single-pod Job of user alice (``gangscheduler.io/tier: interactive``)
   starts by preempting it; the ``Preempted`` event on the batch Job says it was preempted
   for an interactive gang;
3. a batch Job of much higher priority does not preempt the notebook: it waits;
4. alice's second interactive Job waits with ``QueueLimit``, naming her, what she holds and
   the cap, though the node has room for it.

Pods under kwok run until deleted: every Job here keeps running.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import wait_for
from tests.e2e.contention import priority_class
from tests.e2e.live import QUEUE_LABEL, QUEUES, InProcessScheduler, Tenant, unschedulable_message

pytestmark = pytest.mark.e2e

TIER = "gangscheduler.io/tier"
USER = "gangscheduler.io/user"


def create_job(tenant: Tenant, name: str, gpus: int, labels: dict[str, str] | None = None,
               priority: str | None = None) -> None:
    """A one-pod Job of *gpus* GPUs whose pods carry *labels* (and *priority*'s class)."""
    spec = tenant.pod_spec(gpus)
    if priority is not None:
        spec["priorityClassName"] = priority
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: tenant.queue}},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 20,
                     "template": {"metadata": {"labels": {QUEUE_LABEL: tenant.queue,
                                                          **(labels or {})}},
                                  "spec": spec}}}
    rest.call(client.BatchV1Api(tenant.cp.api).create_namespaced_job, tenant.namespace, body)


def live_pod(tenant: Tenant, job: str) -> str:
    """The name of the Job's pod that is not being deleted (its controller may have made a
    replacement for an evicted one)."""
    pods = [n for n, p in tenant.job_pods(job).items()
            if not p["metadata"].get("deletionTimestamp")
            and p.get("status", {}).get("phase") not in ("Failed", "Succeeded")]
    return pods[0] if len(pods) == 1 else ""


def test_notebooks_start_by_preempting_batch_are_never_preempted_by_it_and_are_capped(
        tenant: Tenant, start_scheduler: Callable[..., InProcessScheduler]) -> None:
    tenant.create_nodes(1, gpus=8)
    rest.call(tenant.cp.custom.patch_cluster_custom_object, *QUEUES, tenant.queue,
              {"spec": {"interactive": {"maxGPUsPerUser": 2}}})
    runner = start_scheduler()
    # 1. Batch work fills the node.
    create_job(tenant, "train", 8)
    train = wait_for(lambda: live_pod(tenant, "train"), 60, what="the batch Job's pod")
    wait_for(lambda: tenant.all_bound([train]), 60, what="the batch Job bound")

    # 2. A notebook starts by preempting it.
    alice = {TIER: "interactive", USER: "alice"}
    create_job(tenant, "nb-1", 2, alice)
    nb = wait_for(lambda: live_pod(tenant, "nb-1"), 60, what="the notebook's pod")
    wait_for(lambda: tenant.all_bound([nb]), 90, what="the notebook bound")

    def on_train() -> list[dict[str, Any]]:
        return [e for e in tenant.events("Preempted")
                if (e.get("regarding") or {}).get("name") == "train"]
    (event, *_) = wait_for(on_train, 60, what="a Preempted event on the batch Job")
    note = event.get("note") or ""
    assert f"preempted by interactive gang {tenant.namespace}/nb-1" in note, note
    assert "batch gang preempted for interactive gang" in note, note

    # 3. Batch of much higher priority waits; the notebook keeps running.
    urgent_class = priority_class(tenant, "urgent", 100_000)
    create_job(tenant, "urgent", 8, priority=urgent_class)
    urgent = wait_for(lambda: live_pod(tenant, "urgent"), 60, what="the urgent Job's pod")
    wait_for(lambda: unschedulable_message(tenant.pods().get(urgent, {})), 60,
             what="the urgent Job's pending reason")
    for _ in runner.during_cycles(4):
        assert tenant.bound([nb]) == [nb], "a batch Job preempted the notebook"
        assert tenant.bound([urgent]) == []
    assert not [e for e in tenant.events("Preempted")
                if (e.get("regarding") or {}).get("name", "").startswith("nb-1")]

    # 4. Alice's second notebook is over her cap: it waits, naming it, though 6 GPUs are free.
    create_job(tenant, "nb-2", 1, alice)
    second = wait_for(lambda: live_pod(tenant, "nb-2"), 60, what="the second notebook's pod")

    def held() -> str:
        message = unschedulable_message(tenant.pods().get(second, {}))
        return message if message.startswith("QueueLimit") else ""
    message = wait_for(held, 60, what="the second notebook held by the per-user cap")
    assert (f"user alice already runs 2 interactive GPU(s) of 2 allowed in queue "
            f"{tenant.queue}") in message, message
    runner.run_cycles()
    assert tenant.bound([second]) == [] and tenant.bound([nb]) == [nb]
