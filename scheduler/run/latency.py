"""Since when each pending gang has been complete: where its scheduling latency starts.

Gang scheduling latency runs from the first cycle that saw a gang complete (all required
members present) to when all of it was bound (its outcome landed); a gang that stops being
complete or pending (a member deleted, the gang withdrawn) starts over. The loop asks
``track`` each cycle, ``take`` when a gang's binds are handed over, and ``restore`` when
they failed (the gang is pending again, its latency runs on).
"""

from __future__ import annotations

from scheduler.kit.memo import LARGE, kept_for
from scheduler.model import Gang


class CompleteSince:
    """Gang id -> the time of the first cycle that saw it complete."""

    def __init__(self) -> None:
        self.since: dict[str, float] = {}
        self._tracked: tuple[Gang, ...] | None = None  # the pending gangs last tracked
        self._complete_of: dict[str, tuple[Gang, bool]] = {}  # gang id -> (gang, complete?)

    def track(self, pending: tuple[Gang, ...], now: float) -> None:
        """Remember when each pending gang was first seen complete; forget the others."""
        if pending is self._tracked:
            return  # the same gangs as last cycle: nothing to add or forget
        self._tracked = pending
        # Completeness of a gang object never changes: reuse last cycle's for the same objects.
        before = self._complete_of
        known: dict[str, tuple[Gang, bool]] = {}
        complete: set[str] = set()
        for g in pending:
            done = kept_for(before, g.id, g, _is_complete, LARGE)
            known[g.id] = (g, done)
            if done:
                complete.add(g.id)
        self._complete_of = known
        for gid in [gid for gid in self.since if gid not in complete]:
            del self.since[gid]
        for gid in complete:
            self.since.setdefault(gid, now)

    def take(self, gang_ids: list[str]) -> dict[str, float]:
        """The start of each of *gang_ids* known (no longer kept: their binds are out)."""
        return {gid: self.since.pop(gid) for gid in gang_ids if gid in self.since}

    def restore(self, gang_id: str, since: float) -> None:
        """The gang's bind failed: it is pending again, its latency runs on from *since*."""
        self.since.setdefault(gang_id, since)


def _is_complete(gang: Gang) -> bool:
    return gang.is_complete
