"""A PodGroup's scheduleTimeoutSeconds, as the coscheduling plugin means it: how long members
already placed wait for the rest; never a deadline on queueing (issue 33).

- the scheduler-plugins install doc's walkthrough (PodGroup ``pg1``, minMember 3, timeout
  10 s; a Deployment of 2 pods, scaled to 3 later: here its ReplicaSet) runs once the third
  pod exists, however long after the timeout;
- a complete PodGroup (a ReplicaSet's pods, timeout 3 s) queued behind a running gang well
  past its timeout runs once the pool frees, is preempted, and runs again when the
  ReplicaSet controller recreates its pods; its PodGroup is never Failed meanwhile; one
  queued behind its queue's quota past its timeout runs once the quota frees;
- a partly bound gang (cut mid-bind) whose started member waited past its PodGroup's
  timeout is released (its bound member deleted) long before the scheduler's own repair
  grace, and the gang then runs whole.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from scheduler.tools.devcluster import rest
from scheduler.tools.devcluster.nodes import cordon_node
from tests.e2e.cluster_api import (
    PODGROUP_GROUP,
    PODGROUP_PLURAL,
    PODGROUP_VERSION,
    ControlPlane,
    wait_for,
)
from tests.e2e.contention import queued_preempted_resumed
from tests.e2e.live import (
    GPU,
    GROUP_LABEL,
    QUEUE_LABEL,
    QUEUES,
    InProcessScheduler,
    Tenant,
    unschedulable_message,
)
from tests.e2e.test_live_repair import leave_partly_bound

pytestmark = pytest.mark.e2e


def podgroup(tenant: Tenant, name: str, min_member: int, timeout_s: int) -> None:
    """The walkthrough's PodGroup (plus the tenant's queue label)."""
    rest.call(tenant.cp.custom.create_namespaced_custom_object, PODGROUP_GROUP,
              PODGROUP_VERSION, tenant.namespace, PODGROUP_PLURAL, {
                  "apiVersion": f"{PODGROUP_GROUP}/{PODGROUP_VERSION}", "kind": "PodGroup",
                  "metadata": {"name": name, "labels": {QUEUE_LABEL: tenant.queue}},
                  "spec": {"scheduleTimeoutSeconds": timeout_s, "minMember": min_member}})


def replicaset(tenant: Tenant, name: str, group: str, replicas: int,
               priority_class: str | None = None) -> None:
    """The walkthrough's Deployment as the ReplicaSet it drives (the dev cluster runs no
    Deployment controller), changed only in schedulerName, the queue label and (for the
    tenant's pool) its pods' spec."""
    spec: dict[str, Any] = {**tenant.pod_spec(gpus=1), "restartPolicy": "Always"}
    if priority_class:
        spec["priorityClassName"] = priority_class
    labels = {"app": name, GROUP_LABEL: group, QUEUE_LABEL: tenant.queue}
    rest.call(client.AppsV1Api(tenant.cp.api).create_namespaced_replica_set, tenant.namespace, {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": labels}, "spec": spec}}})


def live_pods(tenant: Tenant, app: str) -> list[str]:
    """The ReplicaSet's pods not being deleted."""
    return sorted(n for n, p in tenant.pods().items()
                  if p["metadata"]["labels"].get("app") == app
                  and not p["metadata"].get("deletionTimestamp"))


def never_failed(tenant: Tenant, group: str, app: str) -> Callable[[], None]:
    """A check that PodGroup *group* waits as pending, not failed or given up, and its pods
    (of ReplicaSet *app*) are not told to recreate it."""
    def check() -> None:
        status = tenant.group_status(group)
        assert status.get("phase") not in ("Failed", "Scheduled", "Running"), status
        for c in status.get("conditions") or ():
            assert (c["type"], c["status"]) != ("Scheduled", "True"), status
        messages = [unschedulable_message(tenant.pods()[n]) for n in live_pods(tenant, app)]
        assert not any("ScheduleTimeout" in m or "recreate" in m for m in messages), messages
    return check


def test_the_scheduler_plugins_walkthrough_runs_when_its_third_pod_comes(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """2 pods of minMember 3 wait (as the doc shows, Pending), well past the 10 s timeout;
    scaled to 3, the group runs and its PodGroup says Running."""
    tenant.create_nodes(1, gpus=8)
    podgroup(tenant, "pg1", 3, 10)
    replicaset(tenant, "pause", "pg1", 2)
    wait_for(lambda: len(live_pods(tenant, "pause")) == 2, 60, what="the ReplicaSet's 2 pods")
    wait_for(lambda: all("2 of 3 required members exist" in unschedulable_message(p)
                         for n, p in tenant.pods().items() if n in live_pods(tenant, "pause")),
             60, what="the 2 pods told they wait for a third")
    time.sleep(12)  # past the PodGroup's 10 s scheduleTimeoutSeconds
    live_scheduler.run_cycles(3)
    never_failed(tenant, "pg1", "pause")()
    assert tenant.bound(live_pods(tenant, "pause")) == []
    rest.call(client.AppsV1Api(tenant.cp.api).patch_namespaced_replica_set_scale, "pause",
              tenant.namespace, {"spec": {"replicas": 3}})
    wait_for(lambda: len(live_pods(tenant, "pause")) == 3
             and tenant.all_bound(live_pods(tenant, "pause")), 90, what="all 3 pods bound")
    wait_for(lambda: tenant.group_status("pg1").get("phase") == "Running", 60,
             what="PodGroup pg1 Running")
    assert tenant.group_status("pg1")["running"] == 3


def test_a_podgroup_queued_past_its_timeout_runs_is_preempted_and_resumes(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """A complete PodGroup (timeout 3 s) behind a running gang for 3 times its timeout: never
    given up; it runs once the pool frees, and again after a preemption."""
    tenant.create_nodes(1, gpus=8)
    podgroup(tenant, "pg1", 3, 3)
    resumed = queued_preempted_resumed(
        tenant, live_scheduler, lambda low: replicaset(tenant, "pause", "pg1", 3, low),
        lambda: live_pods(tenant, "pause"), size=3, queued_s=9.0,
        waiting=never_failed(tenant, "pg1", "pause"))
    assert not set(resumed.first) & set(resumed.again)
    wait_for(lambda: tenant.group_status("pg1").get("phase") == "Running", 60,
             what="PodGroup pg1 Running again")


def test_a_partly_bound_gang_is_released_after_its_podgroups_timeout_then_runs_whole(
        control_plane: ControlPlane, tenant: Tenant,
        start_scheduler: Callable[..., InProcessScheduler]) -> None:
    """Cut mid-bind (half-0 bound and Running, 3 members pending, no room for them): with
    scheduleTimeoutSeconds 3 the started member is released well within the scheduler's
    300 s repair grace; recreated, the gang then runs whole."""
    (node,) = tenant.create_nodes(1, gpus=8)
    start_scheduler(partial_gang_grace_seconds=300.0)
    cordon_node(control_plane.api, node)  # no room: it cannot be completed
    names = leave_partly_bound(control_plane, tenant, node, 4)
    rest.call(control_plane.custom.patch_namespaced_custom_object, PODGROUP_GROUP,
              PODGROUP_VERSION, tenant.namespace, PODGROUP_PLURAL, "half",
              {"spec": {"scheduleTimeoutSeconds": 3}})
    wait_for(lambda: "half-0" not in tenant.pods(), 120,
             what="the started member released after the PodGroup's timeout")
    assert tenant.bound(names) == []
    cordon_node(control_plane.api, node, on=False)
    tenant.create_pod("half-0", group="half")
    wait_for(lambda: tenant.all_bound(names), 90, what="the gang bound whole")


def test_a_complete_podgroup_behind_its_quota_past_its_timeout_runs_once_quota_frees(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """Room in the pool but not in the queue's quota (4 GPUs, all allocated to a running gang):
    PodGroup ``late`` (timeout 3 s) waits with a Quota reason for 3 times its timeout, never
    given up, and runs once the running gang's quota is free."""
    tenant.create_nodes(2, gpus=8)
    rest.call(tenant.cp.custom.patch_cluster_custom_object, *QUEUES, tenant.queue,
              {"spec": {"quotas": [{"pool": tenant.pool, "nominal": {GPU: 4}}]}})
    holder = tenant.create_gang("holder", 2, gpus=2)
    wait_for(lambda: tenant.all_bound(holder), 60, what="the running gang using the quota")
    podgroup(tenant, "late", 2, 3)
    late = ["late-0", "late-1"]
    for name in late:
        tenant.create_pod(name, gpus=2, group="late")
    wait_for(lambda: all(unschedulable_message(tenant.pods()[n]).startswith("Quota: ")
                         for n in late), 60, what="late told it waits for quota")
    time.sleep(9)  # 3 times its scheduleTimeoutSeconds
    live_scheduler.run_cycles(3)
    assert tenant.bound(late) == []
    assert tenant.group_status("late").get("phase") == "Pending", tenant.group_status("late")
    assert all(unschedulable_message(tenant.pods()[n]).startswith("Quota: ") for n in late)
    for name in holder:
        tenant.delete_pod(name)
    wait_for(lambda: tenant.all_bound(late), 60, what="late bound once the quota is free")
