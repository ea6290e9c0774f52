"""Runaway guards: limits a queue sets on its gangs' runtime, GPU-hours and numbers.

Why apart from quota: quota bounds what a queue holds *at once*; a guard bounds what it does
over time or in count. A queue's ``spec.guards``:

- ``maxRuntimeSeconds``: a running gang is evicted once its workload has run this long, in
  all its runs (a gang's own ``gangscheduler.io/max-runtime`` annotation may ask for less,
  never more). The earlier runs' seconds come with the gang (``Gang.ran_before``, from the
  ``gangscheduler.io/runtime-seconds`` annotation the scheduler writes on the workload's
  owner when a run ends), so a Job or JobSet its controller restarts does not get the full
  limit again each time; a gang whose workload already used it up is not started again;
- ``budget: {gpuHours, period}``: once the queue's GPU-hours in the current calendar period
  (UTC day, week from Monday, month) reach the budget, it starts no new gang until the next
  period; what runs keeps running;
- ``maxRunningGangs``: at most this many of its gangs run (or are about to: nominated);
- ``maxPendingGangs``: only the first this many pending gangs (by arrival) are considered;
  the rest are held, so one owner's thousand trials do not flood the queue.

Guards on a parent queue cover the gangs of every queue below it. Every rule here is a pure
function of the queues, the gangs and ``now``; the GPU-hours of runs that already ended come
in as ``Usage`` (the scheduler loop remembers them: ``scheduler.run.guard_usage``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from scheduler.model.durations import format_duration

#: The longest period a budget counts over (a month, with a day to spare): finished runs
#: older than this are of no use to any budget.
LONGEST_PERIOD_SECONDS = 32 * 86400.0


class Period(StrEnum):
    DAY = "Day"
    WEEK = "Week"
    MONTH = "Month"


PERIOD_WORDS = {Period.DAY: "today", Period.WEEK: "this week", Period.MONTH: "this month"}


@dataclass(frozen=True, slots=True)
class Budget:
    gpu_hours: float
    period: Period


@dataclass(frozen=True, slots=True)
class Guards:
    """A queue's guards; None: no such limit."""

    max_runtime_seconds: float | None = None
    budget: Budget | None = None
    max_running_gangs: int | None = None
    max_pending_gangs: int | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.max_runtime_seconds, self.budget,
                                           self.max_running_gangs, self.max_pending_gangs))


NO_GUARDS = Guards()


@dataclass(frozen=True, slots=True)
class Run:
    """GPUs a gang of *queue* held from *start* to *end* (None: still running)."""

    queue: str
    gpus: int
    start: float
    end: float | None = None


DAY_SECONDS = 86400.0


@dataclass(frozen=True, slots=True)
class Usage:
    """GPU-hours of runs that have ended (the running ones are in the snapshot), per queue
    and UTC day (the day's start, epoch seconds). Every budget period starts at a UTC
    midnight, so the days a period holds sum to exactly its use, whatever the number of
    runs: a month of a busy cluster's runs is at most 32 figures per queue."""

    finished: Mapping[str, Mapping[float, float]] = field(default_factory=dict)

    @classmethod
    def of(cls, runs: Iterable[Run]) -> Usage:
        """The usage of ended *runs* (each with an ``end``)."""
        days: dict[str, dict[float, float]] = {}
        for r in runs:
            add_run(days, r)
        return cls(days)


NO_USAGE = Usage()


def add_run(days: dict[str, dict[float, float]], run: Run) -> None:
    """Add an ended *run* to *days* (queue -> day start -> GPU-hours), split at midnights."""
    assert run.end is not None
    per_day = days.setdefault(run.queue, {})
    t = run.start
    while t < run.end:
        day = t - t % DAY_SECONDS
        upto = min(run.end, day + DAY_SECONDS)
        per_day[day] = per_day.get(day, 0.0) + run.gpus * (upto - t) / 3600.0
        t = upto


# Periods ------------------------------------------------------------------------------------
def period_bounds(period: Period, now: float) -> tuple[float, float]:
    """[start, end) of the calendar period (UTC) that contains *now*, in epoch seconds."""
    t = datetime.fromtimestamp(now, UTC)
    day = t.replace(hour=0, minute=0, second=0, microsecond=0)
    if period is Period.DAY:
        start, end = day, day + timedelta(days=1)
    elif period is Period.WEEK:
        start = day - timedelta(days=day.weekday())
        end = start + timedelta(days=7)
    else:
        start = day.replace(day=1)
        end = (start.replace(year=start.year + 1, month=1) if start.month == 12
               else start.replace(month=start.month + 1))
    return start.timestamp(), end.timestamp()


def gpu_hours(usage: Usage, running: Iterable[Run], queues: frozenset[str], since: float,
              now: float) -> float:
    """GPU-hours *queues* used in [since, now): their ended runs' days from *since* (a UTC
    midnight) on, and their *running* runs' share of the span."""
    hours = sum(h for q in queues for day, h in usage.finished.get(q, {}).items()
                if day >= since)
    seconds = 0.0
    for r in running:
        if r.queue in queues:
            end = now if r.end is None else min(r.end, now)
            seconds += r.gpus * max(0.0, end - max(r.start, since))
    return hours + seconds / 3600.0


