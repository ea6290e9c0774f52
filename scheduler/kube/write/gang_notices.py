"""What grouping chose where a gang's own objects disagree, told once: an event and a log line.

A gang's PodGroup may name one queue and its pods another, or its members carry different
priorities: grouping picks one by a documented precedence (``grouping_terms.queue_of``,
``grouping_terms.priority_notice``) and the gang is scheduled, so without a word its user
would never learn that part of what they wrote was overruled. The leader's loop hands every
gang (pending and running) to ``report`` after each cycle; a Warning ``InconsistentGang``
event names both values and the one used. It goes where ``BelowMinimum`` goes (the PodGroup,
else the one Job owning every pod), else to each member. A gang is told again only when what
it is told changes, or after it agreed (or was gone) meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import structlog

from scheduler.kube.events import EventReason, EventRecorder, EventType, ObjectRef
from scheduler.kube.write.shortfalls import regarding
from scheduler.model import Gang
from scheduler.model.workloads import PodGroupInfo, PodInfo

log = structlog.get_logger()


class GangNotices:
    """Tracks which gangs it has told, by id -> the notices last told."""

    def __init__(self, events: EventRecorder, group: Callable[[str], PodGroupInfo | None],
                 pods: Callable[[str], list[PodInfo]]) -> None:
        self.events, self.group, self.pods = events, group, pods
        self._told: dict[str, tuple[str, ...]] = {}

    def report(self, gangs: Iterable[Gang]) -> None:
        """Tell each gang whose notices are new; forget those that have none any more."""
        current = {g.id: g for g in gangs if g.notices}
        for gid, gang in sorted(current.items()):
            if self._told.get(gid) == gang.notices:
                continue
            message = f"gang {gid}: " + "; ".join(gang.notices)
            log.warning("gang_inconsistent", gang=gid, queue=gang.queue,
                        priority=gang.priority, notices=message)
            pods = self.pods(gid)
            targets = regarding(gid, self.group(gid), pods) or [
                ObjectRef("Pod", p.namespace, p.name, p.uid) for p in pods]
            for ref in targets:
                self.events.emit(ref, EventReason.INCONSISTENT_GANG, message, EventType.WARNING)
            self._told[gid] = gang.notices
        for gid in set(self._told) - set(current):
            del self._told[gid]
