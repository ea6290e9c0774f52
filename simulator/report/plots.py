"""PNG plots of a simulation, one figure per question a reader asks.

- Is the cluster busy? GPU utilization over time, per policy, with the arrival window marked
  (after it the cluster drains, whatever the policy).
- Does work pile up? The backlog (GPUs of submitted work not running) beside the busy GPUs
  and the cluster's size: a backlog above the busy line that keeps growing is a cluster too
  small for the load; one that stays near zero is a cluster with room to spare.
- How long do jobs wait? The queueing-delay CDF, per policy, on a log axis because delays span
  seconds to days.

Every time axis is in hours, as every time in the tables is.
- Does every team get what it is owed? Mean share of the cluster per queue, per policy, against
  the entitlement and the demand-capped fair share; and over time, per window, the largest
  gap between a queue's share and what it was owed.

The Agg backend is forced so that plotting works on machines with no display and never opens
windows. Long timelines are averaged into at most `MAX_POINTS` time bins (time-weighted), which
keeps files small and lines readable without moving the mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simulator import stats
from simulator.metrics import FAIRNESS_WINDOW, HOUR, PolicyRun, share_gaps_of
from simulator.report import fmt

MAX_POINTS = 400
DPI = 110


def utilization_steps(
    run: PolicyRun, bins: int = MAX_POINTS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(edges, busy/total, allocated/total) as a step function with len(edges) = n + 1.

    Up to *bins* samples are drawn as they are; longer timelines are averaged (time-weighted,
    by integrating the step function at the bin edges) into *bins* equal bins.
    """
    samples = sorted(run.samples, key=lambda s: s.time)
    if not samples:
        return np.zeros(1), np.zeros(0), np.zeros(0)
    times = np.array([s.time for s in samples])
    end = max(times[-1], times[0] + run.report.horizon_seconds)
    dt = stats.interval_lengths(times, end)
    total = np.array([s.total_gpus for s in samples], dtype=float)
    busy = np.array([s.busy_gpus for s in samples], dtype=float)
    alloc = np.array([s.allocated_gpus for s in samples], dtype=float)
    if len(samples) <= bins or end <= times[0]:
        edges, weights = np.append(times, end), (busy, alloc, total)
    else:
        edges = np.linspace(times[0], end, bins + 1)
        cut = np.clip(np.searchsorted(times, edges, side="right") - 1, 0, len(times) - 1)

        def per_bin(values: np.ndarray) -> np.ndarray:
            cumulative = np.concatenate(([0.0], np.cumsum(values * dt)))
            return np.diff(cumulative[cut] + values[cut] * (edges - times[cut]))

        weights = (per_bin(busy), per_bin(alloc), per_bin(total))
    with np.errstate(invalid="ignore", divide="ignore"):
        return edges, weights[0] / weights[2], weights[1] / weights[2]


def _arrival_window(ax: Axes, runs: Sequence[PolicyRun]) -> None:
    """Shade the arrival window (the same trace for every run: the first run's)."""
    if runs and runs[0].report.arrival_end > runs[0].report.arrival_start:
        r = runs[0].report
        ax.axvspan(r.arrival_start / HOUR, r.arrival_end / HOUR, color="grey", alpha=0.12,
                   lw=0, label="arrival window")


def plot_utilization(runs: Sequence[PolicyRun], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(9, 4.8))
    _arrival_window(ax, runs)
    for i, run in enumerate(runs):
        edges, busy, alloc = utilization_steps(run)
        color = f"C{i}"
        ax.stairs(100 * busy, edges / HOUR, color=color, lw=1.4,
                  label=f"{run.report.policy} busy")
        ax.stairs(100 * alloc, edges / HOUR, color=color, lw=0.9, ls="--", alpha=0.7,
                  label=f"{run.report.policy} allocated")
    ax.set(xlabel="simulated time (hours)", ylabel="% of cluster GPUs", ylim=(0, 102),
           title="GPU utilization over time")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=max(1, len(runs)), loc="upper center",
              bbox_to_anchor=(0.5, -0.16), frameon=False)
    return _save(fig, path)


def backlog_steps(run: PolicyRun, bins: int = MAX_POINTS) -> tuple[np.ndarray, ...]:
    """(edges, pending GPUs, busy GPUs, cluster GPUs), time-averaged into at most *bins*."""
    samples = sorted(run.samples, key=lambda s: s.time)
    if not samples:
        return np.zeros(1), np.zeros(0), np.zeros(0), np.zeros(0)
    times = np.array([s.time for s in samples])
    end = max(times[-1], times[0] + run.report.horizon_seconds)
    series = [np.array([getattr(s, f) for s in samples], dtype=float)
              for f in ("pending_gpus", "busy_gpus", "total_gpus")]
    if len(samples) <= bins or end <= times[0]:
        return (np.append(times, end), *series)
    edges = np.linspace(times[0], end, bins + 1)
    width = edges[1] - edges[0]
    dt = stats.interval_lengths(times, end)
    return (edges, *(np.array([stats.integral_over(times, dt, v, a, a + width) / width
                               for a in edges[:-1]]) for v in series))


