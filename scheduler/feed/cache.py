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

import itertools
import threading
from collections.abc import Callable

from scheduler.feed.cache_assumed import Assuming, Assumption
from scheduler.feed.cache_cycle import CycleInput, CycleReading
from scheduler.feed.cache_failures import FailureLog
from scheduler.feed.cache_native import NativeStore, WorkloadFeeding
from scheduler.feed.cache_others import OtherPods
from scheduler.feed.facts import ClusterFacts
from scheduler.feed.grouping import (
    GangEntry,
    GroupingConfig,
    gang_group,
    group_id,
    is_ours,
)
from scheduler.model import Gang, Node, PodRef, RunningGang
from scheduler.model.failures import Failure
from scheduler.model.workloads import JobInfo, JobSetInfo, PodGroupInfo, PodInfo
from scheduler.world.node_index import NodeIndex


class ClusterCache(WorkloadFeeding, Assuming, CycleReading):
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
        #: Gang id -> the order it was first seen in (``Gang.arrival``), while it has pods.
        self._arrivals: dict[str, int] = {}
        self._arrived = itertools.count(1)
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
            if gid not in self._arrivals:
                self._arrivals[gid] = next(self._arrived)
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
