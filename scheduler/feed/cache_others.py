"""Other schedulers' pods, as the cluster cache keeps them between cycles.

Pods that are not ours are never gangs and never victims, but they take capacity (their
usage per node counts against free resources) and our gangs' pod constraints see them
(affinity, spread, host ports: as ``Occupant``s). ``OtherPods`` keeps both per node, and the
per-node totals and the sorted occupant list a snapshot is built from, recomputed only for
what changed: summing every node's other pods each cycle cost more than the decision on a
large cluster.
"""

from __future__ import annotations

from scheduler.model.resources import Resources, total
from scheduler.model.workloads import PodInfo
from scheduler.world.occupancy import Occupant


class OtherPods:
    """Usage and occupants of other schedulers' pods, per node (not thread-safe: the cache
    calls it under its lock)."""

    __slots__ = ("_dirty", "_listed", "_occupants", "_totals", "_usage")

    def __init__(self) -> None:
        self._usage: dict[str, dict[str, Resources]] = {}  # node -> uid -> usage
        self._occupants: dict[str, dict[str, Occupant]] = {}  # the same pods, as occupants
        self._listed: tuple[Occupant, ...] | None = ()
        # Per-node totals of _usage, recomputed only for the nodes in _dirty.
        self._totals: dict[str, Resources] = {}
        self._dirty: set[str] = set()

    def add(self, pod: PodInfo) -> None:
        """Count *pod* (occupying resources on its node)."""
        node = pod.node_name
        self._usage.setdefault(node, {})[pod.uid] = pod.requests
        self._occupants.setdefault(node, {})[pod.uid] = Occupant(
            node, pod.namespace, pod.labels, 1, pod.requirements.constraints, pod.terminating)
        self._listed = None
        self._dirty.add(node)

    def remove(self, pod: PodInfo) -> bool:
        """Stop counting *pod*; False when it was not counted."""
        node = pod.node_name
        if node not in self._usage or self._usage[node].pop(pod.uid, None) is None:
            return False
        self._occupants[node].pop(pod.uid, None)
        self._listed = None
        self._dirty.add(node)
        return True

    def clear(self) -> None:
        """Forget every pod (the cache re-adds them all)."""
        self._dirty |= set(self._usage) | set(self._totals)
        self._usage.clear()
        self._occupants.clear()
        self._listed = None

    def usage(self) -> dict[str, Resources]:
        """Per-node usage, sorted by node; a new dict only when some node changed (snapshots
        keep the one they were built with)."""
        if self._dirty:
            totals = dict(self._totals)
            for node in self._dirty:
                usage = self._usage.get(node)
                if usage:
                    totals[node] = total(usage.values())
                else:
                    totals.pop(node, None)
            self._totals = dict(sorted(totals.items()))
            self._dirty.clear()
        return self._totals

    def occupants(self) -> tuple[Occupant, ...]:
        """Every pod as an occupant, by node, then uid."""
        if self._listed is None:
            self._listed = tuple(o for n in sorted(self._occupants)
                                 for _, o in sorted(self._occupants[n].items()))
        return self._listed