def plot_backlog(runs: Sequence[PolicyRun], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(9, 4.8))
    _arrival_window(ax, runs)
    for i, run in enumerate(runs):
        edges, pending, busy, total = backlog_steps(run)
        ax.stairs(pending, edges / HOUR, color=f"C{i}", lw=1.4,
                  label=f"{run.report.policy} waiting (backlog)")
        ax.stairs(busy, edges / HOUR, color=f"C{i}", lw=0.9, ls=":",
                  label=f"{run.report.policy} busy")
        if i == 0:
            ax.stairs(total, edges / HOUR, color="black", lw=0.8, ls="--",
                      label="cluster GPUs")
    ax.set(xlabel="simulated time (hours)", ylabel="GPUs",
           title="Backlog: GPUs of submitted work waiting, against GPUs busy")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=max(1, min(len(runs), 3)), loc="upper center",
              bbox_to_anchor=(0.5, -0.16), frameon=False)
    return _save(fig, path)


def plot_queueing_cdf(runs: Sequence[PolicyRun], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    longest = 1.0
    for i, run in enumerate(runs):
        delays = np.sort([
            o.start_time - o.submit_time for o in run.outcomes if o.start_time is not None
        ])
        if delays.size == 0:
            continue
        longest = max(longest, float(delays[-1]))
        share = np.arange(1, delays.size + 1) / len(run.outcomes)  # never-started stay below 1
        p95 = fmt.hours(run.report.queueing_delay.p95)
        ax.step(np.maximum(delays, 1.0) / HOUR, 100 * share, where="post", color=f"C{i}",
                label=f"{run.report.policy} (p95 {p95} h)")
    ax.set_xscale("log")
    ax.set(xlabel="queueing delay (hours, log scale; 0 plotted at 1 s)",
           ylabel="% of jobs started within", ylim=(0, 101), title="Queueing delay CDF")
    for seconds, text in ((60, "1 min"), (3600, "1 hour"), (86400, "1 day"), (604800, "1 week")):
        if seconds < longest:
            ax.axvline(seconds / HOUR, color="grey", lw=0.6, alpha=0.5)
            ax.text(seconds / HOUR, 2, f" {text}", color="grey", fontsize=8, va="bottom")
    ax.grid(alpha=0.3, which="major")
    ax.legend(fontsize=8, ncol=max(1, min(len(runs), 3)), loc="upper center",
              bbox_to_anchor=(0.5, -0.16), frameon=False)
    return _save(fig, path)


def plot_queue_shares(runs: Sequence[PolicyRun], path: Path) -> Path:
    queues = sorted({q.queue for r in runs for q in r.report.queues})
    width_in = max(8.5, 0.3 * len(queues) * max(len(runs), 1) + 3.5)
    fig, ax = plt.subplots(figsize=(min(width_in, 13.0), 4.8))
    width = 0.8 / max(len(runs), 1)
    x = np.arange(len(queues))
    for i, run in enumerate(runs):
        by_name = {q.queue: q for q in run.report.queues}
        share = [100 * (by_name[q].mean_share or 0.0) if q in by_name else 0.0 for q in queues]
        fair = [100 * (by_name[q].mean_fair_share or 0.0) if q in by_name else 0.0 for q in queues]
        offset = x - 0.4 + width * (i + 0.5)
        ax.bar(offset, share, width, color=f"C{i}", label=f"{run.report.policy} share")
        ax.scatter(offset, fair, marker="_", s=160, color="black", zorder=3,
                   label="demand-capped fair share" if i == 0 else None)
    if runs:
        ent = {q.queue: q.entitlement for q in runs[0].report.queues}
        total = sum(v for v in ent.values() if v) or 1.0
        ax.scatter(x, [100 * (ent.get(q) or 0.0) / total for q in queues], marker="D", s=22,
                   color="crimson", zorder=4, label="entitlement")
    ax.set_xticks(x, queues, rotation=45 if len(queues) > 6 else 0, ha="right", fontsize=8)
    ax.set(ylabel="% of cluster GPU-time", title="Mean share per queue vs entitlement")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return _save(fig, path)


def plot_fairness_over_time(runs: Sequence[PolicyRun], path: Path) -> Path:
    """Per window, the largest gap between a queue's share and what it was owed."""
    fig, ax = plt.subplots(figsize=(9, 4.2))
    _arrival_window(ax, runs)
    for i, run in enumerate(runs):
        gaps = share_gaps_of(run)
        if gaps.gaps.size:
            ax.stairs(100 * np.nan_to_num(gaps.gaps), gaps.edges / HOUR, color=f"C{i}",
                      lw=1.2, label=f"{run.report.policy} (worst "
                      f"{fmt.number(100 * gaps.max if gaps.max is not None else None)} pts)")
    window = f"{FAIRNESS_WINDOW / HOUR:g} h"
    ax.set(xlabel="simulated time (hours)", ylabel="percentage points of cluster GPU-time",
           title=f"Fairness over time: largest gap between a queue's share and its fair share, "
                 f"per {window}")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=max(1, min(len(runs), 3)), loc="upper center",
              bbox_to_anchor=(0.5, -0.16), frameon=False)
    return _save(fig, path)


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
