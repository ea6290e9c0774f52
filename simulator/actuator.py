"""The simulated cluster: carries out plans the way Kubernetes and the training jobs would.

It carries out the same plan entries as the live actuator, from the plan alone: a bind makes
pods run at once (no kubelet latency); when every pod of a job runs, the job starts doing
work and its completion is scheduled. An eviction returns the victim's pods to pending and
throws away the work done since its last checkpoint. Writing a checkpoint takes
``checkpoint_write`` seconds in which the job makes no progress (a job alternates T seconds
of work and W of writing; none is written at the very end), so frequent checkpoints cost time
and rare ones lose work: the trade-off T* = sqrt(2 W MTBF) balances. A rollback returns a
partly bound gang's bound pods to pending (what their controller does after the scheduler
deletes them). Pods bound while their job is not yet whole (only possible under the ``per-pod``
baseline) keep GPUs allocated doing nothing: the waste a gang scheduler exists to prevent, and
that the report counts. A bind's ``DEVICES`` decisions are carried out first, as the live
actuator writes them before binding (``claims``: the claim gets its allocation and its pods in
``reservedFor``); a pod sent back to pending loses its claims' allocations, a finished one its
claims.

Accounting is exact and incremental so that a months-long trace stays fast: allocated,
busy and stranded GPUs and per-queue allocation are updated on every change, never recomputed
by scanning the cluster.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.decide.plan import CyclePlan
from scheduler.feed.cache import ClusterCache
from scheduler.model import Node, PodRef
from scheduler.model.demand import gpus_of
from scheduler.model.devices import ClaimTemplate
from scheduler.model.release import Release
from scheduler.model.workloads import RUNTIME_SECONDS_ANNOTATION, PodInfo, PodPhase
from scheduler.run.loop import ApplyResult
from simulator.claims import SimulatedClaims
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
    #: Times a preemptor took pods above an elastic job's minimum back (it ran on).
    shrinks: int = 0
    failures: int = 0
    lost_gpu_seconds: float = 0.0
    checkpoint_gpu_seconds: float = 0.0  # GPU time spent writing checkpoints that completed
    partial_since: float | None = None  # some but not all pods bound
    idle_partial_gpu_seconds: float = 0.0
    #: Stopped by a runaway guard (its queue's maxRuntimeSeconds): it never ends.
    stopped: bool = False
    stopped_at: float | None = None  # when the guard stopped it
    #: Seconds of its runs that ended (interrupted): what its queue's maxRuntimeSeconds
    #: counts before the current run, as ``gangscheduler.io/runtime-seconds`` does live.
    ran_seconds: float = 0.0

    @property
    def running(self) -> bool:
        return self.run_start is not None

    def bound_gpus(self) -> int:
        return sum(self.gpus_by_pod[u] for u in self.bound)

    @property
    def minimum(self) -> int:
        """Pods it runs with: all of them, or an elastic job's ``min_pods``."""
        return self.job.min_pods or len(self.pod_uids)


