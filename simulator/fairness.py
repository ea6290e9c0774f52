"""Demand-aware fairness: what each queue was owed at each instant, and how close it came.

Why its own module: "share against entitlement" alone calls a queue starved when it simply had
nothing to run. Here a queue is owed its entitlement capped by its demand at that instant (the
GPUs of its jobs submitted and not finished), with the unused part flowing to the queues that
wait (`stats.water_fill`); the Jain index of allocated / owed, weighted by time, then says whether
the policy shared fairly when it mattered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from simulator import stats


class Outcome(Protocol):
    """The fields of `metrics.JobOutcome` this module reads."""

    @property
    def queue(self) -> str: ...
    @property
    def gpus(self) -> int: ...
    @property
    def submit_time(self) -> float: ...
    @property
    def end_time(self) -> float | None: ...
    @property
    def stop_time(self) -> float | None: ...


def demand_matrix(
    by_queue: Mapping[str, Sequence[Outcome]], queues: list[str], times: np.ndarray
) -> np.ndarray:
    """GPUs asked for per (instant, queue): jobs submitted and not yet finished at each time."""
    demand = np.zeros((times.size, len(queues)))
    for qi, queue in enumerate(queues):
        mine = by_queue.get(queue, ())
        if not mine:
            continue
        submits = np.array([o.submit_time for o in mine])
        ends = np.array([_demand_end(o) for o in mine])
        gpus = np.array([o.gpus for o in mine], dtype=np.float64)
        by_submit, by_end = np.argsort(submits), np.argsort(ends)
        arrived = np.concatenate(([0.0], np.cumsum(gpus[by_submit])))
        left = np.concatenate(([0.0], np.cumsum(gpus[by_end])))
        demand[:, qi] = (
            arrived[np.searchsorted(submits[by_submit], times, side="right")]
            - left[np.searchsorted(ends[by_end], times, side="right")]
        )
    return demand


def _demand_end(o: Outcome) -> float:
    """When the job stopped asking for GPUs: its end, the instant a guard stopped it, or
    never (still waiting or running when the run ended)."""
    if o.end_time is not None:
        return o.end_time
    return np.inf if o.stop_time is None else o.stop_time


def owed_matrix(
    by_queue: Mapping[str, Sequence[Outcome]],
    queues: list[str],
    ent: Mapping[str, float],
    times: np.ndarray,
    total: np.ndarray,
) -> np.ndarray | None:
    """GPUs each queue is owed per (instant, queue): its entitlement capped by its demand,
    what idle queues leave going to the waiting ones; None when nobody is entitled."""
    weights = np.array([max(ent.get(q, 0.0), 0.0) for q in queues])
    if times.size == 0 or not (weights > 0).any():
        return None
    demand = demand_matrix(by_queue, queues, times) * (weights > 0)
    return stats.water_fill(total, demand, np.where(weights > 0, weights, 1.0))


@dataclass(frozen=True, slots=True)
class ShareGaps:
    """Fairness over time: per window, the largest gap between a queue's share of the
    cluster's GPU-time and the share it was owed (both fractions of the window's GPU-time).

    Why windows: the run-long index averages a queue starved on Monday and favoured on
    Tuesday into "fair"; a policy with memory of usage is meant to change exactly that.
    """

    edges: np.ndarray  # window boundaries, seconds (len = windows + 1)
    gaps: np.ndarray  # per window; NaN where no queue was owed anything
    window_seconds: float

    @property
    def max(self) -> float | None:
        counted = self.gaps[~np.isnan(self.gaps)]
        return float(counted.max()) if counted.size else None

    @property
    def mean(self) -> float | None:
        counted = self.gaps[~np.isnan(self.gaps)]
        return float(counted.mean()) if counted.size else None


def share_gaps(fair: np.ndarray | None, allocated: np.ndarray, times: np.ndarray,
               dt: np.ndarray, total: np.ndarray, window: float) -> ShareGaps:
    """`ShareGaps` over consecutive windows of *window* seconds from the first sample (the
    last window may be shorter)."""
    if fair is None or times.size == 0 or not dt.sum() > 0:
        return ShareGaps(np.zeros(1), np.zeros(0), window)
    start, end = float(times[0]), float(times[-1] + dt[-1])
    edges = np.append(np.arange(start, end, window), end)
    capacity = stats.window_integrals(times, dt, total, edges)
    got = stats.window_integrals(times, dt, allocated, edges)
    owed = stats.window_integrals(times, dt, fair, edges)
    counted = (owed.sum(axis=1) > 1e-9) & (capacity > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = np.abs(got - owed).max(axis=1) / capacity
    return ShareGaps(edges, np.where(counted, gap, np.nan), window)


def fair_shares(
    fair: np.ndarray | None, dt: np.ndarray, allocated: np.ndarray, queues: int
) -> tuple[np.ndarray, float | None]:
    """Per-queue fair GPU-seconds, and the time-weighted Jain index of allocated / fair;
    *fair* is `owed_matrix`'s."""
    if fair is None:
        return np.zeros(queues), None
    owed = fair > 1e-9
    with np.errstate(invalid="ignore", divide="ignore"):
        x = np.where(owed, allocated / np.where(owed, fair, 1.0), 0.0)
    jain = stats.jain_rows(x, owed)
    counted = ~np.isnan(jain) & (dt > 0)
    weight = float(dt[counted].sum())
    mean_jain = float(jain[counted] @ dt[counted]) / weight if weight > 0 else None
    return fair.T @ dt, mean_jain
