"""The last failures of each gang, kept after its pods are gone (``model.failures``).

Why in the feed: the cache is where pod-derived facts live, and a failed pod's record must
outlive the pod (a preempted member is deleted once it stops; a Job's controller may delete
or replace failed pods) so that ``explain`` and the views can still say why a gang keeps
failing while its controller backs off.

Bounded, because a crash-looping Job fails forever: the newest ``PER_GANG`` failures of a
gang, for at most ``GANGS`` gangs (the gang that failed least recently is forgotten first),
and a gang's records go with its owner (its Job, its PodGroup, or the lone pod itself).
Not thread-safe on its own: the cache calls it under its lock.
"""

from __future__ import annotations

from collections import OrderedDict

from scheduler.model.failures import Failure

#: Failures kept per gang: every rank of a large gang is not the point, its last few are.
PER_GANG = 16
#: Gangs kept: far more than fail at once; a bound, not a working set.
GANGS = 1024


class FailureLog:
    """Gang id -> its newest failures, one per failed pod."""

    def __init__(self, per_gang: int = PER_GANG, gangs: int = GANGS) -> None:
        self.per_gang, self.gangs = per_gang, gangs
        self._by_gang: OrderedDict[str, dict[str, Failure]] = OrderedDict()

    def record(self, gang_id: str, failure: Failure) -> None:
        """Keep *failure* (a later status of the same pod replaces its record)."""
        kept = self._by_gang.pop(gang_id, {})
        kept.pop(failure.uid, None)
        kept[failure.uid] = failure
        while len(kept) > self.per_gang:
            del kept[next(iter(kept))]
        self._by_gang[gang_id] = kept
        while len(self._by_gang) > self.gangs:
            self._by_gang.popitem(last=False)

    def of(self, gang_id: str) -> tuple[Failure, ...]:
        """The gang's failures, newest first (those of unknown time last, by arrival)."""
        kept = list(self._by_gang.get(gang_id, {}).values())
        order = {f.uid: i for i, f in enumerate(kept)}
        return tuple(sorted(kept, key=lambda f: (f.finished_at is None,
                                                 -(f.finished_at or 0.0), -order[f.uid])))

    def gang_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self._by_gang))

    def forget_unowned(self, gang_id: str) -> None:
        """Drop the gang's failures of pods no Job owns: their owner (a PodGroup, the lone
        pod itself) is gone. A Job's stay until the Job goes (``forget_job``): its PodGroup
        may be made again for the next attempt."""
        kept = {u: f for u, f in self._by_gang.get(gang_id, {}).items() if f.job}
        if kept:
            self._by_gang[gang_id] = kept
        else:
            self._by_gang.pop(gang_id, None)

    def forget_job(self, key: str) -> None:
        """Drop the failures of the Job *key* (``namespace/name``), which is gone."""
        namespace, _, name = key.partition("/")
        for gang_id in [g for g in self._by_gang if g.partition("/")[0] == namespace]:
            kept = {u: f for u, f in self._by_gang[gang_id].items() if f.job != name}
            if kept:
                self._by_gang[gang_id] = kept
            else:
                del self._by_gang[gang_id]
