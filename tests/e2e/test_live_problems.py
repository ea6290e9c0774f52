"""A gang that cannot be formed still tells its user why (here: its PodGroup is missing), and
an annotation the scheduler cannot read is said, not ignored."""

from __future__ import annotations

import time

import pytest

from scheduler.cli.explain import explain_text
from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import InProcessScheduler, Tenant, unschedulable_message

pytestmark = pytest.mark.e2e


def test_pods_naming_a_missing_podgroup_say_so(
        control_plane: ControlPlane, tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    tenant.create_nodes(1, gpus=8)
    tenant.create_pod("orphan-0", gpus=1, group="nowhere")
    message = wait_for(lambda: unschedulable_message(tenant.pods()["orphan-0"]), 30,
                       what="a PodScheduled=False message on orphan-0")
    assert "PodGroup" in message and "does not exist" in message, message
    assert tenant.bound(["orphan-0"]) == []
    # Creating the PodGroup forms the gang, and it binds.
    tenant.create_group("nowhere", 1)
    wait_for(lambda: tenant.all_bound(["orphan-0"]), 30, what="orphan-0 bound")


def test_an_unreadable_runtime_estimate_is_a_warning_event_on_the_pod(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """The issue's case: ``expected-runtime: "soon"`` was ignored without a word. The pod
    still runs (the estimate is only a hint), and its events say what was wrong."""
    tenant.create_nodes(1, gpus=8)
    created = tenant.create_pod("hint-0", gpus=1)
    rest.call(tenant.cp.core.patch_namespaced_pod, "hint-0", tenant.namespace,
              {"metadata": {"annotations": {"gangscheduler.io/expected-runtime": "soon"}}})
    warned = wait_for(lambda: tenant.events("InvalidAnnotation"), 30,
                      what="an InvalidAnnotation event")
    (event,) = warned
    assert event["type"] == "Warning"
    assert event["regarding"]["uid"] == created["metadata"]["uid"]
    assert "annotation gangscheduler.io/expected-runtime: cannot read 'soon'" in event["note"]
    assert "PT2H" in event["note"], event["note"]  # the accepted forms
    wait_for(lambda: tenant.all_bound(["hint-0"]), 30, what="hint-0 bound all the same")


def test_an_absurd_runtime_is_refused_and_the_gang_behind_it_keeps_being_told_why(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """Issue 32's case: ``expected-runtime: 99999999999999999999d`` on a running gang made the
    estimated start of the gang behind it ~8.6e24 s, which no status write could format: it
    failed every cycle, uncounted, the waiting PodGroup kept a stale reason and ``explain``
    crashed. Now the value is refused where it is read (a warning naming the bound), so the
    gang behind gets its reason, no write fails, and no view shows an absurd time."""
    tenant.create_nodes(1, gpus=8)
    running = tenant.create_gang("long", 2, gpus=4)
    for name in running:
        rest.call(tenant.cp.core.patch_namespaced_pod, name, tenant.namespace, {"metadata": {
            "annotations": {"gangscheduler.io/expected-runtime": "99999999999999999999d"}}})
    wait_for(lambda: tenant.all_bound(running), 60, what="the long gang bound")
    warned = wait_for(lambda: tenant.events("InvalidAnnotation"), 30,
                      what="an InvalidAnnotation event")
    assert all("'99999999999999999999d' is more than 365d, the longest duration the "
               "scheduler accepts" in e["note"] for e in warned), [e["note"] for e in warned]
    waiting = tenant.create_gang("next", 2, gpus=4)

    def condition() -> str:
        for c in tenant.group_status("next").get("conditions") or ():
            if c.get("type") == "Scheduled":
                return str(c.get("message") or "")
        return ""

    said = wait_for(condition, 60, what="the waiting PodGroup's Scheduled=False condition")
    assert said.startswith("Placement"), said
    live_scheduler.run_cycles(5)
    live = live_scheduler.live
    assert live.metrics.registry.get_sample_value(
        "gang_scheduler_status_writes_failed_total") == 0
    assert all(unschedulable_message(tenant.pods()[n]).startswith("Placement") for n in waiting)
    assert not tenant.group_status("next").get("estimatedStart")  # none made from the absurd
    view = live.view()
    assert view is not None
    row = next(g for g in view.pending if g.id == f"{tenant.namespace}/next")
    assert row.eta_seconds is None
    text, found = explain_text(f"{tenant.namespace}/next", live.cache, live.policies,
                               time.time())
    assert found and "pending: Placement" in text and "9999" not in text, text


def test_a_podgroup_and_pods_naming_different_queues_are_bound_and_told_which_is_used(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """The PodGroup's queue wins over its pods' (documented precedence), and a Warning
    ``InconsistentGang`` event on the PodGroup names both and the one used, once."""
    tenant.create_nodes(1, gpus=8)
    tenant.create_group("mixed", 2)
    pods = [f"mixed-{i}" for i in range(2)]
    for name in pods:
        tenant.create_pod(name, gpus=1, group="mixed",
                          labels={"gangscheduler.io/queue": "elsewhere"})
    wait_for(lambda: tenant.all_bound(pods), 60, what="the gang bound in the PodGroup's queue")
    (event,) = wait_for(lambda: tenant.events("InconsistentGang"), 30,
                        what="an InconsistentGang event")
    assert event["type"] == "Warning" and event["regarding"]["kind"] == "PodGroup", event
    assert event["note"] == (
        f"gang {tenant.namespace}/mixed: label gangscheduler.io/queue differs (PodGroup: "
        f"'{tenant.queue}'; its pods: 'elsewhere'); the gang uses "
        f"'{tenant.queue}', the first found in its PodGroup or Workload, then its Job or "
        "JobSet, then its pods by name"), event["note"]
    live_scheduler.run_cycles(5)
    assert len(tenant.events("InconsistentGang")) == 1
    (told,) = tenant.events("InconsistentGang")
    assert (told.get("series") or {}).get("count", 1) == 1  # told once, not once a cycle
