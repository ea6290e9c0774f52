"""Running gangs below their minimum, told where users look: an event, and a metric.

Why from the leader's loop after each cycle: the shortfall is worked out by grouping from the
cache (``scheduler.model.shortfall``), so every replica knows it, but only the leader writes.
A Warning ``BelowMinimum`` event goes to the object a user describes: the gang's PodGroup, else
the one controller (a Job) that owns all its pods, else each member that stays. It is emitted
when a gang becomes short and again only when what is missing changes (a replacement created,
a second node lost), so a gang that stays short costs no writes; a Normal ``MinimumRestored``
follows once it is whole again (or its last member is gone). The PodGroup's condition is
``group_sync``'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

import structlog

from scheduler.kube.events import EventReason, EventRecorder, EventType, ObjectRef
from scheduler.metrics import SchedulerMetrics
from scheduler.model import RunningGang
from scheduler.model.workloads import PodGroupInfo, PodInfo

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


class ShortfallReporter:
    """Tracks which gangs it has told about, by id -> the description last emitted."""

    def __init__(self, events: EventRecorder, metrics: SchedulerMetrics,
                 group: Callable[[str], PodGroupInfo | None],
                 pods: Callable[[str], list[PodInfo]]) -> None:
        self.events, self.metrics, self.group, self.pods = events, metrics, group, pods
        self._told: dict[str, str] = {}

    def report(self, running: Mapping[str, RunningGang]) -> None:
        """Emit what changed since the last call and set the per-queue gauge."""
        short = {gid: r for gid, r in running.items() if r.shortfall is not None}
        per_queue = Counter(r.gang.queue for r in short.values())
        self.metrics.set_short(per_queue)
        for gid, r in sorted(short.items()):
            assert r.shortfall is not None
            text = r.shortfall.describe()
            if self._told.get(gid) == text:
                continue
            log.warning("gang_below_minimum", gang=gid, queue=r.gang.queue, shortfall=text)
            self._emit(gid, EventReason.BELOW_MINIMUM, f"gang {gid}: {text}",
                       EventType.WARNING)
            self._told[gid] = text
        for gid in sorted(set(self._told) - set(short)):
            del self._told[gid]
            whole = gid in running
            log.info("gang_minimum_restored", gang=gid, running=whole)
            self._emit(gid, EventReason.MINIMUM_RESTORED,
                       f"gang {gid}: has its minimum again" if whole
                       else f"gang {gid}: no member runs any more", EventType.NORMAL)

    def _emit(self, gid: str, reason: EventReason, message: str, type_: EventType) -> None:
        for ref in regarding(gid, self.group(gid), self.pods(gid)):
            self.events.emit(ref, reason, message, type_)
