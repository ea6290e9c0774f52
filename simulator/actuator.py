"""The simulated cluster: carries out plans the way Kubernetes and the training jobs would.

It carries out the same plan entries as the live actuator, from the plan alone: a bind makes
pods run at once (no kubelet latency); when every pod of a job runs, the job starts doing
work and its completion is scheduled. An eviction returns the victim's pods to pending and
throws away the work done since its last checkpoint. A rollback returns a partly bound gang's
bound pods to pending (what their controller does after the scheduler deletes them); a gang
given up (past its scheduleTimeoutSeconds) leaves the cluster unstarted. Pods bound while their job
is not yet whole (only possible under the ``per-pod`` baseline) hold GPUs doing nothing: the
waste a gang scheduler exists to prevent, and that the report counts.

Accounting is exact and incremental so that a months-long trace stays fast: allocated,
busy and stranded GPUs and per-queue allocation are updated on every change, never recomputed
by scanning the cluster.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass, field

from scheduler.cache import ClusterCache
from scheduler.loop import ApplyResult
from scheduler.model import Node, PodRef
from scheduler.model.workloads import PodInfo, PodPhase
from scheduler.plan import CyclePlan
from simulator.clock import EventKind, VirtualClock
from simulator.trace import TraceJob


@dataclass(slots=True)
class JobState:
    job: TraceJob
    pod_uids: tuple[str, ...]
    gpus_by_pod: dict[str, int]
    bound: set[str] = field(default_factory=set)
    work_done: float = 0.0  # seconds of progress preserved (checkpointed) so far
    run_start: float | None = None  # when the current uninterrupted run began
    first_start: float | None = None
    end: float | None = None
    epoch: int = 0  # bumps on every interruption, invalidating a scheduled completion
    preemptions: int = 0
    failures: int = 0
    lost_gpu_seconds: float = 0.0
    partial_since: float | None = None  # some but not all pods bound
    idle_partial_gpu_seconds: float = 0.0
    given_up: float | None = None  # when the scheduler gave it up (it never starts then)

    @property
    def running(self) -> bool:
        return self.run_start is not None

    def bound_gpus(self) -> int:
        return sum(self.gpus_by_pod[u] for u in self.bound)


class SimulatedCluster:
    """The cluster's ground truth during a simulation, and the actuator that changes it."""

    def __init__(self, nodes: list[Node], cache: ClusterCache, clock: VirtualClock,
                 checkpoint_interval: float | None = None) -> None:
        self.cache = cache
        self.clock = clock
        self.default_checkpoint_interval = checkpoint_interval
        self.node_gpus = {n.name: n.allocatable.gpus for n in nodes}
        self.node_used: dict[str, int] = dict.fromkeys(self.node_gpus, 0)
        self.total_gpus = sum(self.node_gpus.values())
        self.jobs: dict[str, JobState] = {}
        self.job_of_pod: dict[str, str] = {}
        self.allocated = 0
        self.busy = 0
        self.stranded = 0  # free GPUs on nodes that are partly used
        self.allocated_by_queue: dict[str, int] = defaultdict(int)
        self.pool_of = {n.name: n.pool for n in nodes}
        self.allocated_by_queue_pool: dict[tuple[str, str], int] = defaultdict(int)
        self.partial: set[str] = set()  # jobs with some, not all, pods bound
        self.running_jobs = 0
        #: (checkpoint write seconds, node MTBF seconds) for Young/Daly intervals, if enabled.
        self.young_daly: tuple[float, float] | None = None
        self.pods_on_node: dict[str, set[str]] = defaultdict(set)

    # Bookkeeping ----------------------------------------------------------------------------
    def _stranded_of(self, node: str) -> int:
        used, cap = self.node_used[node], self.node_gpus[node]
        return cap - used if 0 < used < cap else 0

    def _use(self, node: str, gpus: int) -> None:
        self.stranded -= self._stranded_of(node)
        self.node_used[node] += gpus
        self.stranded += self._stranded_of(node)

    def add_job(self, job: TraceJob, pods: tuple[PodInfo, ...]) -> None:
        uids = tuple(p.uid for p in pods)
        self.jobs[job.job_id] = JobState(job, uids, {p.uid: p.requests.gpus for p in pods})
        for uid in uids:
            self.job_of_pod[uid] = job.job_id

    def _checkpoint_interval(self, st: JobState) -> float | None:
        if st.job.checkpoint_interval:
            return st.job.checkpoint_interval
        if self.young_daly is not None:
            # A job on k nodes fails k times as often as one node: sqrt(2 * C * MTBF / k).
            write, mtbf = self.young_daly
            nodes = max(1, len(st.pod_uids))
            return math.sqrt(2.0 * write * mtbf / nodes)
        return self.default_checkpoint_interval

    def _preserved_work(self, st: JobState, now: float) -> float:
        """Progress kept if the current run stopped at *now* (up to the last checkpoint)."""
        if st.run_start is None:
            return st.work_done
        ran = now - st.run_start
        interval = self._checkpoint_interval(st)
        kept = math.floor(ran / interval) * interval if interval else 0.0
        return st.work_done + kept

    # Actuator -------------------------------------------------------------------------------
    def apply(self, plan: CyclePlan, now: float) -> ApplyResult:
        evicted = []
        for ev in plan.evictions:
            for st in self._jobs_of(ev.pods):
                self.interrupt_job(st, now, preempted=True)
            evicted.append(ev.victim)
        for rollback in plan.rollbacks:
            for st in self._jobs_of(rollback.pods):
                if st.running:  # rolled back after a takeover although it had started
                    self.interrupt_job(st, now, preempted=False)
                else:
                    self._unbind_all(st, now)
        for give_up in plan.give_ups:
            for st in self._jobs_of(give_up.members.pods):
                self._give_up(st, now)
        bound = []
        for b in plan.binds:
            for ref, node in b.pod_nodes:
                self._bind(ref.uid, node, now)
            bound.append(b.gang_id)
        return ApplyResult(bound=tuple(bound), evicted=tuple(evicted))

    def _bind(self, uid: str, node: str, now: float) -> None:
        pod = self.cache.pod(uid)
        if pod is None or pod.node_name:
            raise RuntimeError(f"simulator: plan binds {uid}, which is gone or already bound")
        self.cache.upsert_pod(dataclasses.replace(pod, node_name=node, phase=PodPhase.RUNNING,
                                                  started_at=now))
        st = self.jobs[self.job_of_pod[uid]]
        gpus = st.gpus_by_pod[uid]
        self._use(node, gpus)
        self.allocated += gpus
        self.allocated_by_queue[st.job.queue] += gpus
        self.allocated_by_queue_pool[(st.job.queue, self.pool_of[node])] += gpus
        if not st.bound:
            st.partial_since = now
        st.bound.add(uid)
        self.pods_on_node[node].add(uid)
        if len(st.bound) == len(st.pod_uids):
            self.partial.discard(st.job.job_id)
            self._start(st, now)
        else:
            self.partial.add(st.job.job_id)

    def _start(self, st: JobState, now: float) -> None:
        if st.partial_since is not None:
            # GPUs of the members that waited for the rest of the gang did no work.
            st.partial_since = None
        st.run_start = now
        self.running_jobs += 1
        if st.first_start is None:
            st.first_start = now
        self.busy += sum(st.gpus_by_pod.values())
        remaining = st.job.duration - st.work_done
        self.clock.push(now + remaining, EventKind.COMPLETION, (st.job.job_id, st.epoch))

    def account_idle(self, since: float, now: float) -> None:
        """Charge idle partial-gang GPU time for the interval [since, now)."""
        if now <= since:
            return
        for jid in self.partial:
            st = self.jobs[jid]
            st.idle_partial_gpu_seconds += st.bound_gpus() * (now - since)

    def idle_partial_gpus(self) -> int:
        return sum(self.jobs[jid].bound_gpus() for jid in self.partial)

    def _unbind_all(self, st: JobState, now: float) -> None:
        for uid in sorted(st.bound):
            pod = self.cache.pod(uid)
            if pod is not None:
                self._use(pod.node_name, -st.gpus_by_pod[uid])
                self.pods_on_node[pod.node_name].discard(uid)
                self.allocated_by_queue_pool[(st.job.queue, self.pool_of[pod.node_name])] -= \
                    st.gpus_by_pod[uid]
                self.cache.upsert_pod(dataclasses.replace(
                    pod, node_name="", phase=PodPhase.PENDING, started_at=None))
            self.allocated -= st.gpus_by_pod[uid]
            self.allocated_by_queue[st.job.queue] -= st.gpus_by_pod[uid]
        st.bound.clear()
        st.partial_since = None
        self.partial.discard(st.job.job_id)

    def _jobs_of(self, pods: tuple[PodRef, ...]) -> list[JobState]:
        """The jobs these pods belong to (a whole job for gang policies), by id."""
        jobs = sorted({self.job_of_pod[p.uid] for p in pods if p.uid in self.job_of_pod})
        return [self.jobs[jid] for jid in jobs]

    def _give_up(self, st: JobState, now: float) -> None:
        """The job will never start: its pods and PodGroup leave the cluster."""
        if st.given_up is not None or st.end is not None:
            return
        self._unbind_all(st, now)
        st.given_up = now
        for uid in st.pod_uids:
            self.cache.delete_pod(uid)
        self.cache.delete_group(f"{st.job.queue}/{st.job.job_id}")

    def interrupt_job(self, st: JobState, now: float, preempted: bool) -> None:
        if st.run_start is not None:
            kept = self._preserved_work(st, now)
            progress = st.work_done + (now - st.run_start)
            st.lost_gpu_seconds += (progress - kept) * sum(st.gpus_by_pod.values())
            st.work_done = kept
            self.busy -= sum(st.gpus_by_pod.values())
            st.run_start = None
            self.running_jobs -= 1
        st.epoch += 1
        if preempted:
            st.preemptions += 1
        else:
            st.failures += 1
        self._unbind_all(st, now)

    def complete(self, job_id: str, epoch: int, now: float) -> bool:
        """A completion event fired; False if it was stale (the run was interrupted)."""
        st = self.jobs[job_id]
        if st.epoch != epoch or not st.running:
            return False
        self.busy -= sum(st.gpus_by_pod.values())
        for uid in st.pod_uids:
            pod = self.cache.pod(uid)
            if pod is not None and pod.node_name:
                self._use(pod.node_name, -st.gpus_by_pod[uid])
                self.pods_on_node[pod.node_name].discard(uid)
                self.allocated_by_queue_pool[(st.job.queue, self.pool_of[pod.node_name])] -= \
                    st.gpus_by_pod[uid]
            self.cache.delete_pod(uid)
        self.allocated -= st.bound_gpus()
        self.allocated_by_queue[st.job.queue] -= st.bound_gpus()
        st.bound.clear()
        st.run_start = None
        self.running_jobs -= 1
        st.work_done = st.job.duration
        st.end = now
        self.cache.delete_group(f"{st.job.queue}/{job_id}")
        return True

    def jobs_on_node(self, node: str) -> list[JobState]:
        ids = sorted({self.job_of_pod[uid] for uid in self.pods_on_node.get(node, ())})
        return [self.jobs[jid] for jid in ids]
