"""The metrics endpoint of a live scheduler, scraped as Prometheus would, and checked against
what happened: binds, pending gangs by queue and reason, GPUs by queue and pool, latency."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest

from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.ops_support import Ops, ops_for, scrape, value

pytestmark = pytest.mark.e2e


@pytest.fixture
def ops(control_plane: ControlPlane) -> Iterator[Ops]:
    yield from ops_for(control_plane)


def test_metrics_endpoint_reports_what_the_scheduler_did(ops: Ops) -> None:
    ops.tenant.create_nodes(2, gpus=8)
    queue = ops.queue("q", gpus=8)
    runner = ops.start_scheduler(metrics_port=True)
    port = runner.metrics_port  # type: ignore[attr-defined]
    bound = ops.gang("running", 2, 4, queue)
    wait_for(lambda: ops.tenant.all_bound(bound), 30, what="first gang bound")
    ops.gang("over-quota", 1, 8, queue)
    ops.gang("incomplete", 3, 1, queue, present=2)

    def settled() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        samples = scrape(port)
        waiting = value(samples, "gang_scheduler_pending_gangs", queue=queue,
                        reason="WaitingForMembers")
        quota = value(samples, "gang_scheduler_pending_gangs", queue=queue, reason="Quota")
        return samples if (waiting, quota) == (1, 1) else {}

    samples = wait_for(settled, 30, what="both pending gangs in the metrics")
    pool = ops.tenant.pool
    assert value(samples, "gang_scheduler_binds_total", result="success") == 1
    assert value(samples, "gang_scheduler_binds_total", result="failure") == 0
    assert value(samples, "gang_scheduler_pods_bound_total") == 2
    assert value(samples, "gang_scheduler_allocated_gpus", queue=queue, pool=pool) == 8
    assert value(samples, "gang_scheduler_nominal_gpus", queue=queue, pool=pool) == 8
    assert value(samples, "gang_scheduler_gang_scheduling_latency_seconds_count",
                 queue=queue) == 1
    assert value(samples, "gang_scheduler_fair_share", queue=queue) == 1.0
    assert value(samples, "gang_scheduler_usage_share", queue=queue) == 1.0
    assert value(samples, "gang_scheduler_is_leader") == 1
    assert value(samples, "gang_scheduler_cycles_total") >= 1
    assert value(samples, "gang_scheduler_cycle_duration_seconds_count") >= 1
    solves = sum(v for (name, _), v in samples.items()
                 if name == "gang_scheduler_solver_duration_seconds_count")
    assert solves >= 1
    for path in ("/healthz", "/readyz"):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            assert resp.status == 200
