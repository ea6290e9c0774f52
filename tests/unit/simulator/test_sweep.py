"""The capacity sweep: parallel runs, the smallest size meeting the p95 target, clear failures."""

from __future__ import annotations

import dataclasses
import functools
import io

import pytest
from rich.console import Console

from simulator.metrics import JobOutcome, PolicyReport, UtilizationSample, compute_report
from simulator.sweep import SweepError, parse_sweep, suggest_size, sweep


def fake_run(size: int, stuck_below: int = 0, bumpy: int = -1) -> PolicyReport:
    """A run whose queueing delay is 1000 / size seconds (size 10 -> 100 s); sizes below
    *stuck_below* leave one job never started; size *bumpy* is unexpectedly slow."""
    delay = 1000.0 / size if size != bumpy else 1e6
    outcomes = [JobOutcome("a", "q", 1, 0.0, delay, delay + 10.0)]
    if size < stuck_below:
        outcomes.append(JobOutcome("big", "q", 999, 0.0, None, None))
    samples = [UtilizationSample(0.0, size, 0, 0, 0), UtilizationSample(delay, size, 1, 1, 0)]
    return compute_report(f"size-{size}", outcomes, samples, end_time=delay + 10.0)


def fail_on_three(size: int) -> PolicyReport:
    if size == 3:
        raise ValueError("boom")
    return fake_run(size)


@pytest.mark.parametrize("workers", [1, 2])
def test_picks_the_smallest_size_meeting_the_target(workers: int) -> None:
    result = sweep(fake_run, [40, 5, 10, 20], target_p95_seconds=100.0, max_workers=workers,
                   progress=False)
    assert [p.size for p in result.points] == [5, 10, 20, 40]
    assert [p.meets_target for p in result.points] == [False, True, True, True]
    assert result.chosen == 10 and result.monotonic
    assert result.points[1].report.queueing_delay.p95 == 100.0


def test_parallel_and_serial_give_identical_reports() -> None:
    serial = sweep(fake_run, [4, 8], target_p95_seconds=1.0, max_workers=1, progress=False)
    parallel = sweep(fake_run, [4, 8], target_p95_seconds=1.0, max_workers=2, progress=False)
    assert serial == parallel and serial.chosen is None


def test_never_started_jobs_disqualify_a_size_unless_allowed() -> None:
    run = functools.partial(fake_run, stuck_below=20)
    strict = sweep(run, [10, 20], target_p95_seconds=100.0, progress=False)
    assert strict.chosen == 20
    lenient = sweep(run, [10, 20], target_p95_seconds=100.0, progress=False,
                    require_all_started=False)
    assert lenient.chosen == 10


def test_non_monotonic_results_are_flagged() -> None:
    result = sweep(functools.partial(fake_run, bumpy=20), [10, 20, 40],
                   target_p95_seconds=100.0, max_workers=1, progress=False)
    assert result.chosen == 10 and not result.monotonic


def test_unpicklable_run_one_fails_up_front() -> None:
    with pytest.raises(TypeError, match="must be picklable"):
        sweep(lambda size: fake_run(size), [1, 2], target_p95_seconds=1.0, max_workers=2,
              progress=False)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_size_is_named(workers: int) -> None:
    with pytest.raises(SweepError, match=r"^sweep size 3 failed: ValueError: boom$"):
        sweep(fail_on_three, [2, 3], target_p95_seconds=1.0, max_workers=workers, progress=False)


def test_progress_bar_reports_the_sizes() -> None:
    out = io.StringIO()
    sweep(fake_run, [10, 20], target_p95_seconds=100.0, max_workers=1,
          console=Console(file=out, width=100, force_terminal=False))
    assert "sweeping 2 sizes" in out.getvalue() and "2/2" in out.getvalue()


@pytest.mark.parametrize(
    ("text", "expected"),
    [("a100=32,8,16,8", ("a100", (8, 16, 32))), (" t4 = 4 ", ("t4", (4,)))],
)
def test_parse_sweep(text: str, expected: tuple[str, tuple[int, ...]]) -> None:
    assert parse_sweep(text) == expected


@pytest.mark.parametrize("text", ["a100", "=8", "a100=", "a100=8,x", "a100=0,8"])
def test_parse_sweep_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="--sweep"):
        parse_sweep(text)


@pytest.mark.parametrize(("backlog", "suggested"), [
    (166.0, 32 + 21),  # the README's first sweep: 166 GPUs waited on 32 8-GPU nodes
    (0.4, 33),  # never less than one node more
    (None, 64),  # no backlog figure: twice the largest size
])
def test_a_missed_target_suggests_the_next_size(backlog: float | None, suggested: int) -> None:
    result = sweep(fake_run, [16, 32], target_p95_seconds=1.0, max_workers=1, progress=False)
    assert result.chosen is None
    last = result.points[-1]
    result = dataclasses.replace(result, points=(*result.points[:-1], dataclasses.replace(
        last, report=dataclasses.replace(last.report, backlog_gpus_mean=backlog))))
    assert suggest_size(result, gpus_per_node=8) == suggested


def test_no_suggestion_once_a_size_meets_the_target() -> None:
    result = sweep(fake_run, [5, 10], target_p95_seconds=100.0, max_workers=1, progress=False)
    assert result.chosen == 10 and suggest_size(result, gpus_per_node=8) is None
