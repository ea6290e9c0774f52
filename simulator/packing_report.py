"""Many runs of the packing experiment (``simulator.packing``): policies x seeds in parallel,
their means per arrived load, a CSV, a Markdown table and a plot with the paper's means
drawn beside.

Why processes: a run is pure Python and the protocol is 10 seeds x several policies x two
traces; runs share nothing, so they go to an executor (local processes, or a Ray cluster:
``simulator.executors``), and each run is the same whether it ran alone, beside others or on
another machine (its seed is its own; the cluster and the pods travel with it).
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduler.placement.gpu_shares import NodeState, Policy, ShareRequest
from simulator.executors import Executor, LocalProcesses
from simulator.packing import LOADS, PUBLISHED, REPORTED, Curve, run


@dataclass(frozen=True, slots=True)
class Experiment:
    """The runs of one trace: every policy at every seed."""

    trace: str  # its name in ``PUBLISHED`` (default, multigpu20) or a file name
    curves: tuple[Curve, ...]

    def mean(self, policy: Policy) -> tuple[float, ...]:
        mine = [c.allocated for c in self.curves if c.policy is policy]
        return tuple(statistics.fmean(c[i] for c in mine) for i in range(len(LOADS)))

    def spread(self, policy: Policy, load: int) -> tuple[float, float]:
        mine = [c.allocated[load] for c in self.curves if c.policy is policy]
        return min(mine), max(mine)

    @property
    def policies(self) -> list[Policy]:
        return [p for p in Policy if any(c.policy is p for c in self.curves)]


@dataclass(frozen=True, slots=True)
class _Runs:
    """One run per ``(policy, seed)``: the cluster and the pods are shipped once, with this."""

    nodes: dict[str, NodeState]
    requests: tuple[ShareRequest, ...]

    def __call__(self, run_of: tuple[Policy, int]) -> Curve:
        policy, seed = run_of
        return run(self.nodes, self.requests, policy, seed)


def experiment(trace: str, nodes: dict[str, NodeState], requests: Sequence[ShareRequest],
               policies: Sequence[Policy], seeds: Sequence[int], jobs: int = 2,
               done: Callable[[Curve], None] | None = None,
               executor: Executor | None = None) -> Experiment:
    """Every policy at every seed, on *executor* (default: *jobs* local processes, 1: in
    this process). A failing run raises ``executors.RunFailed``; its ``index`` is that of
    ``runs(policies, seeds)``."""
    runner = executor or LocalProcesses(jobs)
    curves = runner.run_all(_Runs(nodes, tuple(requests)), runs(policies, seeds),
                            None if done is None else lambda _i, curve: done(curve))
    return Experiment(trace, tuple(sorted(curves, key=lambda c: (c.policy, c.seed))))


def runs(policies: Sequence[Policy], seeds: Sequence[int]) -> list[tuple[Policy, int]]:
    """The experiment's runs, in the order it submits them."""
    return [(p, s) for p in policies for s in seeds]


def write_csv(exp: Experiment, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["trace", "policy", "seed", "arrived_load", "allocated", "placed", "failed"])
        for c in exp.curves:
            for load, a in zip(LOADS, c.allocated, strict=True):
                w.writerow([exp.trace, c.policy, c.seed, f"{load:.2f}", f"{a:.5f}", c.placed,
                            c.failed])


def table(exp: Experiment) -> str:
    """Mean allocated share per policy and arrived load (Markdown), min-max at 100%, and the
    paper's means at 100% where it published one for this trace."""
    seeds = len({c.seed for c in exp.curves})
    at = LOADS.index(1.0)
    shown = [LOADS.index(load) for load in REPORTED]
    head = " | ".join(f"{load:.0%}" for load in REPORTED)
    lines = [f"GPUs allocated, mean of {seeds} seed(s), by arrived load ({exp.trace}):", "",
             f"| policy | {head} | 100% min-max |", "|---" * (len(REPORTED) + 2) + "|"]
    for p in exp.policies:
        lo, hi = exp.spread(p, at)
        mean = exp.mean(p)
        cells = " | ".join(f"{mean[i]:.1%}" for i in shown)
        lines.append(f"| {p} | {cells} | {lo:.1%}-{hi:.1%} |")
    published = PUBLISHED.get(exp.trace)
    if published:
        lines += ["", "Published at 100% (Weng et al., ATC '23, means of 10 seeds): "
                  + ", ".join(f"{k} {v:.1%}" for k, v in published.items())]
    return "\n".join(lines)


def plot(exp: Experiment, path: Path) -> None:
    """Allocated vs arrived load, one line per policy (mean, min-max band), the paper's
    means at 100% as markers."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [100 * load for load in LOADS]
    for p in exp.policies:
        mean = [100 * a for a in exp.mean(p)]
        line = ax.plot(xs, mean, marker=".", label=f"{p} (this project)")[0]
        bands = [exp.spread(p, i) for i in range(len(LOADS))]
        ax.fill_between(xs, [100 * lo for lo, _ in bands], [100 * hi for _, hi in bands],
                        color=line.get_color(), alpha=0.15)
    for name, value in (PUBLISHED.get(exp.trace) or {}).items():
        ax.scatter([100], [100 * value], marker="x", zorder=3)
        ax.annotate(f"{name} (paper)", (100, 100 * value), textcoords="offset points",
                    xytext=(6, -3), fontsize=7)
    ax.plot(xs, [min(x, 100) for x in xs], color="grey", linestyle=":",
            label="arrived (capped at 100%)")
    ax.set_xlabel("arrived load (% of the cluster's GPUs asked for)")
    ax.set_ylabel("GPUs allocated (%)")
    ax.set_title(f"{exp.trace}: GPU shares placed one by one, never leaving")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
