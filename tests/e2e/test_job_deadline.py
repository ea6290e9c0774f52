"""A Job past its ``activeDeadlineSeconds`` leaves the queue cleanly, and its reservation goes.

With the real Job controller: a big Job waits with a reservation on the pool's nodes (one node
is busy, the other kept for it), so a small Job that would fit on the kept node waits behind
it. When the big Job's deadline passes, the Job controller fails it (``DeadlineExceeded``) and
deletes its pods; gang-scheduler then drops the gang and its reservation, and the small Job
starts on the node that was kept. The order is checked on the objects' own timestamps (the
big Job's startTime plus its deadline, the small pod's PodScheduled condition), not on the
test's clock. Not on the Job's FailureTarget condition: past the deadline the Job controller
deletes the pods first and writes that condition after, in the same sync or a later one, so
the small Job may rightly start before the condition exists.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import wait_for
from tests.e2e.live import InProcessScheduler, Tenant, unschedulable_message

pytestmark = pytest.mark.e2e

DEADLINE_S = 30


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions") or ()
                 if c.get("type") == kind and c.get("status") == "True"), None)


def failing(job: dict[str, Any]) -> dict[str, Any] | None:
    """The condition by which the Job controller gives a Job up: ``FailureTarget`` first (its
    pods are then deleted), ``Failed`` once they are gone."""
    return condition(job, "FailureTarget") or condition(job, "Failed")


def stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_job_past_its_deadline_leaves_and_its_reservation_is_released(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    tenant.create_nodes(2, gpus=8)
    batch = client.BatchV1Api(tenant.cp.api)
    # Its deadline is also its runtime estimate: the big Job's reservation gets a start.
    tenant.create_job("busy", parallelism=1, gpus=8, activeDeadlineSeconds=3600)
    (busy,) = wait_for(lambda: list(tenant.job_pods("busy")), 60, what="the busy Job's pod")
    wait_for(lambda: tenant.all_bound([busy]), 60, what="the busy Job bound")

    tenant.create_job("big", parallelism=2, gpus=8, activeDeadlineSeconds=DEADLINE_S)
    def big_pods() -> list[str]:
        names = sorted(tenant.job_pods("big"))
        return names if len(names) == 2 else []

    big = wait_for(big_pods, 60, what="the big Job's two pods")
    wait_for(lambda: all("reserv" in unschedulable_message(tenant.pods().get(p, {})).lower()
                         for p in big), 60, what="the big Job waiting with a reservation")

    tenant.create_job("small", parallelism=1, gpus=8)
    (small,) = wait_for(lambda: list(tenant.job_pods("small")), 60, what="the small Job's pod")
    def small_reason() -> str:
        message = unschedulable_message(tenant.pods().get(small, {}))
        return "" if message.startswith("WaitingForMembers") else message

    reason = wait_for(small_reason, 60, what="the small Job's pending reason (its Job seen)")
    read_at = time.time()  # (the apiserver, the Job controller and the test share this clock)
    bound_then = tenant.bound([small])
    started = stamp(rest.call(batch.read_namespaced_job, "big", tenant.namespace)
                    ["status"]["startTime"]).timestamp()
    if read_at < started + DEADLINE_S:
        # Still within the deadline when the small Job was read (the Job controller deletes
        # the pods no sooner): the small Job waits for the big one's reservation.
        assert bound_then == [], reason
        assert "reserv" in reason.lower() and "big" in reason, reason

    wait_for(lambda: tenant.all_bound([small]), DEADLINE_S + 120,
             what="the small Job bound once the big one's deadline passed")
    big_job = wait_for(lambda: j if failing(j := rest.call(
        batch.read_namespaced_job, "big", tenant.namespace)) else {}, 60,
        what="the big Job's FailureTarget or Failed condition")
    failed = failing(big_job)
    assert failed is not None and failed.get("reason") == "DeadlineExceeded", failed
    scheduled = condition(tenant.pods()[small], "PodScheduled")
    assert scheduled is not None
    # The Job controller deletes the pods once startTime + deadline has passed (both in whole
    # seconds, the condition's time truncated too): not before that did the small Job start.
    deadline = stamp(big_job["status"]["startTime"]) + timedelta(seconds=DEADLINE_S)
    assert stamp(scheduled["lastTransitionTime"]) >= deadline, (
        "the small Job started before the big one's deadline", scheduled, big_job["status"])
    # The kept node is the one it got: the busy Job's node is still busy.
    assert tenant.nodes_of([small])[small] != tenant.nodes_of([busy])[busy]
    assert wait_for(lambda: not any(p in tenant.pods() for p in big) or None, 60,
                    what="the big Job's pods deleted by its controller")
