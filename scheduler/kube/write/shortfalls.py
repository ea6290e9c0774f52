"""Running gangs below their minimum, told where users look: an event, and a metric.

Why from the leader's loop after each cycle: the shortfall is worked out by grouping from the
cache (``scheduler.model.shortfall``, which also says what is *not* short: completed ranks, a
gang being evicted), so every replica knows it, but only the leader writes. A Warning
``BelowMinimum`` event goes to the object a user describes: the gang's PodGroup, else the one
controller (a Job) that owns all its pods, else each member that stays. It is emitted once a
gang has been short of the same members for ``settle_seconds`` (members that go one after
another, an admin evicting each of them or pods killed together, are an eviction under way,
not a gang running short; one found at the first report, after a restart or a takeover, is
older than that and told at once), and again only when what is missing changes (a replacement
created, a second node lost), so a gang that stays short costs no writes. A Normal
``MinimumRestored`` follows only when its minimum really runs again: a gang that was told
short and then has no member left (evicted, pending again) is not restored, and nothing more
is said (its pods' pending reason takes over). The PodGroup's condition is ``group_sync``'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

import structlog

from scheduler.kube.events import EventReason, EventRecorder, EventType, ObjectRef
from scheduler.model import RunningGang
from scheduler.model.workloads import PodGroupInfo, PodInfo
from scheduler.run.metrics import SchedulerMetrics

log = structlog.get_logger()


def regarding(gang_id: str, group: PodGroupInfo | None,
              pods: list[PodInfo]) -> list[ObjectRef]:
    """The objects a gang's events go to (see the module docstring)."""
    ns, name = gang_id.split("/", 1)
    if group is not None:
        return [ObjectRef.podgroup(ns, name, group.uid)]
    owners = {p.owner for p in pods if p.owner is not None}
    if len(owners) == 1 and (owner := next(iter(owners))).kind == "Job":
        return [ObjectRef("Job", ns, owner.name, owner.uid, "batch/v1")]
    return [ObjectRef("Pod", p.namespace, p.name, p.uid) for p in pods
            if p.node_name and not p.terminating and not p.is_finished]


#: How long a gang is short before it is told (see the module docstring).
SETTLE_SECONDS = 5.0


class ShortfallReporter:
    """Tracks which gangs it has told about, by id -> the description last emitted."""

    def __init__(self, events: EventRecorder, metrics: SchedulerMetrics,
                 group: Callable[[str], PodGroupInfo | None],
                 pods: Callable[[str], list[PodInfo]],
                 settle_seconds: float = SETTLE_SECONDS) -> None:
        self.events, self.metrics, self.group, self.pods = events, metrics, group, pods
        self.settle_seconds = settle_seconds
        self._told: dict[str, str] = {}
        #: Gang id -> what it has been short of, untold, and since when.
        self._since: dict[str, tuple[str, float]] = {}
        self._reported = False
        #: The running gangs of the last report: the loop reports them again once an untold
        #: shortfall has settled and no cycle has run meanwhile (an idle loop runs none).
        self._running: Mapping[str, RunningGang] = {}

    def report(self, running: Mapping[str, RunningGang], now: float) -> None:
        """Emit what changed since the last call and set the per-queue gauge; *now* on any
        steady clock (only differences are used). A shortfall there at the first report (a
        restart, a takeover) is older than this reporter: settled, told at once."""
        self._running = running
        short = {gid: r for gid, r in running.items() if r.shortfall is not None}
        texts = {gid: r.shortfall.describe() for gid, r in short.items() if r.shortfall}
        first, self._reported = not self._reported, True
        fresh = now - self.settle_seconds if first else now
        self._since = {gid: since if (since := self._since.get(gid)) and since[0] == text
                       else (text, fresh) for gid, text in texts.items()}
        told = {gid: r for gid, r in short.items()
                if gid in self._told or now - self._since[gid][1] >= self.settle_seconds}
        self.metrics.set_short(Counter(r.gang.queue for r in told.values()))
        for gid, r in sorted(told.items()):
            text = texts[gid]
            if self._told.get(gid) == text:
                continue
            log.warning("gang_below_minimum", gang=gid, queue=r.gang.queue, shortfall=text)
            self._emit(gid, EventReason.BELOW_MINIMUM, f"gang {gid}: {text}",
                       EventType.WARNING)
            self._told[gid] = text
        for gid in sorted(set(self._told) - set(short)):
            now_running = running.get(gid)
            if now_running is None:  # no member left: pending again, not restored
                del self._told[gid]
                log.info("gang_short_gone", gang=gid)
            elif not now_running.terminating:  # (else being evicted: wait and see)
                del self._told[gid]
                log.info("gang_minimum_restored", gang=gid)
                self._emit(gid, EventReason.MINIMUM_RESTORED,
                           f"gang {gid}: has its minimum again", EventType.NORMAL)

    def due_in(self, now: float) -> float | None:
        """Seconds until a shortfall not yet told has settled (0 if one has), None if none
        waits: the loop sleeps no longer, then calls ``settle``. Why: a gang that runs short
        changes the cluster once, so no cycle follows to report it after its settle time."""
        waiting = [since + self.settle_seconds for gid, (_, since) in self._since.items()
                   if gid not in self._told]
        return max(0.0, min(waiting) - now) if waiting else None

    def settle(self, now: float) -> None:
        """Report the last cycle's running gangs again (nothing changed since, or a cycle
        would have run), telling what has settled by *now*."""
        self.report(self._running, now)

    def _emit(self, gid: str, reason: EventReason, message: str, type_: EventType) -> None:
        for ref in regarding(gid, self.group(gid), self.pods(gid)):
            self.events.emit(ref, reason, message, type_)
