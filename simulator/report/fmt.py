"""Figures formatted for people, shared by the terminal table and the HTML report so both
show the same text for the same number; plus the list of summary rows both render.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from simulator.metrics import PolicyReport

MISSING = "-"


def duration(seconds: float | None) -> str:
    """``42s``, ``12.5m``, ``3.2h``, ``4.1d``: short, and sortable by eye within a column."""
    if seconds is None:
        return MISSING
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def percent(value: float | None) -> str:
    return MISSING if value is None else f"{100 * value:.1f}%"


def number(value: float | None, digits: int = 1) -> str:
    return MISSING if value is None else f"{value:,.{digits}f}"


def ratio(value: float | None) -> str:
    return MISSING if value is None else f"{value:.3f}"


class Better(Enum):
    HIGHER = "higher"
    LOWER = "lower"
    NEITHER = "neither"


@dataclass(frozen=True, slots=True)
class Row:
    label: str
    value: Callable[[PolicyReport], float | None]
    text: Callable[[float | None], str]
    better: Better = Better.NEITHER


def _count(value: float | None) -> str:
    return MISSING if value is None else f"{int(value):,}"


ROWS: tuple[Row, ...] = (
    Row("jobs finished", lambda r: r.finished, _count, Better.HIGHER),
    Row("jobs never started", lambda r: r.never_started, _count, Better.LOWER),
    Row("GPU utilization (busy)", lambda r: r.gpu_utilization, percent, Better.HIGHER),
    Row("GPU goodput (busy, less lost work)", lambda r: r.gpu_goodput, percent, Better.HIGHER),
    Row("GPU allocation (held)", lambda r: r.gpu_allocation, percent),
    Row("queueing delay mean", lambda r: r.queueing_delay.mean, duration, Better.LOWER),
    Row("queueing delay p50", lambda r: r.queueing_delay.p50, duration, Better.LOWER),
    Row("queueing delay p95", lambda r: r.queueing_delay.p95, duration, Better.LOWER),
    Row("queueing delay p99", lambda r: r.queueing_delay.p99, duration, Better.LOWER),
    Row("JCT mean", lambda r: r.jct.mean, duration, Better.LOWER),
    Row("JCT p50", lambda r: r.jct.p50, duration, Better.LOWER),
    Row("JCT p95", lambda r: r.jct.p95, duration, Better.LOWER),
    Row("JCT p99", lambda r: r.jct.p99, duration, Better.LOWER),
    Row("Jain index (share/entitlement)", lambda r: r.jain_index, ratio, Better.HIGHER),
    Row("Jain index (vs demand-capped share)", lambda r: r.jain_index_demand, ratio,
        Better.HIGHER),
    Row("stranded GPUs (mean)", lambda r: r.stranded_gpus_mean, number, Better.LOWER),
    Row("preemptions", lambda r: r.preemptions, _count, Better.LOWER),
    Row("GPU-hours lost to preemption/failure", lambda r: r.gpu_hours_lost, number,
        Better.LOWER),
    Row("GPU-hours idle in partial gangs", lambda r: r.gpu_hours_idle_partial, number,
        Better.LOWER),
    Row("GPU-hours allocated", lambda r: r.gpu_hours_allocated, number),
    Row("cost", lambda r: r.total_cost, lambda v: number(v, 2 if v is not None and v < 100 else 0)),
)


def best_columns(row: Row, reports: Sequence[PolicyReport]) -> set[int]:
    """Indexes of the policies with the best value of *row*; none when the row has no direction
    or every policy shows the same text (a difference nobody can see is not a win)."""
    values = [row.value(r) for r in reports]
    known = [v for v in values if v is not None]
    if row.better is Better.NEITHER or not known:
        return set()
    texts = [row.text(v) for v in values]
    if len(set(texts)) < 2:
        return set()
    best = row.text(max(known) if row.better is Better.HIGHER else min(known))
    return {i for i, t in enumerate(texts) if t == best}
