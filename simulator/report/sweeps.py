"""What a sweep writes: a table per point, CSV and JSON, and the trade-off plot.

Two sweeps, one shape. The capacity sweep (``--sweep POOL=N1,N2``) trades GPUs bought against
waiting: per size, utilization, cost and queueing delay, and the smallest size that meets the
p95 target. The checkpoint sweep (``--checkpoint-sweep T1,T2``) trades time spent writing
checkpoints against work lost to failures: per interval T, the GPU-hours of both, against the
model's expected waste W/T + T/(2 MTBF), whose minimum is Young's T* = sqrt(2 W MTBF).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from simulator.metrics import HOUR, PolicyReport
from simulator.report.plots import DPI
from simulator.sweep import SweepResult


@dataclass(frozen=True, slots=True)
class CapacityRow:
    nodes: int
    gpus: int
    utilization: float | None  # busy share, arrival window
    p95_hours: float | None
    mean_hours: float | None
    cost: float  # of the GPU-hours allocated to the jobs, at the configured prices
    pool_cost_per_hour: float  # what the swept pool's GPUs cost per hour, used or idle
    never_started: int
    meets_target: bool


def capacity_rows(result: SweepResult, gpus_per_node: int,
                  price_per_gpu_hour: float) -> list[CapacityRow]:
    return [CapacityRow(p.size, p.size * gpus_per_node, p.report.gpu_utilization_arrivals,
                        _h(p.report.queueing_delay.p95), _h(p.report.queueing_delay.mean),
                        p.report.total_cost, p.size * gpus_per_node * price_per_gpu_hour,
                        p.report.never_started, p.meets_target)
            for p in result.points]


@dataclass(frozen=True, slots=True)
class IntervalRow:
    interval: float  # seconds between checkpoints
    lost_gpu_hours: float  # work thrown away by failures (and preemption)
    writing_gpu_hours: float  # time spent writing checkpoints
    waste: float | None  # (lost + writing) / busy GPU-time
    expected_waste: float  # the model: W/T + T/(2 MTBF)
    goodput: float | None


def young_daly_waste(interval: float, write: float, mtbf: float) -> float:
    """Expected share of running time wasted: writing W every T, and T/2 lost per failure."""
    return write / interval + interval / (2.0 * mtbf)


def interval_rows(points: Sequence[tuple[float, PolicyReport]], write: float,
                  mtbf: float) -> list[IntervalRow]:
    rows = []
    for interval, r in points:
        wasted = r.gpu_hours_lost + r.gpu_hours_checkpointing
        rows.append(IntervalRow(interval, r.gpu_hours_lost, r.gpu_hours_checkpointing,
                                wasted / r.gpu_hours_busy if r.gpu_hours_busy else None,
                                young_daly_waste(interval, write, mtbf), r.gpu_goodput))
    return rows


def write_capacity(out: Path, rows: Sequence[CapacityRow], pool: str, target_hours: float,
                   currency: str) -> dict[str, Path]:
    """``sweep.csv``, ``sweep.json`` and ``sweep_tradeoff.png`` into *out*."""
    out.mkdir(parents=True, exist_ok=True)
    files = _write_rows(out, "sweep", rows, {"pool": pool, "target_p95_hours": target_hours,
                                             "currency": currency})
    fig, ax = plt.subplots(figsize=(8, 4.8))
    gpus = [r.gpus for r in rows]
    ax.plot(gpus, [r.p95_hours if r.p95_hours is not None else math.nan for r in rows], "o-",
            color="C0", label="queueing delay p95 (h)")
    ax.axhline(target_hours, color="C0", ls=":", lw=0.9, label=f"target p95 {target_hours:g} h")
    ax.set(xlabel=f"GPUs in pool {pool}", ylabel="queueing delay p95 (hours)",
           title=f"Capacity trade-off: GPUs in {pool} (and their cost per hour) against "
                 "waiting and utilization")
    right = ax.twinx()
    right.plot(gpus, [100 * (r.utilization or 0.0) for r in rows], "s--", color="C1",
               label="utilization, arrival window (%)")
    right.set(ylabel="% of GPU-time busy", ylim=(0, 105))
    for r in rows:  # what each size costs to own, per hour, idle or not
        ax.annotate(f"{r.pool_cost_per_hour:,.0f} {currency}/h", (r.gpus, r.p95_hours or 0.0),
                    fontsize=7, textcoords="offset points", xytext=(0, 8), ha="center")
    ax.margins(x=0.08, y=0.12)
    _legend(ax, right)
    files["sweep_tradeoff.png"] = _save(fig, out / "sweep_tradeoff.png")
    return files


def write_intervals(out: Path, rows: Sequence[IntervalRow], write: float,
                    mtbf: float) -> dict[str, Path]:
    """``checkpoint_sweep.csv``, ``.json`` and ``checkpoint_tradeoff.png`` into *out*."""
    out.mkdir(parents=True, exist_ok=True)
    best = math.sqrt(2.0 * write * mtbf)
    files = _write_rows(out, "checkpoint_sweep", rows,
                        {"write_seconds": write, "mtbf_seconds": mtbf, "t_star_seconds": best})
    fig, ax = plt.subplots(figsize=(8, 4.8))
    xs = [r.interval / HOUR for r in rows]
    ax.plot(xs, [100 * (r.waste or 0.0) for r in rows], "o-", color="C0",
            label="simulated: (lost + writing) / busy GPU-time")
    grid = [min(r.interval for r in rows) * (max(r.interval for r in rows) /
            min(r.interval for r in rows)) ** (i / 60) for i in range(61)]
    ax.plot([g / HOUR for g in grid], [100 * young_daly_waste(g, write, mtbf) for g in grid],
            color="grey", lw=0.9, label="model: W/T + T/(2 MTBF)")
    ax.axvline(best / HOUR, color="C3", ls="--", lw=1,
               label=f"T* = sqrt(2 W MTBF) = {best / HOUR:.2f} h")
    ax.set_xscale("log")
    ax.set(xlabel="checkpoint interval T (hours, log scale)", ylabel="% of busy GPU-time wasted",
           title=f"Checkpoint interval trade-off (W = {write:g} s, MTBF = {mtbf / HOUR:g} h)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    files["checkpoint_tradeoff.png"] = _save(fig, out / "checkpoint_tradeoff.png")
    return files


def _h(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / HOUR


def _write_rows(out: Path, stem: str, rows: Sequence[CapacityRow] | Sequence[IntervalRow],
                meta: dict[str, object]) -> dict[str, Path]:
    dicts = [{f: getattr(r, f) for f in r.__slots__} for r in rows]  # type: ignore[union-attr]
    with (out / f"{stem}.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(dicts[0]) if dicts else [])
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in d.items()} for d in dicts)
    (out / f"{stem}.json").write_text(json.dumps({**meta, "points": dicts}, indent=2,
                                                 allow_nan=False) + "\n", encoding="utf-8")
    return {f"{stem}.csv": out / f"{stem}.csv", f"{stem}.json": out / f"{stem}.json"}


def _legend(*axes: plt.Axes) -> None:
    handles, labels = [], []
    for ax in axes:
        h, lab = ax.get_legend_handles_labels()
        handles += h
        labels += lab
    axes[0].legend(handles, labels, fontsize=8, loc="upper right")


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
