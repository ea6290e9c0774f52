"""The runtime of a workload's runs, kept on the object its user submitted, so that a
queue's ``maxRuntimeSeconds`` counts them all (``policies.guards``).

Why at the edge: a run's end is a fact about the cluster (the gang's pods went, or came back
with a later start: its controller recreated them), and the total must survive a scheduler
restart and a change of leader. So after each cycle the leader's loop hands the running
gangs to ``RuntimeLedger.observe``; a gang with a runtime limit that ran last cycle and no
longer does (or runs again, started later) has ended a run, and its owner (``Gang.owner``:
its JobSet, Job or PodGroup) gets ``gangscheduler.io/runtime-seconds``: the earlier runs'
seconds it was read with (``Gang.ran_before``) plus this run's. The grouping reads it back
into ``Gang.ran_before`` and the pure core counts it; nothing here decides anything.

What is not counted: a run that ended while no leader ran (the next leader never saw it),
and the gangs of a lone pod (it never runs twice) or of a native PodGroup without a Job.
A JobSet whose steps are gangs of their own keeps one total, that of its last step to end.
Only gangs with a limit are followed: a cluster without runtime limits writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from policies.queues import QueueSet
from scheduler.decide.guards import limit_of
from scheduler.kube.write.status import StatusWriter
from scheduler.kube.write.writer import BackgroundWriter
from scheduler.model import RunningGang


class RuntimeLedger:
    """The runs seen going last cycle (latest snapshot of each), to notice their end."""

    def __init__(self, statuses: StatusWriter, writer: BackgroundWriter) -> None:
        self.statuses, self.writer = statuses, writer
        self._runs: dict[str, RunningGang] = {}

    def observe(self, running: Mapping[str, RunningGang], queues: QueueSet,
                now: float) -> None:
        """*running*: this cycle's running gangs by id; *now*: the cycle's time (the end of
        a run that is no longer seen; a run seen again with a later start ended then)."""
        for gid, last in self._runs.items():
            rg = running.get(gid)
            if rg is None:
                self._record(last, now)
            elif rg.start_time > last.start_time:
                self._record(last, rg.start_time)
        # The latest snapshot of each run: its ran_before then reflects the total written
        # when its previous run ended, even if the watch showed it only after it started.
        self._runs = {gid: rg for gid, rg in running.items()
                      if rg.gang.owner is not None and limit_of(queues, rg.gang) is not None}

    def forget(self) -> None:
        """On becoming leader: runs seen in an earlier term may have been recorded by the
        leader between (counting them again would charge that time twice)."""
        self._runs.clear()

    def _record(self, run: RunningGang, end: float) -> None:
        owner = run.gang.owner
        assert owner is not None
        total = run.gang.ran_before + max(0.0, end - run.start_time)
        ns = run.gang.namespace
        self.writer.submit(f"runtime/{owner.uid}",
                           lambda: self.statuses.set_runtime_seconds(ns, owner, total))
