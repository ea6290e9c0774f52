"""GPU-hours of runs that ended, remembered for the queues' budgets (``policies.guards``).

Why here: a finished gang leaves the snapshot, but its GPU-hours still count against its
queue's budget until the period ends. ``decide`` stays pure: this store, fed by the same
cycle input as the loop's other small modules, hands it the finished runs as ``Usage``.
Runs still going are read from the snapshot each cycle (their start comes from their pods),
so after a restart the running usage is rebuilt at once; finished runs are kept in memory
only and are lost on a restart (a queue may then start gangs its budget would have held
until the period ends). Runs are kept for ``LONGEST_PERIOD_SECONDS`` (32 days), the longest
any budget counts back, and only while some queue has a budget.
"""

from __future__ import annotations

from collections.abc import Mapping

from policies.guards import LONGEST_PERIOD_SECONDS, NO_USAGE, Run, Usage
from policies.queues import PolicySet
from scheduler.model import RunningGang


class GuardUsage:
    """Running gangs seen last cycle, and the runs that have ended since."""

    def __init__(self) -> None:
        self._running: dict[tuple[str, float], Run] = {}  # (gang id, start) -> its run
        self._finished: list[Run] = []  # by end time

    def of(self, running: Mapping[str, RunningGang], policies: PolicySet,
           now: float) -> Usage:
        """The usage to hand this cycle's ``decide``: records runs that were running last
        cycle and are not now (ended, evicted, or restarted under the same id)."""
        if not any(q.guards.budget is not None for q in policies.queues):
            self._running.clear()
            self._finished.clear()
            return NO_USAGE
        current = {(gid, rg.start_time): rg for gid, rg in running.items()}
        for key, run in list(self._running.items()):
            if key not in current:
                self._finished.append(Run(run.queue, run.gpus, run.start, now))
                del self._running[key]
        for key, rg in current.items():
            if key not in self._running:
                self._running[key] = Run(rg.gang.queue, rg.gang.gpus, rg.start_time)
        horizon = now - LONGEST_PERIOD_SECONDS
        if self._finished and self._finished[0].end is not None \
                and self._finished[0].end < horizon:
            self._finished = [r for r in self._finished if r.end is None or r.end >= horizon]
        return Usage(tuple(self._finished))
