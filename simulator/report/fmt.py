"""Figures formatted for people, shared by the terminal table and the HTML report so both
show the same text for the same number; plus the list of summary rows both render.

Every label carries its unit, and one time unit is used everywhere a reader compares times
(tables, plots, the sweep): hours. A delay of 30 s reads 0.01 h next to a p95 of 115 h, which
is what a capacity planner compares; mixing "30s" and "4.8d" in one column invites misreading.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from simulator.metrics import FAIRNESS_WINDOW, PolicyReport

_WINDOW = f"{FAIRNESS_WINDOW / 3600:g} h"

MISSING = "-"


def hours(seconds: float | None) -> str:
    """Seconds as hours, two decimals: the one time unit of every report."""
    return MISSING if seconds is None else f"{seconds / 3600:,.2f}"


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


def _points(share: float | None) -> float | None:
    """A fraction of the cluster as percentage points."""
    return None if share is None else 100 * share


def _count(value: float | None) -> str:
    return MISSING if value is None else f"{int(value):,}"


ROWS: tuple[Row, ...] = (
    Row("jobs finished", lambda r: r.finished, _count, Better.HIGHER),
    Row("jobs never started", lambda r: r.never_started, _count, Better.LOWER),
    Row("utilization, whole horizon (%)", lambda r: r.gpu_utilization,
        percent, Better.HIGHER),
    Row("utilization, arrival window (%)", lambda r: r.gpu_utilization_arrivals, percent,
        Better.HIGHER),
    Row("utilization, steady state (%)", lambda r: r.gpu_utilization_steady, percent,
        Better.HIGHER),
    Row("goodput, whole horizon (%)", lambda r: r.gpu_goodput, percent, Better.HIGHER),
    Row("allocation, whole horizon (%)", lambda r: r.gpu_allocation,
        percent),
    Row("backlog, arrival window (GPUs)", lambda r: r.backlog_gpus_mean, number,
        Better.LOWER),
    Row("queueing delay mean (h)", lambda r: r.queueing_delay.mean, hours, Better.LOWER),
    Row("queueing delay p50 (h)", lambda r: r.queueing_delay.p50, hours, Better.LOWER),
    Row("queueing delay p95 (h)", lambda r: r.queueing_delay.p95, hours, Better.LOWER),
    Row("queueing delay p99 (h)", lambda r: r.queueing_delay.p99, hours, Better.LOWER),
    Row("JCT mean (h)", lambda r: r.jct.mean, hours, Better.LOWER),
    Row("JCT p50 (h)", lambda r: r.jct.p50, hours, Better.LOWER),
    Row("JCT p95 (h)", lambda r: r.jct.p95, hours, Better.LOWER),
    Row("JCT p99 (h)", lambda r: r.jct.p99, hours, Better.LOWER),
    Row("fairness (Jain index, 1 = fair)", lambda r: r.jain_index_demand,
        ratio, Better.HIGHER),
    Row(f"fair-share gap, worst {_WINDOW} (pts)", lambda r: _points(r.fair_share_gap_max),
        number, Better.LOWER),
    Row(f"fair-share gap, mean {_WINDOW} (pts)", lambda r: _points(r.fair_share_gap_mean),
        number, Better.LOWER),
    Row("stranded GPUs (mean)", lambda r: r.stranded_gpus_mean,
        number, Better.LOWER),
    Row("preemptions (gangs)", lambda r: r.preemptions, _count, Better.LOWER),
    Row("work lost (GPU-h)", lambda r: r.gpu_hours_lost, number,
        Better.LOWER),
    Row("jobs stopped by guards", lambda r: r.stopped, _count),
    Row("checkpoint writes (GPU-h)", lambda r: r.gpu_hours_checkpointing, number,
        Better.LOWER),
    Row("idle in partial gangs (GPU-h)", lambda r: r.gpu_hours_idle_partial, number,
        Better.LOWER),
    Row("allocated (GPU-h)", lambda r: r.gpu_hours_allocated, number),
    Row("cost ({currency})", lambda r: r.total_cost,
        lambda v: number(v, 2 if v is not None and v < 100 else 0)),
)

#: What the rows mean, in sentences printed under every table that shows them.
FAIRNESS = ("Utilization is busy GPU-time (gangs running whole) over GPU-time; goodput "
            "leaves out work later thrown away (preemption, failures) and checkpoint writes; "
            "allocation counts every GPU allocated, partly placed gangs included. The arrival "
            "window runs from the first submission to the last; steady state leaves out its "
            "first tenth; the backlog is the mean GPUs of submitted work not running. "
            "Fairness is Jain's index over queues of GPU share allocated divided by fair share "
            "(the entitlement, capped by what the queue asked for at that moment, what idle "
            "queues leave going to waiting ones), time-weighted: 1.0 means every queue got "
            "what it was owed, 1/n that one of n queues got everything. The fair-share gap is, "
            f"per {_WINDOW} window, the largest difference between a queue's share of the "
            "cluster's GPU-time and the share it was owed, in percentage points: the worst "
            "window and the mean over windows. Times are in hours.")


def label(row: Row, reports: Sequence[PolicyReport]) -> str:
    """The row's label with the run's currency filled in."""
    currency = reports[0].currency if reports else "USD"
    return row.label.replace("{currency}", currency)


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
