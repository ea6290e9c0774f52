"""Demand-aware fairness: what each queue was owed at each instant, and how close it came.

Why its own module: "share against entitlement" alone calls a queue starved when it simply had
nothing to run. Here a queue is owed its entitlement capped by its demand at that instant (the
GPUs of its jobs submitted and not finished), with the unused part flowing to the queues that
wait (`stats.water_fill`); the Jain index of allocated / owed, weighted by time, then says whether
the policy shared fairly when it mattered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
        ends = np.array([np.inf if o.end_time is None else o.end_time for o in mine])
        gpus = np.array([o.gpus for o in mine], dtype=np.float64)
        by_submit, by_end = np.argsort(submits), np.argsort(ends)
        arrived = np.concatenate(([0.0], np.cumsum(gpus[by_submit])))
        left = np.concatenate(([0.0], np.cumsum(gpus[by_end])))
        demand[:, qi] = (
            arrived[np.searchsorted(submits[by_submit], times, side="right")]
            - left[np.searchsorted(ends[by_end], times, side="right")]
        )
    return demand


def fair_shares(
    by_queue: Mapping[str, Sequence[Outcome]],
    queues: list[str],
    ent: Mapping[str, float],
    times: np.ndarray,
    dt: np.ndarray,
    total: np.ndarray,
    allocated: np.ndarray,
) -> tuple[np.ndarray, float | None]:
    """Per-queue fair GPU-seconds, and the time-weighted Jain index of allocated / fair."""
    weights = np.array([max(ent.get(q, 0.0), 0.0) for q in queues])
    if times.size == 0 or not (weights > 0).any():
        return np.zeros(len(queues)), None
    demand = demand_matrix(by_queue, queues, times) * (weights > 0)
    fair = stats.water_fill(total, demand, np.where(weights > 0, weights, 1.0))
    owed = fair > 1e-9
    with np.errstate(invalid="ignore", divide="ignore"):
        x = np.where(owed, allocated / np.where(owed, fair, 1.0), 0.0)
    jain = stats.jain_rows(x, owed)
    counted = ~np.isnan(jain) & (dt > 0)
    weight = float(dt[counted].sum())
    mean_jain = float(jain[counted] @ dt[counted]) / weight if weight > 0 else None
    return fair.T @ dt, mean_jain