# Rules ---------------------------------------------------------------------------------------
def runtime_limit(path_guards: Iterable[tuple[str, Guards]], own: float | None
                  ) -> tuple[float, str] | None:
    """The runtime a gang may have, and who sets it: the least of its queues' (root to leaf)
    ``maxRuntimeSeconds`` and its own annotation (which may only ask for less)."""
    best: tuple[float, str] | None = None
    for name, g in path_guards:
        if g.max_runtime_seconds is not None and (best is None or g.max_runtime_seconds < best[0]):
            best = (g.max_runtime_seconds, f"queue {name}")
    if own is not None and (best is None or own < best[0]):
        best = (own, "its gangscheduler.io/max-runtime annotation")
    return best


def overrun_message(limit: tuple[float, str], ran: float, ran_before: float = 0.0) -> str:
    """What an eviction for running too long says (on the pods, the Job, the PodGroup):
    *ran* counts the workload's earlier runs (*ran_before*) too, when it had any."""
    seconds, who = limit
    earlier = (f" (this run {format_duration(ran - ran_before)}, earlier runs "
               f"{format_duration(ran_before)})" if ran_before > 0 else "")
    return (f"preempted: {who} allows {format_duration(seconds)} of runtime; this gang ran "
            f"{format_duration(ran)}{earlier}")


def runtime_spent(gang_id: str, limit: tuple[float, str] | None, ran_before: float
                  ) -> str | None:
    """Why a gang whose workload already ran its whole runtime limit in earlier runs is not
    started again (None: it has time left). Holding it, rather than starting it and evicting
    it at once, spares the cluster a start (pulling images, loading a checkpoint) that could
    do no work, and says plainly on the pending gang what its user must change: raise the
    limit, or clear the ``gangscheduler.io/runtime-seconds`` annotation of its owner."""
    if limit is None or ran_before < limit[0]:
        return None
    seconds, who = limit
    return (f"{gang_id} ran {_seconds(ran_before)} of the {_seconds(seconds)} runtime limit "
            f"of {who} in earlier runs: not started again (raise the limit, or remove the "
            "gangscheduler.io/runtime-seconds annotation of its owner to start afresh)")


@dataclass(frozen=True, slots=True)
class BudgetUse:
    """How much of a queue's GPU-hour budget its subtree used in the current period."""

    used_gpu_hours: float
    gpu_hours: float
    period: Period
    resets_at: float  # the period's end, epoch seconds

    @property
    def spent(self) -> bool:
        """Used up: the queue starts no new gang until the period ends (``over_budget``)."""
        return self.used_gpu_hours >= self.gpu_hours


def budget_use(budget: Budget, usage: Usage, running: Iterable[Run], queues: frozenset[str],
               now: float) -> BudgetUse:
    """What *queues* (a budgeted queue's subtree) used of *budget* in its period so far: the
    one figure the guard holds gangs by and the views, metrics and Queue status show."""
    start, end = period_bounds(budget.period, now)
    return BudgetUse(gpu_hours(usage, running, queues, start, now), budget.gpu_hours,
                     budget.period, end)


def over_budget(name: str, guards: Guards, used_gpu_hours: float, now: float) -> str | None:
    """Why queue *name* starts no new gang, when its budget for the period is used up."""
    budget = guards.budget
    if budget is None or used_gpu_hours < budget.gpu_hours:
        return None
    _, end = period_bounds(budget.period, now)
    resets = datetime.fromtimestamp(end, UTC).strftime("%A %d %b %H:%M UTC")
    return (f"queue {name} reached its GPU-hour budget for {PERIOD_WORDS[budget.period]}: "
            f"{_gpu_h(used_gpu_hours)} of {_gpu_h(budget.gpu_hours)} GPU-h; resets {resets}")


def running_cap(name: str, guards: Guards, running: int) -> str | None:
    """Why a gang of (or below) queue *name* may not start: *running* gangs already do."""
    cap = guards.max_running_gangs
    if cap is None or running < cap:
        return None
    return (f"queue {name} runs {running} gang(s), its cap (maxRunningGangs {cap}); the gang "
            "starts when one of them ends")


def pending_cap(name: str, guards: Guards, place: int) -> str | None:
    """Why the *place*-th (1-based, by arrival) pending gang of queue *name* is held."""
    cap = guards.max_pending_gangs
    if cap is None or place <= cap:
        return None
    # (No place in the text: every gang held is past the cap, and the text must change only
    # when the reason does.)
    return (f"queue {name} considers only its first {cap} pending gangs (maxPendingGangs); "
            "this gang waits its turn in arrival order, considered once earlier ones start or "
            "leave")


def overrun_deadline(limit: tuple[float, str] | None, start: float) -> float | None:
    """When a gang started at *start* is past its runtime limit."""
    return None if limit is None else start + limit[0]


def period_end(guards: Mapping[str, Guards], now: float) -> float | None:
    """The earliest end of a budget period among *guards* (a held queue may start again)."""
    ends = [period_bounds(g.budget.period, now)[1] for g in guards.values()
            if g.budget is not None]
    return min(ends, default=None)


def _seconds(seconds: float) -> str:
    """``3,612 s``: whole seconds, as the limit is written (``maxRuntimeSeconds``)."""
    return f"{seconds:,.0f} s"


def _gpu_h(hours: float) -> str:
    """``1,204``; below 10, two significant digits (``4.2``, ``0.0013``): the figure moves
    only by that much, so a held gang's reason is not rewritten on every cycle while its
    queue's gangs run."""
    if hours >= 10:
        return f"{hours:,.0f}"
    return f"{hours:.2g}"
