"""Numeric building blocks of the simulator's report: percentiles, step-function integrals,
Jain's index and demand-capped fair shares.

Why a module apart from `metrics`: these are plain functions over numbers with textbook
definitions, tested on hand-computed cases; `metrics` decides *what* to feed them (which jobs,
which intervals). Percentiles use linear interpolation between order statistics (numpy's
default, "type 7"), so p50 of [1, 2, 3, 4] is 2.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of a sample; every figure is None when the sample is empty."""

    count: int
    mean: float | None
    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None


def describe(values: Sequence[float] | FloatArray) -> Distribution:
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return Distribution(0, None, None, None, None, None)
    p50, p95, p99 = np.percentile(data, [50, 95, 99])
    return Distribution(
        int(data.size), float(data.mean()), float(p50), float(p95), float(p99), float(data.max())
    )


def interval_lengths(times: FloatArray, end: float | None = None) -> FloatArray:
    """Length of each step of a step function sampled at sorted *times*.

    Sample i lasts over [times[i], times[i+1]); the last one lasts until *end* (or has length 0
    when *end* is None). Repeated times give zero-length steps, so the later sample wins.
    """
    if times.size == 0:
        return np.zeros(0)
    last = times[-1] if end is None else end
    if last < times[-1]:
        raise ValueError(f"end {last} is before the last sample at {times[-1]}")
    return np.diff(times, append=last)


def integral_over(times: FloatArray, dt: FloatArray, values: FloatArray, start: float,
                  end: float) -> float:
    """The integral over [start, end] of the step function that is values[i] for dt[i]
    seconds from times[i]."""
    overlap = np.minimum(times + dt, end) - np.maximum(times, start)
    return float(np.asarray(values, dtype=np.float64) @ np.clip(overlap, 0.0, None))


def window_integrals(times: FloatArray, dt: FloatArray, values: FloatArray,
                     edges: FloatArray) -> FloatArray:
    """The integral of a step function (values[i] for dt[i] seconds from times[i]; *values*
    may have a column per series) over each window between consecutive *edges*, which must
    lie within [times[0], times[-1] + dt[-1]]. One cumulative sum for all windows, so a long
    timeline cut into many windows costs what one pass does."""
    values = np.asarray(values, dtype=np.float64)
    weights = dt if values.ndim == 1 else dt[:, None]
    cumulative = np.concatenate((np.zeros((1, *values.shape[1:])),
                                 np.cumsum(values * weights, axis=0)))
    cut = np.clip(np.searchsorted(times, edges, side="right") - 1, 0, len(times) - 1)
    into = edges - times[cut]
    at_edges = cumulative[cut] + values[cut] * (into if values.ndim == 1 else into[:, None])
    return np.diff(at_edges, axis=0)


def jain_index(values: Sequence[float] | FloatArray) -> float | None:
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1.0 when all are equal, 1/n when one
    party gets everything. None for no values; 1.0 when all are zero (equally nothing)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return None
    squares = float(np.dot(x, x))
    if squares == 0.0:
        return 1.0
    return float(x.sum() ** 2 / (x.size * squares))


def jain_rows(x: FloatArray, mask: npt.NDArray[np.bool_]) -> FloatArray:
    """Jain's index of each row of *x* over the columns where *mask* is set (NaN if none)."""
    xm = np.where(mask, x, 0.0)
    n = mask.sum(axis=1)
    squares = (xm * xm).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = xm.sum(axis=1) ** 2 / (n * squares)
    out[(squares == 0) & (n > 0)] = 1.0
    out[n == 0] = np.nan
    return out


def water_fill(capacity: FloatArray, demand: FloatArray, weights: FloatArray) -> FloatArray:
    """Weighted max-min fair shares, one row per instant: each party gets capacity in proportion
    to its weight, never more than it demands, and what a party cannot use is shared among the
    others. *capacity* has shape (n,), *demand* (n, q), *weights* (q,) with weights > 0.

    This is what "fair" means when parties are idle part of the time: a queue that asks for
    nothing is owed nothing, and its entitlement flows to the queues that are waiting.
    """
    n, q = demand.shape
    fair = np.zeros((n, q))
    unsat = demand > 0
    remaining = capacity.astype(np.float64).copy()
    for _ in range(q + 1):
        wsum = (weights * unsat).sum(axis=1)
        live = (wsum > 0) & (remaining > 1e-12)
        if not live.any():
            break
        level = np.zeros(n)
        level[live] = remaining[live] / wsum[live]
        offer = level[:, None] * weights[None, :]
        need = demand - fair
        saturate = unsat & (need <= offer) & live[:, None]
        rows_saturating = saturate.any(axis=1)
        # Rows where nobody saturates split the rest by weight and are done.
        final = live & ~rows_saturating
        fair[final] += np.where(unsat[final], offer[final], 0.0)
        unsat[final] = False
        remaining[final] = 0.0
        # Rows where some parties saturate: give those their demand, then go round again.
        fair = np.where(saturate, demand, fair)
        remaining -= np.where(saturate, need, 0.0).sum(axis=1)
        unsat &= ~saturate
    return fair
