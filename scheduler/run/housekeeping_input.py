"""What ``decide`` needs to know besides the pending gangs, gathered for each cycle.

Why apart from the loop: the loop's job is the cycle; this gathers one of its inputs
(``scheduler.decide.housekeeping.Housekeeping``) from the cycle's own input, the backoffs, and
the cache's pods of the gangs concerned: gangs in backoff and why their last bind failed,
groups of pods that cannot be formed (with their pods), gangs left partly bound (whether they
started, whether a bind was cut, their timeout) and since when, and whether this is a
takeover. It keeps the one thing that outlives a cycle: when each gang was first seen partly
bound (its timeout runs from then).
"""

from __future__ import annotations

from scheduler.decide.housekeeping import (
    FormationProblem,
    Housekeeping,
    PartlyBound,
    cut_while_binding,
)
from scheduler.feed.cache import ClusterCache
from scheduler.feed.cache_cycle import CycleInput
from scheduler.model import PodRef
from scheduler.model.workloads import PodPhase
from scheduler.run.backoff import Backoffs

_NO_HOUSEKEEPING = Housekeeping()


class HousekeepingInput:
    """*repair_grace*: see ``scheduler.decide.housekeeping``."""

    def __init__(self, cache: ClusterCache, backoffs: Backoffs, repair_grace: float) -> None:
        self.cache, self.backoffs, self.repair_grace = cache, backoffs, repair_grace
        self._partly_since: dict[str, float] = {}  # gang id -> first cycle seen partly bound

    def of(self, inp: CycleInput, now: float, takeover: bool) -> Housekeeping:
        """The cycle's housekeeping (the one shared empty value when there is none)."""
        gangs = inp.gangs
        since = self._partly_since
        for gid in [gid for gid in since if gid not in gangs.partially_bound]:
            del since[gid]
        if not (self.backoffs or gangs.problems or gangs.partially_bound or takeover):
            return _NO_HOUSEKEEPING
        cache = self.cache
        unformed = {gid: FormationProblem(why, tuple(
            PodRef(p.namespace, p.name, p.uid)
            for p in cache.gang_pods(gid) if not p.node_name), cache.native_group(gid))
            for gid, why in gangs.problems.items()}
        partly = {}
        for gid, refs in gangs.partially_bound.items():
            pods = {p.uid: p for p in cache.gang_pods(gid)}
            bound = [pods[r.uid] for r in refs if r.uid in pods]
            started = any(p.phase is not PodPhase.PENDING for p in bound)
            group = cache.group(gid)
            partly[gid] = PartlyBound(refs, started, since.setdefault(gid, now),
                                      cut_while_binding(bound, pods.values()),
                                      group.schedule_timeout_seconds if group else None)
        backoff = self.backoffs.until(now)
        return Housekeeping(backoff, unformed, partly, takeover, self.repair_grace,
                            failed_binds=self.backoffs.failed_binds(backoff))
