"""Deleting a Queue in use, on the real apiserver: the scheduler's finalizer keeps it while a
gang it admitted runs (still charged and accounted, admitting nothing new, its pending gangs
told why) or while queues name it as parent; it goes once nothing uses it."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from scheduler.kube.write.queue_finalizer import FINALIZER
from scheduler.tools.devcluster import rest
from scheduler.views.apiserver import queue_rows
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import (
    GPU,
    QUEUES,
    InProcessScheduler,
    Tenant,
    unschedulable_message,
)

pytestmark = pytest.mark.e2e


def queue_object(cp: ControlPlane, name: str) -> dict[str, Any] | None:
    """The Queue object, None once it is gone. One read: asking whether it exists and then
    reading it raced the scheduler's finalizer removal (gone between the two reads)."""
    try:
        return rest.call(cp.custom.get_cluster_custom_object, *QUEUES, name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def finalized(cp: ControlPlane, name: str) -> bool:
    obj = queue_object(cp, name)
    return obj is not None and FINALIZER in (obj["metadata"].get("finalizers") or ())


def delete_queue(cp: ControlPlane, name: str) -> None:
    rest.call(cp.custom.delete_cluster_custom_object, *QUEUES, name)


def test_a_queue_with_a_running_gang_is_kept_until_the_gang_ends(
        control_plane: ControlPlane, tenant: Tenant,
        live_scheduler: InProcessScheduler) -> None:
    cp, queue = control_plane, tenant.queue
    tenant.create_nodes(2, gpus=8)
    running = tenant.create_gang("running", 1, gpus=8)
    wait_for(lambda: tenant.all_bound(running), 60, what="the running gang bound")
    wait_for(lambda: finalized(cp, queue), 60, what="the scheduler's finalizer on the Queue")
    wait_for(lambda: (queue_object(cp, queue) or {}).get("status", {}).get("allocatedGPUs") == 8,
             60, what="the Queue's figures")
    delete_queue(cp, queue)
    late = tenant.create_gang("late", 1, gpus=8)
    wait_for(lambda: unschedulable_message(tenant.pods()[late[0]]).startswith(
        f"NotAllowed: queue {queue} is being deleted: it admits no new gangs"), 60,
        what="the new gang told the queue is being deleted")
    live_scheduler.run_cycles(4)
    assert tenant.bound(late) == [], "a terminating queue admitted a gang"
    obj = queue_object(cp, queue)
    assert obj is not None and obj["metadata"].get("deletionTimestamp"), obj
    assert obj["status"]["allocatedGPUs"] == 8 and obj["status"]["admittedGangs"] == 1
    allocated = live_scheduler.live.metrics.registry.get_sample_value(
        "gang_scheduler_allocated_gpus", {"queue": queue, "pool": tenant.pool})
    assert allocated == 8, "the running gang's GPUs left the accounting"
    (row,) = queue_rows([obj])
    assert row.state == "Terminating"
    # The gang ends: nothing uses the queue any more, so it goes.
    tenant.delete_pod(running[0])
    wait_for(lambda: queue_object(cp, queue) is None, 60, what="the Queue deleted")


def test_a_parent_queue_is_kept_while_a_queue_names_it_as_parent(
        control_plane: ControlPlane, tenant: Tenant,
        live_scheduler: InProcessScheduler) -> None:
    cp = control_plane
    parent, child = f"{tenant.queue}-parent", f"{tenant.queue}-child"
    for name, spec in ((parent, {"namespaces": [tenant.namespace]}),
                       (child, {"parent": parent, "namespaces": [tenant.namespace],
                                "quotas": [{"pool": tenant.pool, "nominal": {GPU: 8}}]})):
        rest.call(cp.custom.create_cluster_custom_object, *QUEUES,
                  {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
                   "metadata": {"name": name}, "spec": spec})
    policies = live_scheduler.live.policies
    wait_for(lambda: policies.current().queues.parent_of(child) == parent, 60,
             what="the child in force under its parent")
    wait_for(lambda: finalized(cp, parent) and finalized(cp, child), 60,
             what="the finalizer on both")
    delete_queue(cp, parent)
    wait_for(lambda: parent in policies.current().queues.terminating, 60,
             what="the parent terminating")
    live_scheduler.run_cycles(4)
    assert queue_object(cp, parent) is not None, "a parent deleted under its child"
    assert policies.current().queues.parent_of(child) == parent, "the child became a root"
    assert child not in policies.invalid
    delete_queue(cp, child)  # no gang of its own: both go
    wait_for(lambda: queue_object(cp, child) is None and queue_object(cp, parent) is None, 60,
             what="both Queues deleted")
    assert parent not in policies.current().queues.queues
