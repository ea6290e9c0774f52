"""The long-lived, in-memory picture of the cluster that each cycle snapshots.

Fed by events (the live informers, or the simulator's actuator) and by the scheduler's own
binds, *assumed* bound until the watch confirms them (``cache_assumed``). An event that
changes nothing the scheduler reads (its own condition or status written back, a heartbeat,
a relist) is no change: the generation moves, and the live loop wakes, only on a real one.

Incremental: a change marks only its gang dirty; the next cycle rebuilds just those gangs
and derives the new snapshot from the previous one (``without_gangs`` / ``with_running``).
That keeps a cycle on a busy cluster, or a simulated month of trace, proportional to what
changed rather than to the cluster's size. Thread-safe: informers write while the loop reads.

Other schedulers' pods count against capacity and, as ``Occupant``s, for our gangs'
constraints; namespaces and volumes (claim decisions assumed) are in ``facts``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from scheduler.feed.cache_assumed import Assuming, Assumption
from scheduler.feed.cache_failures import FailureLog
from scheduler.feed.cache_native import NativeStore, WorkloadFeeding
from scheduler.feed.cache_others import OtherPods
from scheduler.feed.facts import ClusterFacts
from scheduler.feed.grouping import (
    GangEntry,
    GangSet,
    GroupingConfig,
    build_gang,
    gang_group,
    gang_job,
    group_id,
    is_ours,
)
from scheduler.model import DEFAULT_TOPOLOGY_LABELS, Gang, Node, PodRef, RunningGang
from scheduler.model.failures import Failure
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


class ClusterCache(WorkloadFeeding, Assuming):
    """Nodes, pods, pod groups and jobs by key, plus the scheduler's assumed binds."""

    def __init__(self, grouping: GroupingConfig | None = None, assume_ttl: float = 30.0) -> None:
        self.grouping = grouping or GroupingConfig()
        self.assume_ttl = assume_ttl
        self._lock = threading.RLock()
        self._nodes: dict[str, Node] = {}
        self._pods: dict[str, PodInfo] = {}  # by uid
        self._groups: dict[str, PodGroupInfo] = {}  # by namespace/name
        self._jobs: dict[str, JobInfo] = {}
        self._jobsets: dict[str, JobSetInfo] = {}
        #: Operators' objects that size their pods' gangs, by ``operator_key``.
        self._operators: dict[str, JobInfo] = {}
        self._native = NativeStore()  # Kubernetes' own gang API (scheduling.k8s.io)
        self._assumed: dict[str, Assumption] = {}  # pod uid -> node
        # Derived indexes, maintained on every change.
        self._gid_of: dict[str, str] = {}  # our pods: uid -> gang id
        #: Gangs some pod of which names a device claim: rebuilt when a device object
        #: changes (what their claims count for, ``Role.device_gpus``). May name gangs gone.
        self._device_gangs: set[str] = set()
        self._members: dict[str, set[str]] = {}  # gang id -> uids
        self._others = OtherPods()  # pods of other schedulers
        #: Our gangs' last failures, kept after their pods are gone (``cache_failures``).
        self._failures = FailureLog()
        self.facts = ClusterFacts()
        self._volumes_changed = False
        self._entries: dict[str, GangEntry] = {}
        # The entries' parts, kept as entries change, so that a cycle's ``GangSet`` costs what
        # changed rather than a pass over every gang (most of them running, unchanged).
        self._pending: dict[str, Gang] = {}
        self._pending_sorted: tuple[Gang, ...] | None = ()
        self._running: dict[str, RunningGang] = {}
        #: Gangs whose running part changed since the last snapshot was derived (rebuilt by
        #: ``gangs_now`` or ``cycle_input``): the next snapshot takes them in.
        self._changed_running: dict[str, GangEntry] = {}
        self._partial: dict[str, tuple[PodRef, ...]] = {}
        self._problems: dict[str, str] = {}
        self._dirty: set[str] = set()
        self._rebuild_all = True
        self._rebuild_snapshot = True
        #: Derived from the nodes alone, shared until a node changes (``NodeIndex``).
        self._node_index: NodeIndex | None = None
        self._generation = 0
        self._memo: CycleInput | None = None
        #: Called on every change (from the thread that made it): wakes the live loop.
        self.on_change: Callable[[], None] | None = None

    # Feeding ------------------------------------------------------------------------------
    def _touch(self) -> None:
        self._generation += 1
        if self.on_change is not None:
            self.on_change()

    def upsert_node(self, node: Node) -> None:
        with self._lock:
            if self._nodes.get(node.name) == node:
                return  # a heartbeat, a field the scheduler does not read: nothing changed
            self._nodes[node.name] = node
            self._node_index = None
            self._rebuild_snapshot = True
            self._touch()

    def delete_node(self, name: str) -> None:
        with self._lock:
            if self._nodes.pop(name, None) is not None:
                self._node_index = None
                self._rebuild_snapshot = True
                self._touch()

    def _unindex(self, pod: PodInfo) -> None:
        gid = self._gid_of.pop(pod.uid, None)
        if gid is not None:
            self._members[gid].discard(pod.uid)
            self._dirty.add(gid)
        elif self._others.remove(pod):
            self._rebuild_snapshot = True

    def _index(self, pod: PodInfo) -> None:
        if is_ours(pod, self.grouping):
            gid = group_id(pod, self._jobs, self.grouping, self._jobsets)
            self._gid_of[pod.uid] = gid
            self._members.setdefault(gid, set()).add(pod.uid)
            self._dirty.add(gid)
            if pod.requirements.constraints.device_claims:
                self._device_gangs.add(gid)
        elif pod.occupies_node:
            self._others.add(pod)
            self._rebuild_snapshot = True

    def upsert_pod(self, pod: PodInfo) -> None:
        with self._lock:
            old = self._pods.get(pod.uid)
            if old == pod:  # e.g. the scheduler's own condition written: nothing to redo
                self._pods[pod.uid] = pod
                return
            if old is not None:
                self._unindex(old)
            self._pods[pod.uid] = pod
            self._index(pod)
            gid = self._gid_of.get(pod.uid)
            if pod.failure is not None and gid is not None:
                self._failures.record(gid, pod.failure)
            if pod.node_name and pod.uid in self._assumed:
                del self._assumed[pod.uid]  # the watch confirmed our bind (or another's)
            self._touch()

    def delete_pod(self, uid: str) -> None:
        with self._lock:
            self._assumed.pop(uid, None)
            old = self._pods.pop(uid, None)
            if old is not None:
                gid = self._gid_of.get(uid)
                self._unindex(old)
                if gid == old.key and old.owner is None:  # a lone pod: its own owner, gone
                    self._failures.forget_unowned(gid)
                self._touch()

    def upsert_group(self, group: PodGroupInfo) -> None:
        with self._lock:
            unchanged = self._groups.get(group.key) == group
            self._groups[group.key] = group
            if unchanged:  # e.g. the status the scheduler wrote
                return
            self._dirty.add(group.key)
            self._touch()

    def delete_group(self, key: str) -> None:
        with self._lock:
            if self._groups.pop(key, None) is not None:
                self._failures.forget_unowned(key)
                self._dirty.add(key)
                self._touch()

    # Namespaces and volumes ------------------------------------------------------------------
    def change_facts(self, change: Callable[[ClusterFacts], bool], *,
                     namespaces: bool = False) -> None:
        """Apply a ``ClusterFacts`` setter (True if it changed something) under the lock."""
        with self._lock:
            devices = self.facts.devices_generation
            if change(self.facts):
                self._rebuild_snapshot |= namespaces
                self._volumes_changed |= not namespaces
                if self.facts.devices_generation != devices:
                    self._device_gangs &= set(self._members)
                    self._dirty |= self._device_gangs
                self._touch()

    # Reading ------------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        return self._generation

    def pods(self) -> list[PodInfo]:
        with self._lock:
            return list(self._pods.values())

    def pod(self, uid: str) -> PodInfo | None:
        with self._lock:
            return self._pods.get(uid)

    def nodes(self) -> list[Node]:
        with self._lock:
            return list(self._nodes.values())

    def group(self, key: str) -> PodGroupInfo | None:
        with self._lock:
            return self._groups.get(key)

    def groups(self) -> list[PodGroupInfo]:
        """Every PodGroup as its gang sees it (``grouping.gang_group``: the gang of a JobSet's
        last step needs fewer members than its PodGroup counts)."""
        with self._lock:
            return [gang_group(group, [self._pods[u] for u in self._members.get(key, ())],
                               self._jobsets) or group for key, group in self._groups.items()]

    def gang_pods(self, gang_id: str, assumed: bool = False) -> list[PodInfo]:
        """The pods of a gang as the watch last reported them, or with *assumed* binds applied
        (what a cycle sees: a gang bound a moment ago is bound, before the watch confirms it)."""
        with self._lock:
            uids = sorted(self._members.get(gang_id, ()))
            if assumed:
                return [self._effective(u) for u in uids]
            return [self._pods[u] for u in uids]

    def gang_of_pod(self, namespace: str, name: str) -> str | None:
        """The gang a pod of this scheduler belongs to (None: no such pod, or not ours)."""
        with self._lock:
            return next((self._gid_of[uid] for uid, pod in self._pods.items()
                         if pod.namespace == namespace and pod.name == name
                         and uid in self._gid_of), None)

    def failures(self, gang_id: str) -> tuple[Failure, ...]:
        """The gang's last failures, newest first, also after its pods are gone."""
        with self._lock:
            return self._failures.of(gang_id)

    def failed_gangs(self) -> tuple[str, ...]:
        """The gangs with failures kept (sorted), whether or not they have pods now."""
        with self._lock:
            return self._failures.gang_ids()

    def queue_of(self, gang_id: str) -> str:
        """The queue of a gang as the last cycle's input built it ("" if unknown): for log
        lines about a gang, written outside the cycle that decided about it."""
        with self._lock:
            entry = self._entries.get(gang_id)
        if entry is None:
            return ""
        if entry.pending is not None:
            return entry.pending.queue
        return entry.running.gang.queue if entry.running is not None else ""

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
                                   self.grouping, native, self.facts.devices())
                if entry != GangEntry():
                    self._entries[gid] = entry
            else:
                self._members.pop(gid, None)
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
            self._pending_sorted = tuple(pending[gid] for gid in sorted(pending))
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
