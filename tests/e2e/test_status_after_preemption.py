"""Issue 16, on a real control plane: after preemption the PodGroup still said ``Running``
with no pods left. Now its status follows the pods at once: the victim's PodGroup goes back
to ``Pending`` (reason ``MembersGone``, no member counted running) while its pods terminate,
and the preemptor's PodGroup says ``Scheduled``/``Running`` once it binds. The victim's pods
and PodGroup also get the ``Preempted`` story as events where ``kubectl describe`` looks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.ops_support import Ops, ops_for

pytestmark = pytest.mark.e2e

LINGER_GRACE_S = 120  # the victims linger while terminating until the test releases them


@pytest.fixture
def ops(control_plane: ControlPlane) -> Iterator[Ops]:
    yield from ops_for(control_plane)


def test_a_preempted_gang_s_podgroup_is_not_left_running(ops: Ops) -> None:
    ops.tenant.create_nodes(1, gpus=8)
    queue = ops.queue("q", gpus=64, preemption={"withinQueue": "LowerPriority"})
    low, high = ops.priority_class("low", 100), ops.priority_class("high", 1000)
    ops.start_scheduler(eviction_grace_period_seconds=LINGER_GRACE_S)
    victim = ops.gang("victim", 2, 4, queue, priority_class=low, linger=True)
    placed = wait_for(lambda: s if (s := ops.tenant.group_status("victim")).get("phase")
                      in ("Scheduled", "Running") else {}, 60, what="victim PodGroup placed")
    assert placed["scheduled"] == 2
    preemptor = ops.gang("preemptor", 1, 8, queue, priority_class=high)

    def requeued() -> dict[str, Any]:
        status = ops.tenant.group_status("victim")
        return status if status.get("phase") == "Pending" else {}

    status = wait_for(requeued, 60, what="victim PodGroup Pending while its pods terminate")
    assert (status["running"], status["scheduled"]) == (0, 0), status
    condition = status["conditions"][0]
    assert condition["reason"] == "MembersGone", condition
    assert "2 terminating" in condition["message"], condition
    assert set(ops.tenant.pods()) >= set(victim), "the victims are still there, terminating"
    # kubectl describe podgroup victim: who preempted it (issue 32: only its pods were told).
    told = wait_for(lambda: [e for e in ops.tenant.events("Preempted")
                             if e["regarding"]["kind"] == "PodGroup"], 30,
                    what="a Preempted event regarding the victim's PodGroup")
    assert [(e["regarding"]["name"], e["type"]) for e in told] == [("victim", "Warning")], told
    assert f"preempted by gang {ops.ns}/preemptor" in told[0]["note"], told
    for name in victim:
        ops.release(name)
    wait_for(lambda: ops.tenant.all_bound(preemptor), 60, what="preemptor bound")
    wait_for(lambda: ops.tenant.group_status("preemptor").get("phase")
             in ("Scheduled", "Running"), 60, what="preemptor PodGroup placed")
    assert ops.tenant.group_status("victim").get("phase") == "Pending"
