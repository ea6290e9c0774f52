"""Capacity planning: simulate several cluster sizes and find the smallest that is good enough.

Why processes: one simulation is CPU-bound Python, so sizes run in parallel, on local
processes (2 by default: this project's reference machine has 2 cores) or on a Ray cluster
(``simulator.executors``). The sweep is generic: it takes ``run_one(size) -> PolicyReport``,
which must be picklable, i.e. a module-level function, or `functools.partial` of one with
picklable arguments. A lambda or a closure fails up front with a clear message instead of
deep inside the pool.

"Good enough" means the p95 queueing delay is at most the target and (by default) every job
started: a cluster so small that some jobs never start can show a low p95 over the jobs that
did. The smallest size meeting the target is chosen; if a larger size misses it (queueing is
not always monotonic in size), `SweepResult.monotonic` is False so the caller can say so.
When none meets it, `suggest_size` names the next size to try (see there).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console

from scheduler.model.numerals import parse_int
from simulator.executors import DEFAULT_PROCESSES, Executor, LocalProcesses, RunFailed
from simulator.metrics import PolicyReport
from simulator.progress import progress_bar


class SweepError(RuntimeError):
    """One size's simulation failed; the message names the size and the error."""

    def __init__(self, size: int, failed: RunFailed) -> None:
        self.size = size
        super().__init__(f"sweep size {size} failed{failed.where}: {failed.reason}")


@dataclass(frozen=True, slots=True)
class SweepPoint:
    size: int
    report: PolicyReport
    meets_target: bool


@dataclass(frozen=True, slots=True)
class SweepResult:
    target_p95_seconds: float
    points: tuple[SweepPoint, ...]  # by size, ascending
    chosen: int | None  # smallest size meeting the target; None if none does

    @property
    def monotonic(self) -> bool:
        """True when every size above the chosen one also meets the target."""
        if self.chosen is None:
            return True
        return all(p.meets_target for p in self.points if p.size >= self.chosen)


def parse_sweep(text: str) -> tuple[str, tuple[int, ...]]:
    """``"a100=8,16,32"`` -> ``("a100", (8, 16, 32))``; sizes positive, sorted, unique."""
    pool, sep, values = text.partition("=")
    if not sep or not pool.strip():
        raise ValueError(f"--sweep: expected POOL=N1,N2,..., got {text!r}")
    try:
        sizes = sorted({parse_int(v) for v in values.split(",") if v.strip()})
    except ValueError:
        raise ValueError(f"--sweep {pool}: sizes must be integers, got {values!r}") from None
    if not sizes or sizes[0] < 1:
        raise ValueError(f"--sweep {pool}: need at least one size >= 1, got {values!r}")
    return pool.strip(), tuple(sizes)


def meets_target(
    report: PolicyReport, target_p95_seconds: float, require_all_started: bool
) -> bool:
    p95 = report.queueing_delay.p95
    if p95 is None or p95 > target_p95_seconds:
        return False
    return report.never_started == 0 or not require_all_started


def sweep(
    run_one: Callable[[int], PolicyReport],
    sizes: Sequence[int],
    *,
    target_p95_seconds: float,
    max_workers: int | None = None,
    executor: Executor | None = None,
    require_all_started: bool = True,
    progress: bool = True,
    console: Console | None = None,
) -> SweepResult:
    """Run *run_one* for every size (on *executor*; default: *max_workers* local processes)
    and pick the smallest size whose p95 queueing delay is at most *target_p95_seconds*."""
    ordered = sorted(set(sizes))
    if not ordered:
        raise ValueError("sweep needs at least one size")
    runner = executor or LocalProcesses(max_workers or DEFAULT_PROCESSES)
    with progress_bar(
        f"sweeping {len(ordered)} sizes", len(ordered), enabled=progress, console=console
    ) as advance:
        try:
            in_order = runner.run_all(run_one, ordered, lambda _i, _report: advance(1))
        except RunFailed as failed:
            raise SweepError(ordered[failed.index], failed) from failed.cause
    reports = dict(zip(ordered, in_order, strict=True))
    points = tuple(
        SweepPoint(s, reports[s], meets_target(reports[s], target_p95_seconds, require_all_started))
        for s in ordered
    )
    chosen = next((p.size for p in points if p.meets_target), None)
    return SweepResult(target_p95_seconds, points, chosen)


def suggest_size(result: SweepResult, gpus_per_node: int) -> int | None:
    """The next size to try when no size met the target (None when one did): the largest
    size tried, plus enough nodes of the pool to take what waited there on average over
    the arrival window (``backlog_gpus_mean``, GPUs of submitted work not running). Enough
    GPUs to run what ran and what waited is where queueing stops growing; the sweep around
    that size says how much less will do. At least one node more; twice the size when the
    report has no backlog figure (no arrivals recorded)."""
    if result.chosen is not None or not result.points:
        return None
    largest = result.points[-1]
    backlog = largest.report.backlog_gpus_mean
    if backlog is None:
        return 2 * largest.size
    return largest.size + max(1, math.ceil(backlog / max(1, gpus_per_node)))
