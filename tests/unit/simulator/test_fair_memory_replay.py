"""Fair share with memory in the simulator (simulator/fair_memory.py), on the shipped two-tenant
week: team-a borrowed all 32 GPUs for a week, team-b nothing; both submit alike on Monday.

With the two-day half-life team-b runs first and gets most of Monday's GPUs; with none (today's
fair share) Monday is split evenly. Same ``decide`` as the live scheduler, through the loop's
memory keeper.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator import fair_memory
from simulator.session import SessionSpec, load_inputs

SAMPLES = Path(__file__).resolve().parents[3] / "simulator" / "samples"
MONDAY = 7 * 86400.0
WINDOW = 16 * 3600.0


@pytest.fixture(scope="module")
def comparison() -> fair_memory.Comparison:
    spec = SessionSpec(cluster=str(SAMPLES / "fair_memory_cluster.yaml"),
                       trace=str(SAMPLES / "fair_memory_trace.csv"),
                       queues=str(SAMPLES / "fair_memory_queues.yaml"))
    return fair_memory.compare(load_inputs(spec), since=MONDAY, window=WINDOW)


def test_without_memory_monday_is_split_evenly(comparison: fair_memory.Comparison) -> None:
    a, b = comparison.without
    assert (a.queue, b.queue) == ("team-a", "team-b")
    assert a.gpu_hours_in_window == b.gpu_hours_in_window == 32 * 16 / 2
    assert a.mean_wait_hours == b.mean_wait_hours


def test_with_memory_the_team_that_borrowed_nothing_runs_first(
        comparison: fair_memory.Comparison) -> None:
    a, b = comparison.with_memory
    assert a.jobs == b.jobs == 16
    # team-b gets most of Monday's first 16 hours, and waits far less than team-a.
    assert b.gpu_hours_in_window > 0.75 * 32 * 16
    assert a.gpu_hours_in_window + b.gpu_hours_in_window == 32 * 16  # no GPU left idle
    assert b.mean_wait_hours < a.mean_wait_hours
    assert b.mean_wait_hours < comparison.without[1].mean_wait_hours
    # Memory reorders, it does not make the week longer: the last job starts as late.
    assert max(a.max_wait_hours, b.max_wait_hours) == max(
        f.max_wait_hours for f in comparison.without)


def test_the_table_says_both_runs(comparison: fair_memory.Comparison) -> None:
    lines = fair_memory.table(comparison)
    assert lines[0].startswith("| queue | half-life |")
    assert sum("| 2 d |" in ln for ln in lines) == 2 and sum("| off |" in ln for ln in lines) == 2


def test_compare_needs_a_half_life() -> None:
    spec = SessionSpec(cluster=str(SAMPLES / "fair_memory_cluster.yaml"),
                       trace=str(SAMPLES / "fair_memory_trace.csv"))
    with pytest.raises(ValueError, match="usageHalfLifeSeconds"):
        fair_memory.compare(load_inputs(spec), since=MONDAY, window=WINDOW)
