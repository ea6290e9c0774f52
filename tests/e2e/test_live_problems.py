"""A gang that cannot be formed still tells its user why (here: its PodGroup is missing)."""

from __future__ import annotations

import pytest

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
