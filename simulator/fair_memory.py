"""Fair share with memory, replayed: what a remembered past changes for the jobs that follow it.

Why its own module: the simulator's report is about a whole trace, but memory is about *when*:
a team that borrowed the whole cluster all week and a team that borrowed nothing submit alike
on Monday, and the question is who runs first. ``compare`` runs the same inputs twice, with
the policy file's half-life and with none (today's fair share), through the very same
``decide`` as the live scheduler (``session.run_policy``), and tells, per queue, the jobs
submitted from *since* on: their mean and largest queueing delay and the GPU-hours they ran
in the first *window* seconds.

The shipped example (``simulator/samples/fair_memory_*``; simulator/README.md, "Fair share with
memory") is such a week: ``gang-scheduler`` runs it with ``compare`` through
``benchmarks/bench_fair_memory.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from simulator.engine import SimulationOptions
from simulator.metrics import JobOutcome
from simulator.session import Inputs, run_policy


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """What one queue's jobs submitted from ``since`` on got, in one run."""

    queue: str
    jobs: int
    mean_wait_hours: float
    max_wait_hours: float
    #: GPU-hours those jobs ran in the window (``since`` to ``since + window``).
    gpu_hours_in_window: float


@dataclass(frozen=True, slots=True)
class Comparison:
    half_life_seconds: float
    since: float
    window: float
    with_memory: tuple[QueueFigures, ...]
    without: tuple[QueueFigures, ...]


def figures(outcomes: Iterable[JobOutcome], since: float, window: float
            ) -> tuple[QueueFigures, ...]:
    """Per queue (sorted), the jobs submitted at or after *since*."""
    by_queue: dict[str, list[JobOutcome]] = {}
    for o in outcomes:
        if o.submit_time >= since:
            by_queue.setdefault(o.queue, []).append(o)
    out = []
    for queue, jobs in sorted(by_queue.items()):
        waits = [(o.start_time - o.submit_time) / 3600 for o in jobs if o.start_time is not None]
        ran = 0.0
        for o in jobs:
            if o.start_time is None:
                continue
            end = since + window if o.end_time is None else min(o.end_time, since + window)
            ran += o.gpus * max(0.0, end - max(o.start_time, since)) / 3600
        out.append(QueueFigures(queue, len(jobs), sum(waits) / len(waits) if waits else 0.0,
                                max(waits, default=0.0), ran))
    return tuple(out)


def compare(inputs: Inputs, since: float, window: float) -> Comparison:
    """Run ``gang-scheduler`` on *inputs* with its policy file's usage half-life, then with
    none, and tell each run's figures from *since* on."""
    if inputs.scheduler is None or inputs.scheduler.usage_half_life_seconds <= 0:
        raise ValueError("compare: the policy file sets no fairShare.usageHalfLifeSeconds")
    off = dataclasses.replace(inputs, scheduler=dataclasses.replace(
        inputs.scheduler, usage_half_life_seconds=0.0))
    runs = [run_policy(i, "gang-scheduler", SimulationOptions()) for i in (inputs, off)]
    return Comparison(inputs.scheduler.usage_half_life_seconds, since, window,
                      figures(runs[0].outcomes, since, window),
                      figures(runs[1].outcomes, since, window))


def table(c: Comparison) -> Sequence[str]:
    """The comparison as a Markdown table (the one in simulator/README.md)."""
    hours = c.window / 3600
    lines = [f"| queue | half-life | jobs | mean wait (h) | max wait (h) | "
             f"GPU-h in the first {hours:g} h |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for label, rows in ((f"{c.half_life_seconds / 86400:g} d", c.with_memory),
                        ("off", c.without)):
        lines += [f"| {f.queue} | {label} | {f.jobs} | {f.mean_wait_hours:.1f} | "
                  f"{f.max_wait_hours:.1f} | {f.gpu_hours_in_window:,.0f} |" for f in rows]
    return lines
