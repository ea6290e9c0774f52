"""A gang that cannot be formed still tells its user why (here: its PodGroup is missing), and
an annotation the scheduler cannot read is said, not ignored."""

from __future__ import annotations

import pytest

from scheduler.devcluster import rest
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
