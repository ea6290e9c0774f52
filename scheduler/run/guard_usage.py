"""GPU-hours of runs that ended, remembered for the queues' budgets (``policies.guards``).

Why here: a finished gang leaves the snapshot, but its GPU-hours still count against its
queue's budget until the period ends. ``decide`` stays pure: this store, fed by the same
cycle input and plan as the loop's other small modules, hands it the finished runs as
``Usage``. A run is known from the cycle that binds it (a gang may end before the next
cycle sees it run) and from every snapshot that shows it running (its start then comes from
its pods). Runs still going are read from the snapshot each cycle, so after a restart the
running usage is rebuilt at once; finished runs are kept in memory only and are lost on a
restart (a queue may then start gangs its budget would have held until the period ends).
Ended runs are kept as GPU-hours per queue and UTC day (``Usage``) for
``LONGEST_PERIOD_SECONDS`` (32 days), the longest any budget counts back, and only while
some queue has a budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from policies.guards import LONGEST_PERIOD_SECONDS, NO_USAGE, Run, Usage, add_run
from policies.queues import PolicySet
from scheduler.decide.plan import Bind
from scheduler.model import Gang, RunningGang


class GuardUsage:
    """Runs going on (by gang id), and the runs that have ended since."""

    def __init__(self) -> None:
        self._running: dict[str, Run] = {}
        self._bound: set[str] = set()  # runs known from their bind only (start: the bind's)
        self._days: dict[str, dict[float, float]] = {}  # queue -> UTC day -> GPU-hours
        self._usage: Usage | None = NO_USAGE  # ``_days`` as a value; None: to make anew
        self._on = False  # some queue has a budget (else nothing is kept)

    def of(self, running: Mapping[str, RunningGang], policies: PolicySet,
           now: float) -> Usage:
        """The usage to hand this cycle's ``decide``: runs known last cycle that are not
        running now (ended, evicted) are finished; a gang running under the same id with
        a later start (its pods recreated) is a new run."""
        if not any(q.guards.budget is not None for q in policies.queues):
            self.clear()
            return NO_USAGE
        self._on = True
        for gid, run in list(self._running.items()):
            rg = running.get(gid)
            if rg is None:
                self._finish(gid, now)
            elif gid in self._bound:  # seen running: its pods say when it started
                self._running[gid] = Run(run.queue, run.gpus, rg.start_time)
                self._bound.discard(gid)
            elif rg.start_time > run.start:
                self._finish(gid, rg.start_time)
        for gid, rg in running.items():
            if gid not in self._running:
                self._running[gid] = Run(rg.gang.queue, rg.gang.gpus, rg.start_time)
        horizon = now - LONGEST_PERIOD_SECONDS
        for days in self._days.values():
            for day in [d for d in days if d < horizon]:
                del days[day]
                self._usage = None
        if self._usage is None:
            self._usage = Usage({q: dict(days) for q, days in self._days.items() if days})
        return self._usage

    def bound(self, binds: Iterable[Bind], gangs: Iterable[Gang], now: float) -> None:
        """Gangs this cycle binds: their runs begin now (they may end before the next
        cycle sees them running)."""
        if not self._on:
            return
        by_id = {g.id: g for g in gangs}
        for b in binds:
            gang = by_id.get(b.gang_id)
            if gang is not None and b.gang_id not in self._running:
                self._running[b.gang_id] = Run(b.queue, gang.gpus, now)
                self._bound.add(b.gang_id)

    def clear(self) -> None:
        self._running.clear()
        self._bound.clear()
        self._days.clear()
        self._usage = NO_USAGE
        self._on = False

    def _finish(self, gid: str, end: float) -> None:
        run = self._running.pop(gid)
        self._bound.discard(gid)
        add_run(self._days, Run(run.queue, run.gpus, run.start, max(end, run.start)))
        self._usage = None
