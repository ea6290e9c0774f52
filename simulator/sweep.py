"""Capacity planning: simulate several cluster sizes and find the smallest that is good enough.

Why processes: one simulation is CPU-bound Python, so sizes run in parallel processes
(`ProcessPoolExecutor`, 2 workers by default: this project's reference machine has 2 cores).
The sweep is generic: it takes ``run_one(size) -> PolicyReport``, which must be picklable, i.e.
a module-level function, or `functools.partial` of one with picklable arguments. A lambda or a
closure fails up front with a clear message instead of deep inside the pool.

"Good enough" means the p95 queueing delay is at most the target and (by default) every job
started: a cluster so small that some jobs never start can show a low p95 over the jobs that
did. The smallest size meeting the target is chosen; if a larger size misses it (queueing is
not always monotonic in size), `SweepResult.monotonic` is False so the caller can say so.
When none meets it, `suggest_size` names the next size to try (see there).
"""

from __future__ import annotations

import math
import os
import pickle
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass

from rich.console import Console

from scheduler.model.numerals import parse_int
from simulator.metrics import PolicyReport
from simulator.progress import progress_bar

DEFAULT_WORKERS = 2


class SweepError(RuntimeError):
    """One size's simulation failed; the message names the size and the error."""

    def __init__(self, size: int, exc: BaseException) -> None:
        self.size = size
        detail = str(exc).strip().splitlines()
        reason = f"{type(exc).__name__}: {detail[0]}" if detail else type(exc).__name__
        super().__init__(f"sweep size {size} failed: {reason}")


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
    require_all_started: bool = True,
    progress: bool = True,
    console: Console | None = None,
) -> SweepResult:
    """Run *run_one* for every size (in parallel when *max_workers* > 1) and pick the smallest
    size whose p95 queueing delay is at most *target_p95_seconds*."""
    ordered = sorted(set(sizes))
    if not ordered:
        raise ValueError("sweep needs at least one size")
    workers = max(1, min(max_workers or DEFAULT_WORKERS, len(ordered), os.cpu_count() or 1))
    reports: dict[int, PolicyReport] = {}
    with progress_bar(
        f"sweeping {len(ordered)} sizes", len(ordered), enabled=progress, console=console
    ) as advance:
        if workers == 1:
            for size in ordered:
                reports[size] = _call(run_one, size)
                advance(1)
        else:
            _check_picklable(run_one)
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures: dict[Future[PolicyReport], int] = {
                    pool.submit(run_one, size): size for size in ordered
                }
                try:
                    for future in as_completed(futures):
                        size = futures[future]
                        reports[size] = _result(future, size)
                        advance(1)
                except SweepError:
                    pool.shutdown(cancel_futures=True)  # do not wait for the other sizes
                    raise
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


def _call(run_one: Callable[[int], PolicyReport], size: int) -> PolicyReport:
    try:
        return run_one(size)
    except Exception as exc:
        raise SweepError(size, exc) from exc


def _result(future: Future[PolicyReport], size: int) -> PolicyReport:
    try:
        return future.result()
    except Exception as exc:  # the worker's exception, or BrokenProcessPool if it died
        raise SweepError(size, exc) from exc


def _check_picklable(run_one: Callable[[int], PolicyReport]) -> None:
    try:
        pickle.dumps(run_one)
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise TypeError(
            "sweep: run_one must be picklable to run in worker processes (a module-level "
            f"function or functools.partial of one), got {run_one!r}: {exc}"
        ) from exc
