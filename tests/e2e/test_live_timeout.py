"""scheduleTimeoutSeconds ends a gang's wait with a terminal condition, not a retry storm."""

from __future__ import annotations

import pytest

from scheduler.devcluster import rest
from scheduler.model.workloads import QUEUE_LABEL
from tests.e2e.cluster_api import (
    PODGROUP_GROUP,
    PODGROUP_PLURAL,
    PODGROUP_VERSION,
    ControlPlane,
    wait_for,
)
from tests.e2e.live import InProcessScheduler, Tenant, unschedulable_message

pytestmark = pytest.mark.e2e


def test_gang_past_its_timeout_is_given_up_once(
        control_plane: ControlPlane, tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    tenant.create_nodes(1, gpus=4)
    body = {"apiVersion": f"{PODGROUP_GROUP}/{PODGROUP_VERSION}", "kind": "PodGroup",
            "metadata": {"name": "big", "labels": {QUEUE_LABEL: tenant.queue}},
            "spec": {"minMember": 2, "scheduleTimeoutSeconds": 3}}
    rest.call(control_plane.custom.create_namespaced_custom_object, PODGROUP_GROUP,
              PODGROUP_VERSION, tenant.namespace, PODGROUP_PLURAL, body)
    for i in range(2):
        tenant.create_pod(f"big-{i}", gpus=4, group="big")  # 8 GPUs on a 4-GPU pool

    status = wait_for(lambda: (s := tenant.group_status("big")).get("phase") == "Failed" and s,
                      30, what="PodGroup big Failed after its timeout")
    # The pods' conditions are their own writes, after the PodGroup's or before it.
    def timed_out() -> dict[str, str]:
        messages = {n: unschedulable_message(p) for n, p in tenant.pods().items()}
        return messages if all(messages.get(f"big-{i}", "").startswith("ScheduleTimeout")
                               for i in range(2)) else {}

    try:
        wait_for(timed_out, 30, what="ScheduleTimeout on both pods")
    except AssertionError:
        raise AssertionError({n: unschedulable_message(p)
                              for n, p in tenant.pods().items()}) from None
    assert tenant.bound(["big-0", "big-1"]) == []
    # Given up: no new decisions or events keep coming for it. Counted from a settled state
    # (cycles run and their writes out), so that the give-up's own events are in `before`.
    live_scheduler.run_cycles(2)
    before = len(tenant.events("FailedScheduling"))
    live_scheduler.run_cycles(6)
    assert len(tenant.events("FailedScheduling")) <= before + 1, tenant.events("FailedScheduling")
    assert tenant.group_status("big")["phase"] == "Failed", status
