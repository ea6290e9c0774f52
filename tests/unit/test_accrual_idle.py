"""The accrual's two sinks and its idle GPUs: the counters and the chargeback ledger take the
same charged intervals; idle GPUs (``Accrual.set_idle``) are charged like allocation, never
more than allocated, and dropped when the allocation ends.

Run through the real loop, as in test_accounting.
"""

from __future__ import annotations

import math

import pytest

from scheduler.run.accrual import Accrual
from scheduler.run.config import PricingConfig
from scheduler.run.loop import Scheduler
from scheduler.run.metrics import SchedulerMetrics
from tests.unit.test_loop_metrics import TEAM, Clock, gang_pods, make, node, sample

KEY = ("team", "ns", "p")
LABELS = {"queue": "team", "namespace": "ns", "pool": "p"}


def running() -> tuple[Accrual, SchedulerMetrics, Scheduler, Clock]:
    """A gang of 8 GPUs bound at t=100 on a cluster priced 3.6 EUR per GPU-hour."""
    metrics = SchedulerMetrics(pricing=PricingConfig(currency="EUR", gpu_hour={"p": 3.6}))
    sched, m, clock = make(gang_pods("g1", 2, 4), [node("n1"), node("n2")], TEAM,
                           metrics=metrics)
    sched.run_once()
    accrual = sched.observer.accrual
    assert accrual is not None
    return accrual, m, sched, clock


def test_no_source_no_idle_series_and_used_unknown() -> None:
    accrual, m, _sched, clock = running()
    clock.now += 3600
    (row,) = accrual.rows("day")
    assert row.allocated_gpu_hours == pytest.approx(8.0)
    assert row.idle_gpu_hours is None and row.used_gpu_hours is None
    assert m.registry.get_sample_value("gang_scheduler_idle_gpu_seconds_total", LABELS) is None


def test_idle_is_charged_from_when_it_is_told_and_capped_at_allocated() -> None:
    accrual, m, _sched, clock = running()
    clock.now += 10
    accrual.set_idle({KEY: 3})  # 10 s unknown, then 3 of 8 idle
    clock.now += 20
    assert sample(m, "gang_scheduler_idle_gpu_seconds_total", **LABELS) == 60
    accrual.set_idle({KEY: 99, ("other", "ns", "p"): 4})  # capped at 8; not allocated: ignored
    clock.now += 10
    assert sample(m, "gang_scheduler_idle_gpu_seconds_total", **LABELS) == 60 + 80
    assert sample(m, "gang_scheduler_allocated_gpu_seconds_total", **LABELS) == 320
    (row,) = accrual.rows("day")
    assert row.idle_gpu_hours is None  # the first 10 s of the day were not known


def test_idle_ends_with_the_allocation() -> None:
    # g1 ends with 2 of its GPUs idle; g2, of the same key, is allocated afterwards: its GPUs
    # are not idle until the source says so.
    accrual, m, sched, clock = running()
    accrual.set_idle({KEY: 2})
    clock.now += 10
    for uid in ("uid-g1-0", "uid-g1-1"):
        sched.cache.delete_pod(uid)
    sched.run_once()
    assert sample(m, "gang_scheduler_idle_gpu_seconds_total", **LABELS) == 20
    for pod in gang_pods("g2", 1, 4):
        sched.cache.upsert_pod(pod)
    sched.run_once()
    clock.now += 10
    sched.run_once()
    assert sample(m, "gang_scheduler_allocated_gpu_seconds_total", **LABELS) == 80 + 40
    assert sample(m, "gang_scheduler_idle_gpu_seconds_total", **LABELS) == 20


def test_the_ledger_and_the_counters_agree() -> None:
    accrual, m, sched, clock = running()
    accrual.set_idle({KEY: 1})
    for step in (7.5, 1234.0, 86400.0, 3.25):
        clock.now += step
        sched.run_once()
    rows = accrual.rows("month")
    allocated = sample(m, "gang_scheduler_allocated_gpu_seconds_total", **LABELS)
    cost = sample(m, "gang_scheduler_gpu_cost_total", currency="EUR", **LABELS)
    idle = sample(m, "gang_scheduler_idle_gpu_seconds_total", **LABELS)
    assert math.isclose(sum(r.allocated_gpu_hours for r in rows) * 3600, allocated,
                        rel_tol=1e-9)
    assert math.isclose(sum(r.cost for r in rows), cost, rel_tol=1e-9)
    assert math.isclose(sum(r.idle_gpu_hours or 0.0 for r in rows) * 3600, idle, rel_tol=1e-9)
    assert allocated == pytest.approx(8 * (7.5 + 1234 + 86400 + 3.25))
