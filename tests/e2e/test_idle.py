"""An idle cluster costs no decision cycles: with 10 gangs waiting and nothing changing, the
scheduler runs no cycle for a minute and no waiting pod's ``FailedScheduling`` series grows;
the first change afterwards is still decided at once.

On the real dev cluster (kwok nodes, a busy gang Running on them), with the in-process
scheduler at the tests' settings (events folded into their series every second, so a series
that grew would show within the minute). The loop keeps passing meanwhile (its heartbeat):
each pass finds nothing changed and nothing due. ``benchmarks/bench_idle.py`` measures the
same minute's cycles, CPU seconds and series counts, against another checkout too.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.cluster_api import wait_for
from tests.e2e.live import InProcessScheduler, Tenant, unschedulable_message

pytestmark = pytest.mark.e2e

QUIET_S = 60.0
GANGS = 10


def series(tenant: Tenant) -> dict[str, int]:
    """Each FailedScheduling event of the namespace (by name) -> its occurrences so far."""
    return {e["metadata"]["name"]: int((e.get("series") or {}).get("count") or 1)
            for e in tenant.events("FailedScheduling")}


def settled(runner: InProcessScheduler, quiet_s: float = 10.0) -> int:
    """Wait until no cycle has run for *quiet_s* seconds (the first cycles' writes come back
    as watch events, and a change among them runs one more); the cycle count then."""
    last: list[Any] = [runner.live.scheduler.cycles, time.monotonic()]

    def quiet() -> bool:
        now = runner.live.scheduler.cycles
        if now != last[0]:
            last[:] = [now, time.monotonic()]
        return time.monotonic() - last[1] >= quiet_s

    wait_for(quiet, 120, 0.5, what=f"{quiet_s:.0f}s without a cycle")
    return int(last[0])


def test_an_idle_cluster_runs_no_cycle_and_grows_no_event_series(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    tenant.create_nodes(2, gpus=8)
    busy = tenant.create_gang("busy", 2, gpus=8)
    wait_for(lambda: tenant.all_bound(busy), 60, what="the busy gang bound")
    waiting = [p for i in range(GANGS) for p in tenant.create_gang(f"w{i}", 2, gpus=8)]
    wait_for(lambda: all(unschedulable_message(p).startswith("Placement")
                         for n, p in tenant.pods().items() if n in waiting), 60,
             what="every waiting pod told why")
    wait_for(lambda: {e["regarding"]["name"] for e in tenant.events("FailedScheduling")}
             >= set(waiting), 60, what="a FailedScheduling event on every waiting pod")
    cycles = settled(live_scheduler)
    assert live_scheduler.live.actuator.writer.flush(60)
    before, passes = series(tenant), live_scheduler.live.passes
    registry = live_scheduler.live.metrics.registry
    counted = registry.get_sample_value("gang_scheduler_cycles_total")
    time.sleep(QUIET_S)
    assert live_scheduler.live.scheduler.cycles == cycles, "a cycle ran with nothing changed"
    assert registry.get_sample_value("gang_scheduler_cycles_total") == counted
    assert series(tenant) == before, "an event series grew with nothing changed"
    assert live_scheduler.live.passes > passes  # the loop is alive, and found nothing to do
    assert tenant.bound(waiting) == []
    # The first change after the quiet minute is decided at once.
    late = tenant.create_gang("late", 1, gpus=8)
    wait_for(lambda: unschedulable_message(tenant.pods()[late[0]]).startswith("Placement"),
             30, what="the new gang told why it waits")
    assert live_scheduler.live.scheduler.cycles > cycles
