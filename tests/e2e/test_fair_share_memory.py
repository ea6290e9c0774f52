"""Fair share with memory on a real control plane: what a queue borrowed is written on its
status (``rememberedGPUHours`` with ``rememberedAt``, kept by the CRD's schema), survives a
scheduler restart, and orders the queues after it.

Two queues with no quota of their own (everything they run is borrowed from ``org``), equal
weights. A first scheduler runs team a on all 16 GPUs; it is stopped, a's gang is deleted, and
each queue submits a 16-GPU gang, a's first. A second scheduler (a fresh process memory) starts
from the status: a is remembered, b is not, so b's gang starts and a's waits. Without memory the
two would tie at a share of 0 and a (first by name, its gang older) would start.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from scheduler.model.durations import parse_time
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.ops_support import Ops, ops_for

pytestmark = pytest.mark.e2e

MEMORY = {"fairShare": {"usageHalfLifeSeconds": 3600}}


@pytest.fixture
def ops(control_plane: ControlPlane) -> Iterator[Ops]:
    yield from ops_for(control_plane)


def test_remembered_usage_survives_a_restart_and_orders_the_queues(ops: Ops) -> None:
    ops.tenant.create_nodes(2, gpus=8)
    org = ops.queue("org", gpus=16)
    a = ops.queue("a", gpus=0, parent="org")
    b = ops.queue("b", gpus=0, parent="org")
    assert org
    first = ops.start_scheduler(scheduler_policy=MEMORY)
    a1 = ops.gang("a1", 2, 8, a)
    wait_for(lambda: ops.tenant.all_bound(a1), 30, what="a's gang on all 16 GPUs")
    # A pod that cannot fit makes cycles run; each writes a's remembered GPU-hours so far.
    ops.pod("poke", 8, b)

    def remembered() -> dict[str, object]:
        status = ops.queue_status(a)
        return status if (status.get("rememberedGPUHours") or 0) > 0 else {}

    status = wait_for(remembered, 60, what="a's remembered GPU-hours on its status")
    assert parse_time(str(status["rememberedAt"])) <= time.time() + 1
    assert ops.queue_status(b).get("rememberedGPUHours") == 0
    first.stop()

    for pod in (*a1, "poke"):
        ops.tenant.delete_pod(pod)
    wait_for(lambda: not set(ops.tenant.pods()) & {*a1, "poke"}, 30, what="the pods gone")
    a2 = ops.gang("a2", 2, 8, a)
    b2 = ops.gang("b2", 2, 8, b)
    second = ops.start_scheduler(scheduler_policy=MEMORY)
    wait_for(lambda: ops.tenant.all_bound(b2), 30, what="b's gang first")
    second.run_cycles()
    assert ops.tenant.bound(a2) == []
    memory = second.live.scheduler.remembered.gpu_seconds(time.time())
    assert memory.get(a, 0) > 0, memory  # restored from the status, not rebuilt
