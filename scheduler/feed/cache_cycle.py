"""What a cycle reads from the cache: the gangs changed since the last read rebuilt, and the
snapshot derived from the last one (``cycle_input``), or the gangs alone (``gangs_now``).

Separate from ``cache`` (which takes the events in and keeps the indexes that say which
gangs are dirty) because this is the other half of the incremental contract: turning the
dirty set into new gang entries and a snapshot that costs what changed. A mixin, as
``cache_assumed`` and ``cache_native`` are: ``ClusterCache`` provides the stores below.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from scheduler.feed.cache_native import NativeStore
from scheduler.feed.cache_others import OtherPods
from scheduler.feed.facts import ClusterFacts
from scheduler.feed.grouping import (
    GangEntry,
    GangSet,
    GroupingConfig,
    build_gang,
    gang_group,
    gang_job,
)
from scheduler.model import DEFAULT_TOPOLOGY_LABELS, Gang, Node, PodRef, RunningGang
from scheduler.model.resources import Resources
from scheduler.model.workloads import JobInfo, JobSetInfo, PodGroupInfo, PodInfo
from scheduler.world.node_index import NodeIndex
from scheduler.world.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class CycleInput:
    snapshot: Snapshot
    gangs: GangSet
    generation: int  # changes whenever anything in the cache changed


@dataclass(frozen=True, slots=True)
class GangsNow:
    """The running and pending gangs as the cache has them at one moment, without a snapshot
    (``ClusterCache.gangs_now``); *running* is a picture, not changed by later reads."""

    running: Mapping[str, RunningGang]
    pending: tuple[Gang, ...]


class CycleReading:
    """``ClusterCache``'s per-cycle reads (see the module docstring)."""

    _lock: threading.RLock
    grouping: GroupingConfig
    facts: ClusterFacts
    _nodes: dict[str, Node]
    _pods: dict[str, PodInfo]
    _groups: dict[str, PodGroupInfo]
    _jobs: dict[str, JobInfo]
    _jobsets: dict[str, JobSetInfo]
    _operators: dict[str, JobInfo]
    _native: NativeStore
    _others: OtherPods
    _gid_of: dict[str, str]
    _members: dict[str, set[str]]
    _arrivals: dict[str, int]
    _entries: dict[str, GangEntry]
    _pending: dict[str, Gang]
    _pending_sorted: tuple[Gang, ...] | None
    _running: dict[str, RunningGang]
    _changed_running: dict[str, GangEntry]
    _partial: dict[str, tuple[PodRef, ...]]
    _problems: dict[str, str]
    _dirty: set[str]
    _rebuild_all: bool
    _rebuild_snapshot: bool
    _volumes_changed: bool
    _node_index: NodeIndex | None
    _generation: int
    _memo: CycleInput | None

    def change_facts(self, change: Callable[[ClusterFacts], bool], *,
                     namespaces: bool = False) -> None:
        raise NotImplementedError

    def _index(self, pod: PodInfo) -> None:
        raise NotImplementedError

    def _effective(self, uid: str) -> PodInfo:
        raise NotImplementedError

    def _expire_assumptions(self, now: float) -> None:
        raise NotImplementedError

    def cycle_input(self, now: float) -> CycleInput:
        """Snapshot and gangs for one cycle; reused as is while nothing has changed."""
        with self._lock:
            self._expire(now)
            memo = self._memo
            if memo is not None and memo.generation == self._generation:
                return memo
            self._rebuild_dirty()
            other = self._others.usage()
            snapshot = self._next_snapshot(memo, other)
            self._memo = CycleInput(snapshot, self._gang_set(snapshot, other), self._generation)
            return self._memo

    def gangs_now(self, now: float) -> GangsNow:
        """The running and pending gangs as ``cycle_input(now)`` would have them, without
        deriving its snapshot and gang set: for readers that want the gangs only (the live
        runner's writers after a cycle). Lapsed assumptions expire and the changed gangs are
        rebuilt as in ``cycle_input``; the snapshot is left to the next one, which takes in
        what changed since the last (``_changed_running``)."""
        with self._lock:
            self._expire(now)
            memo = self._memo
            if memo is not None and memo.generation == self._generation:
                return GangsNow(memo.snapshot.running, memo.gangs.pending)
            self._rebuild_dirty()
            return GangsNow(dict(self._running), self._pending_gangs())

    def _expire(self, now: float) -> None:
        """Assumptions (binds, pre-bind decisions) that lapsed by *now* are dropped."""
        self._expire_assumptions(now)
        self.change_facts(lambda facts: facts.expire(now))

    def _reindex_all(self) -> None:
        old_ids = set(self._entries) | set(self._members)
        # Every entry is rebuilt from scratch; so are the indexes of their parts.
        self._entries.clear()
        self._pending.clear()
        self._pending_sorted = None
        self._running.clear()
        self._changed_running.clear()
        self._partial.clear()
        self._problems.clear()
        self._gid_of.clear()
        self._members.clear()
        self._others.clear()
        for pod in self._pods.values():
            self._index(pod)
        self._dirty |= old_ids | set(self._members)
        self._rebuild_all = False
        self._rebuild_snapshot = True

    def _rebuild_dirty(self) -> None:
        """Rebuild the entries of the gangs changed since the last read (every one after a
        reindex); those whose running part changed are kept for the next snapshot."""
        if self._rebuild_all:
            self._reindex_all()
        changed_running = self._changed_running
        for gid in sorted(self._dirty):
            uids = self._members.get(gid)
            before = self._entries.pop(gid, None)
            if uids:
                native = self._native.resolve(gid)
                pods = [self._effective(u) for u in uids]
                entry = build_gang(gid, pods,
                                   gang_group(self._groups.get(gid), pods, self._jobsets),
                                   gang_job(gid, pods, self._jobs, native, self._jobsets,
                                            self._operators),
                                   self.grouping, native, self.facts.devices(),
                                   self._arrivals.get(gid, 0))
                if entry != GangEntry():
                    self._entries[gid] = entry
            else:
                self._members.pop(gid, None)
                self._arrivals.pop(gid, None)
                entry = GangEntry()
            old_running = before.running if before else None
            if old_running != entry.running:
                changed_running[gid] = entry
            self._index_entry(gid, before, entry)
        self._dirty.clear()

    def _index_entry(self, gid: str, before: GangEntry | None, entry: GangEntry) -> None:
        """Bring the per-part indexes in step with *gid*'s new entry."""
        if (before.pending if before else None) is not entry.pending:
            self._pending_sorted = None
            if entry.pending is None:
                self._pending.pop(gid, None)
            else:
                self._pending[gid] = entry.pending
        if entry.running is None:
            self._running.pop(gid, None)
        else:
            self._running[gid] = entry.running
        if entry.partially_bound:
            self._partial[gid] = entry.partially_bound
        else:
            self._partial.pop(gid, None)
        if entry.problem:
            self._problems[gid] = entry.problem
        else:
            self._problems.pop(gid, None)

    def _gang_set(self, snapshot: Snapshot, other: dict[str, Resources]) -> GangSet:
        """The cycle's gangs (equal to ``grouping.gang_set`` of every entry)."""
        return GangSet(
            pending=self._pending_gangs(),
            running_by_id=snapshot.running,
            other_usage=other,
            partially_bound=dict(sorted(self._partial.items())),
            problems=dict(sorted(self._problems.items())),
        )

    def _pending_gangs(self) -> tuple[Gang, ...]:
        """The pending gangs by id (sorted again only after one changed)."""
        if self._pending_sorted is None:
            pending = self._pending
            self._pending_sorted = tuple(map(pending.__getitem__, sorted(pending)))
        return self._pending_sorted

    def _next_snapshot(self, memo: CycleInput | None, other: dict[str, Resources]) -> Snapshot:
        volumes, self._volumes_changed = self._volumes_changed, False
        changed, self._changed_running = self._changed_running, {}
        if memo is None or self._rebuild_snapshot:
            self._rebuild_snapshot = False
            running = [e.running for e in self._entries.values() if e.running is not None]
            if self._node_index is None:
                self._node_index = NodeIndex(self._nodes.values(), DEFAULT_TOPOLOGY_LABELS)
            return Snapshot.on(self._node_index, running, other,
                               other_pods=self._others.occupants(),
                               namespaces=self.facts.namespaces(), volumes=self.facts.catalog())
        snapshot = memo.snapshot
        if volumes:
            snapshot = snapshot.with_volumes(self.facts.catalog())
        gone = [gid for gid in changed if gid in snapshot.running]
        # Replaced, not ended: what their claims hold is the catalog's to say.
        snapshot = snapshot.without_gangs(gone, ending=False)
        for entry in changed.values():
            if entry.running is not None:
                snapshot = snapshot.with_running(entry.running)
        return snapshot