class SimulatedCluster:
    """The cluster's ground truth during a simulation, and the actuator that changes it."""

    def __init__(self, nodes: list[Node], cache: ClusterCache, clock: VirtualClock,
                 checkpoint_interval: float | None = None, checkpoint_write: float = 0.0,
                 device_gpus: Mapping[str, int] | None = None) -> None:
        """*device_gpus*: the GPUs each node offers as DRA devices (``simulator.devices``)."""
        self.cache = cache
        self.clock = clock
        self.claims = SimulatedClaims(cache)
        self.default_checkpoint_interval = checkpoint_interval
        self.checkpoint_write = checkpoint_write  # W: seconds to write one checkpoint
        devices = device_gpus or {}
        self.node_gpus = {n.name: gpus_of(n.allocatable) + devices.get(n.name, 0)
                          for n in nodes}
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
        self.demand = 0  # GPUs of jobs submitted and not finished (running or not)
        #: Node MTBF in seconds: jobs without an interval of their own or a default one
        #: checkpoint at the Young/Daly optimum (only with a write time).
        self.young_daly_mtbf: float | None = None
        self.pods_on_node: dict[str, set[str]] = defaultdict(set)

    # Bookkeeping ----------------------------------------------------------------------------
    def _stranded_of(self, node: str) -> int:
        used, cap = self.node_used[node], self.node_gpus[node]
        return cap - used if 0 < used < cap else 0

    def _use(self, node: str, gpus: int) -> None:
        self.stranded -= self._stranded_of(node)
        self.node_used[node] += gpus
        self.stranded += self._stranded_of(node)

    def add_job(self, job: TraceJob, pods: tuple[PodInfo, ...],
                templates: tuple[ClaimTemplate, ...] = ()) -> None:
        """*pods* in the job's role order (``workload.job_objects``); *templates*: those
        its pods' device claims are made from (the claims are made now)."""
        uids = tuple(p.uid for p in pods)
        self.demand += job.total_gpus
        # A pod's GPUs, requested or claimed as devices: its role's, pods being in role order.
        gpus = [r.gpus for r in job.roles for _ in range(r.count)]
        self.jobs[job.job_id] = JobState(job, uids, dict(zip(uids, gpus, strict=True)))
        if templates:
            self.claims.create(pods, templates)
        for uid in uids:
            self.job_of_pod[uid] = job.job_id

    def _checkpoint_interval(self, st: JobState) -> float | None:
        if st.job.checkpoint_interval:
            return st.job.checkpoint_interval
        if self.default_checkpoint_interval:
            return self.default_checkpoint_interval
        if self.young_daly_mtbf is not None and self.checkpoint_write > 0:
            # A job on k nodes fails k times as often as one node: sqrt(2 * W * MTBF / k).
            nodes = max(1, len(st.pod_uids))
            return young_daly(self.checkpoint_write, self.young_daly_mtbf / nodes)
        return None

    def _wall_time(self, st: JobState, work: float) -> float:
        """Seconds of running to do *work* from a checkpoint: work plus the writes between."""
        interval = self._checkpoint_interval(st)
        if not interval:
            return work
        return work + max(0, math.ceil(work / interval) - 1) * self.checkpoint_write

    def _checkpoints_done(self, st: JobState, now: float) -> tuple[int, float]:
        """Checkpoints completed in the current run by *now*, and the work they preserve."""
        interval = self._checkpoint_interval(st)
        if st.run_start is None or not interval:
            return 0, 0.0
        done = math.floor((now - st.run_start) / (interval + self.checkpoint_write))
        return done, min(done * interval, st.job.duration - st.work_done)

    # Actuator -------------------------------------------------------------------------------
    def apply(self, plan: CyclePlan, now: float) -> ApplyResult:
        evicted = []
        for ev in plan.evictions:
            if ev.preemptor:
                self._release(ev.release, now)
            else:
                self._stop(ev.release, now)
            evicted.append(ev.victim)
        for rollback in plan.rollbacks:
            for st in self._jobs_of(rollback.pods):
                if st.running:  # rolled back after a takeover although it had started
                    self.interrupt_job(st, now, preempted=False)
                else:
                    self._unbind_all(st, now)
        bound = []
        for b in plan.binds:
            self.claims.allocate(b.placement.prebinds)
            for ref, node in b.pod_nodes:
                self._bind(ref.uid, node, now)
            bound.append(b.gang_id)
        return ApplyResult(bound=tuple(bound), evicted=tuple(evicted))

    def _release(self, release: Release, now: float) -> None:
        """A preemption: the released gang's jobs stop; a partial release (members above an
        elastic job's minimum) sends only those pods back to pending, as their controller
        recreates them, and the job runs on with the rest (``shrink``)."""
        if not release.is_whole:
            for st in self._jobs_of(release.pods):
                self.shrink(st, {p.uid for p in release.pods}, now)
            return
        for st in self._jobs_of(release.pods):
            self.interrupt_job(st, now, preempted=True)

    def shrink(self, st: JobState, uids: set[str], now: float) -> None:
        """Pods *uids* of a running elastic job back to pending; it keeps running (at its
        pace: the simulator does not model an elastic job's speed by its size)."""
        gone = sorted(uids & st.bound)
        if len(st.bound) - len(gone) < st.minimum:
            raise RuntimeError(f"simulator: a shrink of job {st.job.job_id} below its "
                               f"minimum {st.minimum}")
        st.shrinks += 1
        for uid in gone:
            gpus = st.gpus_by_pod[uid]
            if st.running:
                self.busy -= gpus
            self._unbind(st, uid)

    def _stop(self, release: Release, now: float) -> None:
        """An eviction no gang asked for (a runaway guard): the job is stopped for good, as
        a Job whose ``podFailurePolicy`` fails it on ``DisruptionTarget`` is (restarted,
        a job longer than its queue's maxRuntime would run and be evicted forever). Its
        work since the last checkpoint is lost; its pods go."""
        for st in self._jobs_of(release.pods):
            self.interrupt_job(st, now, preempted=True)
            for uid in st.pod_uids:
                self.cache.delete_pod(uid)
                self.claims.delete(uid)
            st.stopped = True
            st.stopped_at = now
            self.demand -= st.job.total_gpus
            self.cache.delete_group(f"{st.job.queue}/{st.job.job_id}")

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
        if st.running:  # an elastic job grows
            self.busy += gpus
        elif len(st.bound) >= st.minimum:
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
        self.busy += st.bound_gpus()
        remaining = st.job.duration - st.work_done
        self.clock.push(now + self._wall_time(st, remaining), EventKind.COMPLETION,
                        (st.job.job_id, st.epoch))

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
            self._unbind(st, uid)
        st.partial_since = None
        self.partial.discard(st.job.job_id)

    def _unbind(self, st: JobState, uid: str) -> None:
        """One bound pod of *st* back to pending (its controller recreates it)."""
        pod = self.cache.pod(uid)
        if pod is not None:
            self._use(pod.node_name, -st.gpus_by_pod[uid])
            self.pods_on_node[pod.node_name].discard(uid)
            self.allocated_by_queue_pool[(st.job.queue, self.pool_of[pod.node_name])] -= \
                st.gpus_by_pod[uid]
            self.cache.upsert_pod(dataclasses.replace(
                pod, node_name="", phase=PodPhase.PENDING, started_at=None))
        self.claims.release(uid)
        self.allocated -= st.gpus_by_pod[uid]
        self.allocated_by_queue[st.job.queue] -= st.gpus_by_pod[uid]
        st.bound.discard(uid)

    def _jobs_of(self, pods: tuple[PodRef, ...]) -> list[JobState]:
        """The jobs these pods belong to (a whole job for gang policies), by id."""
        jobs = sorted({self.job_of_pod[p.uid] for p in pods if p.uid in self.job_of_pod})
        return [self.jobs[jid] for jid in jobs]

    def interrupt_job(self, st: JobState, now: float, preempted: bool) -> None:
        if st.run_start is not None:
            gpus = st.bound_gpus()
            done, kept = self._checkpoints_done(st, now)
            written = done * self.checkpoint_write
            # Everything since the last completed checkpoint, work and a partial write, is lost.
            st.lost_gpu_seconds += (now - st.run_start - kept - written) * gpus
            st.checkpoint_gpu_seconds += written * gpus
            st.work_done += kept
            self.busy -= st.bound_gpus()
            st.ran_seconds += now - st.run_start
            st.run_start = None
            self.running_jobs -= 1
            self._note_runtime(st)
        st.epoch += 1
        if preempted:
            st.preemptions += 1
        else:
            st.failures += 1
        self._unbind_all(st, now)

    def _note_runtime(self, st: JobState) -> None:
        """The runtime of *st*'s ended runs on its pods, where the grouping reads it
        (``Gang.ran_before``): the simulator's edge writes what the live ledger writes on
        the owner (``scheduler.kube.write.runtime_ledger``), so that its guards count a
        job's runs across preemptions and failures the same way."""
        text = f"{st.ran_seconds:.0f}"
        for uid in st.pod_uids:
            pod = self.cache.pod(uid)
            if pod is not None and pod.annotations.get(RUNTIME_SECONDS_ANNOTATION) != text:
                self.cache.upsert_pod(dataclasses.replace(
                    pod, annotations={**pod.annotations, RUNTIME_SECONDS_ANNOTATION: text}))

    def complete(self, job_id: str, epoch: int, now: float) -> bool:
        """A completion event fired; False if it was stale (the run was interrupted)."""
        st = self.jobs[job_id]
        if st.epoch != epoch or not st.running:
            return False
        self.busy -= st.bound_gpus()
        interval = self._checkpoint_interval(st)
        if interval and st.run_start is not None:
            writes = max(0, math.ceil((st.job.duration - st.work_done) / interval) - 1)
            st.checkpoint_gpu_seconds += writes * self.checkpoint_write * sum(
                st.gpus_by_pod.values())
        for uid in st.pod_uids:
            pod = self.cache.pod(uid)
            if pod is not None and pod.node_name:
                self._use(pod.node_name, -st.gpus_by_pod[uid])
                self.pods_on_node[pod.node_name].discard(uid)
                self.allocated_by_queue_pool[(st.job.queue, self.pool_of[pod.node_name])] -= \
                    st.gpus_by_pod[uid]
            self.cache.delete_pod(uid)
            self.claims.delete(uid)
        self.allocated -= st.bound_gpus()
        self.allocated_by_queue[st.job.queue] -= st.bound_gpus()
        st.bound.clear()
        st.run_start = None
        self.running_jobs -= 1
        st.work_done = st.job.duration
        st.end = now
        self.demand -= st.job.total_gpus
        self.cache.delete_group(f"{st.job.queue}/{job_id}")
        return True

    def jobs_on_node(self, node: str) -> list[JobState]:
        ids = sorted({self.job_of_pod[uid] for uid in self.pods_on_node.get(node, ())})
        return [self.jobs[jid] for jid in ids]


def young_daly(write_seconds: float, mtbf_seconds: float) -> float:
    """The checkpoint interval that loses the least time, T* = sqrt(2 W MTBF) (Young, 1974):
    writing every T costs W/T of the time, a failure every MTBF loses T/2 on average."""
    return math.sqrt(2.0 * write_seconds * mtbf_seconds)
