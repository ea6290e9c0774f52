"""Elastic gangs on the dev cluster, with real Indexed Jobs run by the Job controller.

A Job of parallelism 4 whose ``gangscheduler.io/min-member`` annotation says 2 (on 1.36 the
Job controller makes a PodGroup of minCount 4 for it; the annotation is the Job's own
minimum) starts with
the 2 pods that fit, grows to 4 when nodes appear, and when a higher-priority Job needs 2
nodes it gives back the 2 members above its minimum (the eviction names them; the Job
recreates them as pending pods that wait to grow again) without losing its minimum.

Pods under kwok run until deleted (no simulated runtime).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import wait_for
from tests.e2e.contention import priority_class
from tests.e2e.live import (
    POOL_LABEL,
    QUEUE_LABEL,
    InProcessScheduler,
    Tenant,
    unschedulable_message,
)

pytestmark = pytest.mark.e2e

INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


def indexed_job(tenant: Tenant, name: str, parallelism: int, *,
                annotations: dict[str, str] | None = None, priority: str | None = None,
                queue: str | None = None) -> None:
    """An Indexed Job of *parallelism* pods of 8 GPUs each (one per node), in *queue* (the
    tenant's own by default)."""
    spec: dict[str, Any] = tenant.pod_spec(8)
    if priority is not None:
        spec["priorityClassName"] = priority
    labels = {QUEUE_LABEL: queue or tenant.queue}
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
            "spec": {"parallelism": parallelism, "completions": parallelism,
                     "completionMode": "Indexed", "backoffLimit": 20,
                     "template": {"metadata": {"labels": labels}, "spec": spec}}}
    rest.call(client.BatchV1Api(tenant.cp.api).create_namespaced_job, tenant.namespace, body)


def live_pods(tenant: Tenant, job: str) -> dict[str, dict[str, Any]]:
    """The Job's pods that are not being deleted, by name."""
    return {n: p for n, p in tenant.job_pods(job).items()
            if not p["metadata"].get("deletionTimestamp")}


def bound_indexes(tenant: Tenant, job: str) -> set[str]:
    return {p["metadata"]["labels"].get(INDEX_LABEL, "?")
            for p in live_pods(tenant, job).values() if p["spec"].get("nodeName")}


def test_an_elastic_job_starts_at_its_minimum_grows_and_gives_members_back(
        tenant: Tenant, start_scheduler: Callable[..., InProcessScheduler]) -> None:
    tenant.create_nodes(2, gpus=8)
    runner = start_scheduler()
    indexed_job(tenant, "el", 4, annotations={"gangscheduler.io/min-member": "2"})

    # Room for 2: it starts with 2 and the other 2 wait to grow.
    wait_for(lambda: len(bound_indexes(tenant, "el")) == 2, 90, what="el started with 2")
    runner.run_cycles(3)
    assert len(bound_indexes(tenant, "el")) == 2
    waiting = [p for p in live_pods(tenant, "el").values() if not p["spec"].get("nodeName")]
    assert len(waiting) == 2
    said = wait_for(lambda: unschedulable_message(
        live_pods(tenant, "el").get(waiting[0]["metadata"]["name"], {})), 60,
        what="a reason on a waiting member")
    assert "growing: 0 of 2 optional members placed" in said, said

    # Room appears: it grows to 4.
    for i in (2, 3):
        tenant.cp.create_node(f"{tenant.pool}-n{i}", gpus=8, labels={POOL_LABEL: tenant.pool})
    wait_for(lambda: bound_indexes(tenant, "el") == {"0", "1", "2", "3"}, 90,
             what="el grown to 4")

    # A higher-priority Job of 2 takes the 2 members above el's minimum back.
    indexed_job(tenant, "hi", 2, priority=priority_class(tenant, "high", 1000))
    wait_for(lambda: len(bound_indexes(tenant, "hi")) == 2, 120, what="hi bound")
    assert bound_indexes(tenant, "el") == {"0", "1"}  # its minimum, ranks 0 and 1, kept

    def member_events() -> list[str]:
        return [e.get("note") or "" for e in tenant.events("Preempted")
                if "above the gang's minimum 2" in (e.get("note") or "")]
    notes = wait_for(member_events, 60, what="a Preempted event naming the members")
    assert any("are released for" in n and f"{tenant.namespace}/hi" in n for n in notes), notes
    # The Job recreated the 2 members: pending, waiting to grow again; el never lost 0 and 1.
    wait_for(lambda: len(live_pods(tenant, "el")) == 4, 60, what="el's members recreated")
    runner.run_cycles(3)
    assert bound_indexes(tenant, "el") == {"0", "1"}
    assert len(bound_indexes(tenant, "hi")) == 2
