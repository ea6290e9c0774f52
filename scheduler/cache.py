"""The long-lived, in-memory picture of the cluster that each cycle snapshots.

Fed by events (the live informers, or the simulator's actuator) and by the scheduler's own
binds: after a successful bind the pod is *assumed* bound until the watch confirms it, so
the next cycle does not hand the same capacity out twice (kube-scheduler's assume/forget).
An assumption that the watch never confirms expires after ``assume_ttl`` seconds.

Thread-safe: informer threads write while the scheduling loop reads. Building the cycle
input is memoised on a change counter, so an idle cluster costs almost nothing per cycle.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.grouping import GangSet, GroupingConfig, build_gangs
from scheduler.model import Node, PodRef
from scheduler.model.workloads import JobInfo, PodGroupInfo, PodInfo, PodPhase
from scheduler.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class CycleInput:
    snapshot: Snapshot
    gangs: GangSet
    generation: int  # changes whenever anything in the cache changed


@dataclass(slots=True)
class _Assumption:
    node: str
    at: float


class ClusterCache:
    """Nodes, pods, pod groups and jobs by key, plus the scheduler's assumed binds."""

    def __init__(self, grouping: GroupingConfig | None = None, assume_ttl: float = 30.0) -> None:
        self.grouping = grouping or GroupingConfig()
        self.assume_ttl = assume_ttl
        self._lock = threading.RLock()
        self._nodes: dict[str, Node] = {}
        self._pods: dict[str, PodInfo] = {}  # by uid
        self._groups: dict[str, PodGroupInfo] = {}  # by namespace/name
        self._jobs: dict[str, JobInfo] = {}
        self._assumed: dict[str, _Assumption] = {}  # pod uid -> node
        self._generation = 0
        self._memo: CycleInput | None = None

    # Feeding ------------------------------------------------------------------------------
    def _touch(self) -> None:
        self._generation += 1

    def upsert_node(self, node: Node) -> None:
        with self._lock:
            self._nodes[node.name] = node
            self._touch()

    def delete_node(self, name: str) -> None:
        with self._lock:
            if self._nodes.pop(name, None) is not None:
                self._touch()

    def upsert_pod(self, pod: PodInfo) -> None:
        with self._lock:
            self._pods[pod.uid] = pod
            if pod.node_name and pod.uid in self._assumed:
                del self._assumed[pod.uid]  # the watch confirmed our bind (or another's)
            self._touch()

    def delete_pod(self, uid: str) -> None:
        with self._lock:
            self._assumed.pop(uid, None)
            if self._pods.pop(uid, None) is not None:
                self._touch()

    def upsert_group(self, group: PodGroupInfo) -> None:
        with self._lock:
            self._groups[group.key] = group
            self._touch()

    def delete_group(self, key: str) -> None:
        with self._lock:
            if self._groups.pop(key, None) is not None:
                self._touch()

    def upsert_job(self, job: JobInfo) -> None:
        with self._lock:
            self._jobs[job.key] = job
            self._touch()

    def delete_job(self, key: str) -> None:
        with self._lock:
            if self._jobs.pop(key, None) is not None:
                self._touch()

    def replace_all(self, kind: str, items: Iterable[object]) -> None:
        """Swap in a full re-list of one kind (after a watch expired)."""
        with self._lock:
            if kind == "nodes":
                self._nodes = {n.name: n for n in items if isinstance(n, Node)}
            elif kind == "pods":
                self._pods = {p.uid: p for p in items if isinstance(p, PodInfo)}
            elif kind == "podgroups":
                self._groups = {g.key: g for g in items if isinstance(g, PodGroupInfo)}
            elif kind == "jobs":
                self._jobs = {j.key: j for j in items if isinstance(j, JobInfo)}
            else:
                raise ValueError(f"unknown kind {kind!r}")
            self._touch()

    # Assume / forget ----------------------------------------------------------------------
    def assume(self, pod_nodes: Iterable[tuple[PodRef, str]], now: float) -> None:
        with self._lock:
            for ref, node in pod_nodes:
                pod = self._pods.get(ref.uid)
                if pod is not None and not pod.node_name:
                    self._assumed[ref.uid] = _Assumption(node, now)
            self._touch()

    def forget(self, pods: Iterable[PodRef]) -> None:
        with self._lock:
            for ref in pods:
                self._assumed.pop(ref.uid, None)
            self._touch()

    def _expire_assumptions(self, now: float) -> None:
        stale = [uid for uid, a in self._assumed.items() if now - a.at > self.assume_ttl]
        for uid in stale:
            del self._assumed[uid]
        if stale:
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

    def _effective_pods(self, now: float) -> list[PodInfo]:
        out: list[PodInfo] = []
        for pod in self._pods.values():
            assumed = self._assumed.get(pod.uid)
            if assumed is not None and not pod.node_name:
                pod = dataclasses.replace(pod, node_name=assumed.node, phase=PodPhase.PENDING,
                                          started_at=assumed.at)
            out.append(pod)
        return out

    def cycle_input(self, now: float) -> CycleInput:
        """Snapshot and gangs for one cycle; reused as is while nothing has changed."""
        with self._lock:
            self._expire_assumptions(now)
            memo = self._memo
            if memo is not None and memo.generation == self._generation:
                return memo
            pods = self._effective_pods(now)
            gangs = build_gangs(pods, self._groups, self._jobs, self.grouping)
            snapshot = Snapshot(self._nodes.values(), gangs.running, gangs.other_usage)
            self._memo = CycleInput(snapshot, gangs, self._generation)
            return self._memo
