"""A Job's gang gets its estimated start where its user looks: on its pods and on the Job
(issue 16: only scheduler-plugins PodGroups had ``status.estimatedStart``).

With the real Job controller: a busy Job (its deadline is its runtime estimate) occupies one of
two nodes; a big two-pod Job then waits with a reservation. Its pods and the Job carry
``gangscheduler.io/estimated-start`` (about when the busy Job is expected to end) with
``gangscheduler.io/estimate-time``; the pods' ``PodScheduled`` message carries neither the
estimate nor the queue position; the apiserver view (what ``gang-scheduler views`` shows
without the scheduler's endpoint) reads the estimate from the pods. Once the busy Job is
deleted the big one starts, and the Job's estimate is removed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from kubernetes import client

from scheduler.kube.client import connect
from scheduler.kube.oneshot import read_visible
from scheduler.model.workloads import ESTIMATE_TIME_ANNOTATION, ESTIMATED_START_ANNOTATION
from scheduler.tools.devcluster import rest
from scheduler.views import apiserver
from tests.e2e.cluster_api import wait_for
from tests.e2e.live import InProcessScheduler, Tenant, tenant_config, unschedulable_message

pytestmark = pytest.mark.e2e

BUSY_S = 3600


def annotated(obj: dict[str, Any], key: str = ESTIMATED_START_ANNOTATION) -> float | None:
    value = (obj.get("metadata", {}).get("annotations") or {}).get(key)
    return None if value is None else datetime.fromisoformat(
        value.replace("Z", "+00:00")).timestamp()


def test_a_reserved_jobs_pods_and_job_carry_its_estimated_start(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    tenant.create_nodes(2, gpus=8)
    batch = client.BatchV1Api(tenant.cp.api)
    tenant.create_job("busy", parallelism=1, gpus=8, activeDeadlineSeconds=BUSY_S)
    (busy,) = wait_for(lambda: list(tenant.job_pods("busy")), 60, what="the busy Job's pod")
    wait_for(lambda: tenant.all_bound([busy]), 60, what="the busy Job bound")
    started = rest.call(batch.read_namespaced_job, "busy", tenant.namespace)["status"]
    busy_start = datetime.fromisoformat(started["startTime"].replace("Z", "+00:00")).timestamp()

    tenant.create_job("big", parallelism=2, gpus=8)

    def big_pods_annotated() -> list[dict[str, Any]]:
        pods = list(tenant.job_pods("big").values())
        return pods if len(pods) == 2 and all(annotated(p) for p in pods) else []

    pods = wait_for(big_pods_annotated, 90, what="the big Job's pods with an estimated start")
    for pod in pods:
        start, made = annotated(pod), annotated(pod, ESTIMATE_TIME_ANNOTATION)
        assert start is not None and made is not None, pod["metadata"]
        # The busy Job's expected end (its deadline), give or take the clocks' seconds.
        assert abs(start - (busy_start + BUSY_S)) < 120, (start, busy_start)
        assert made <= start
        message = unschedulable_message(pod)
        assert message.startswith("Reserved: "), message
        assert "in queue order" not in message and "estimated" not in message, message

    def big_job_annotated() -> dict[str, Any] | None:
        job: dict[str, Any] = rest.call(batch.read_namespaced_job, "big", tenant.namespace)
        return job if annotated(job) else None

    job = wait_for(big_job_annotated, 60, what="the big Job annotated with its estimated start")
    assert job is not None and annotated(job) == annotated(pods[0])

    seen = read_visible(connect(str(tenant.cp.kubeconfig)), tenant_config(tenant),
                        [tenant.namespace])
    view = apiserver.build(seen.cache.cycle_input(0).gangs, seen.cache.gang_pods,
                           seen.conditions, seen.queues, None, busy_start,
                           seen.estimates, seen.pod_estimates, seen.positions)
    (row,) = [r for r in view.pending if r.id == f"{tenant.namespace}/big"]
    assert row.eta_seconds is not None and abs(row.eta_seconds - BUSY_S) < 120, row

    rest.call(batch.delete_namespaced_job, "busy", tenant.namespace,
              propagation_policy="Background", grace_period_seconds=0)
    def big_bound() -> bool:
        names = list(tenant.job_pods("big"))
        return len(names) == 2 and tenant.all_bound(names)

    wait_for(big_bound, 120, what="the big Job bound once the busy one is gone")
    wait_for(lambda: annotated(rest.call(batch.read_namespaced_job, "big", tenant.namespace))
             is None or None, 60, what="the big Job's estimate removed once it started")
