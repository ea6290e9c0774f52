"""Figures per class of work: how notebooks, HPO trials and training fare under a policy.

Why per class: the policies of issue 38 are meant to help one kind of work at another's
expense (notebooks start at once, a search cannot flood its queue, a runaway is stopped), and
a run-long average over all jobs hides both the help and the cost. A trace that names no
class (Philly, openb) is grouped by gang size instead, `SIZE_CLASSES`, so the same table
answers "do the small jobs wait behind the large ones".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from simulator import stats

HOUR = 3600.0
#: The classes of a job whose trace names none, by its GPUs: (largest GPUs, name).
SIZE_CLASSES = ((1, "1 GPU"), (8, "2-8 GPUs"))
LARGEST_CLASS = "over 8 GPUs"


class Outcome(Protocol):
    """The fields of `metrics.JobOutcome` this module reads."""

    @property
    def gpus(self) -> int: ...
    @property
    def submit_time(self) -> float: ...
    @property
    def start_time(self) -> float | None: ...
    @property
    def preemptions(self) -> int: ...
    @property
    def gpu_seconds_lost(self) -> float: ...
    @property
    def stopped(self) -> bool: ...
    @property
    def job_class(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ClassReport:
    job_class: str
    jobs: int
    started: int
    queueing_delay_p50: float | None  # seconds, over the class's started jobs
    queueing_delay_p95: float | None
    #: Work thrown away: by preemption, node failure and guard stops (since the last checkpoint).
    gpu_hours_lost: float
    preemptions: int  # gang interruptions, guard stops included
    stopped: int  # stopped for good by a runaway guard


def class_of(outcome: Outcome) -> str:
    """The trace's class of the job, or its size class when the trace names none."""
    if outcome.job_class:
        return outcome.job_class
    return next((name for most, name in SIZE_CLASSES if outcome.gpus <= most), LARGEST_CLASS)


def class_reports(outcomes: Sequence[Outcome]) -> tuple[ClassReport, ...]:
    """One `ClassReport` per class present, by name (size classes smallest first)."""
    groups: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        groups.setdefault(class_of(outcome), []).append(outcome)
    order = [name for _, name in SIZE_CLASSES] + [LARGEST_CLASS]
    names = sorted(groups, key=lambda n: (order.index(n) if n in order else -1, n))
    reports = []
    for name in names:
        mine = groups[name]
        delays = stats.describe([o.start_time - o.submit_time for o in mine
                                 if o.start_time is not None])
        reports.append(ClassReport(
            job_class=name, jobs=len(mine), started=delays.count,
            queueing_delay_p50=delays.p50, queueing_delay_p95=delays.p95,
            gpu_hours_lost=sum(o.gpu_seconds_lost for o in mine) / HOUR,
            preemptions=sum(o.preemptions for o in mine),
            stopped=sum(1 for o in mine if o.stopped)))
    return tuple(reports)
