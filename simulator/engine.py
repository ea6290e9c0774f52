"""The discrete-event simulation: a trace replayed through the live scheduler's own code.

The engine builds exactly what ``gang-scheduler run`` builds — a ``ClusterCache`` and a
``Scheduler`` calling ``cycle.decide`` — and swaps in a virtual clock and the simulated
cluster as actuator. Per event instant it applies what happened (completions, failures,
arrivals), then runs one scheduling cycle, so a month of trace costs one cycle per distinct
event time, not one per wall-clock second.

Node failures (optional, per-pool MTBF) interrupt every job on the node, which loses the work
since its last checkpoint. Checkpoint intervals come from the trace, a fixed default, or the
Young/Daly optimum sqrt(2 x write time x MTBF seen by the job).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.decide.plan import CyclePlan
from scheduler.feed.cache import ClusterCache
from scheduler.feed.grouping import GroupingConfig
from scheduler.model import Node
from scheduler.report.chargeback import Ledger
from scheduler.run.loop import Scheduler
from scheduler.run.metrics import SchedulerMetrics
from simulator.actuator import SimulatedCluster
from simulator.clock import EventKind, VirtualClock
from simulator.devices import NO_DEVICES, ClusterDevices
from simulator.metrics import JobOutcome, UtilizationSample
from simulator.policies import PolicyPreset
from simulator.trace import TraceJob
from simulator.workload import job_objects

SCHEDULER_NAME = "gang-scheduler"


@dataclass(frozen=True, slots=True)
class FailureModel:
    """Node failures: mean time between failures per pool (hours) and repair time."""

    mtbf_hours: Mapping[str, float] = field(default_factory=dict)
    repair_seconds: float = 3600.0
    #: Time to write one checkpoint (W), charged for every checkpoint; with an MTBF and no
    #: interval given, jobs checkpoint at the Young/Daly optimum sqrt(2 W MTBF).
    checkpoint_write_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class SimulationOptions:
    seed: int = 0
    #: How the scheduler learns runtimes: "exact" (the trace duration), "none" (queue default).
    runtime_estimates: str = "exact"
    checkpoint_interval: float | None = None  # default for jobs whose trace gives none
    failures: FailureModel = field(default_factory=FailureModel)
    max_time: float | None = None  # stop the clock here (None: until the trace drains)


@dataclass(frozen=True, slots=True)
class SimulationResult:
    policy: str
    outcomes: tuple[JobOutcome, ...]
    samples: tuple[UtilizationSample, ...]
    end_time: float
    cycles: int
    events: int


class Simulation:
    """One policy over one trace on one cluster."""

    def __init__(self, nodes: Sequence[Node], jobs: Sequence[TraceJob], preset: PolicyPreset,
                 options: SimulationOptions = SimulationOptions(),
                 devices: ClusterDevices = NO_DEVICES,
                 metrics: SchedulerMetrics | None = None, ledger: Ledger | None = None) -> None:
        """*devices*: the nodes' DRA devices (``simulator.devices.cluster_devices``).
        *metrics*: the live scheduler's metrics, counted by its own code on the virtual clock
        (GPU-seconds and cost: ``scheduler.run.accrual``); None: none, as without them the
        cycles decide the same. *ledger*: where that accrual sums the chargeback rows."""
        self.jobs = sorted(jobs, key=lambda j: (j.submit_time, j.job_id))
        self.preset = preset
        self.options = options
        self.clock = VirtualClock()
        self.cache = ClusterCache(GroupingConfig(scheduler_name=SCHEDULER_NAME,
                                                 per_pod=preset.per_pod), assume_ttl=math.inf)
        self.nodes = {n.name: n for n in nodes}
        for node in nodes:
            self.cache.upsert_node(node)
        devices.publish(self.cache)
        self.cluster = SimulatedCluster(
            list(nodes), self.cache, self.clock, checkpoint_interval=options.checkpoint_interval,
            checkpoint_write=options.failures.checkpoint_write_seconds or 0.0,
            device_gpus=devices.gpus)
        self.scheduler = Scheduler(self.cache, preset, self.clock, self.cluster, metrics,
                                   ledger=ledger)
        self._rng = random.Random(options.seed)
        self.samples: list[UtilizationSample] = []
        self.events = 0
        self._next_arrival = 0
        self._nodes_down = 0
        self._wakes: set[float] = set()  # times a SCHEDULE event is pushed for (guards)
        self._now = 0.0

    # Events -----------------------------------------------------------------------------------
    def _arrive(self, job: TraceJob, now: float) -> None:
        estimate = job.duration if self.options.runtime_estimates == "exact" else None
        objs = job_objects(job, scheduler_name=SCHEDULER_NAME, now=now, runtime_estimate=estimate)
        self.cluster.add_job(job, objs.pods, objs.templates)
        if objs.group is not None:
            self.cache.upsert_group(objs.group)
        for pod in objs.pods:
            self.cache.upsert_pod(pod)

    def _schedule_failure(self, node: Node, now: float) -> None:
        mtbf = self.options.failures.mtbf_hours.get(node.pool)
        if mtbf:
            delay = self._rng.expovariate(1.0 / (mtbf * 3600.0))
            self.clock.push(now + delay, EventKind.NODE_FAILURE, node.name)

    def _fail_node(self, name: str, now: float) -> None:
        self._nodes_down += 1
        node = self.nodes[name]
        self.cache.upsert_node(dataclasses.replace(node, ready=False))
        for st in self.cluster.jobs_on_node(name):
            self.cluster.interrupt_job(st, now, preempted=False)
        self.clock.push(now + self.options.failures.repair_seconds, EventKind.NODE_REPAIR, name)

    def _repair_node(self, name: str, now: float) -> None:
        self._nodes_down -= 1
        self.cache.upsert_node(self.nodes[name])
        self._schedule_failure(self.nodes[name], now)

    def _sample(self, now: float) -> None:
        c = self.cluster
        sample = UtilizationSample(
            time=now, total_gpus=c.total_gpus, allocated_gpus=c.allocated, busy_gpus=c.busy,
            stranded_gpus=c.stranded, pending_gpus=c.demand - c.busy,
            allocated_by_queue={q: v for q, v in sorted(c.allocated_by_queue.items()) if v},
            allocated_by_queue_pool=_by_queue_pool(c.allocated_by_queue_pool))
        if self.samples and self.samples[-1].time == now:
            self.samples[-1] = sample
        elif not self.samples or _differs(self.samples[-1], sample):
            self.samples.append(sample)

    # Main loop --------------------------------------------------------------------------------
    def run(self, progress: Callable[[int, int], None] | None = None) -> SimulationResult:
        with _collector_for_replay():
            return self._run(progress)

    def _run(self, progress: Callable[[int, int], None] | None) -> SimulationResult:
        clock = self.clock
        self._young_daly()
        self._next_arrival = 0
        self._nodes_down = 0
        if self.jobs:
            clock.push(self.jobs[0].submit_time, EventKind.ARRIVAL, 0)
        for node in self.nodes.values():
            self._schedule_failure(node, 0.0)
        last = 0.0
        self._sample(0.0)
        done = 0
        while len(clock):
            t = clock.peek_time()
            assert t is not None  # the clock has live events (len(clock) > 0)
            if self.options.max_time is not None and t > self.options.max_time:
                break
            self.cluster.account_idle(last, t)
            changed = False
            while len(clock) and clock.peek_time() == t:
                ev = clock.pop()
                self.events += 1
                if ev.kind is EventKind.ARRIVAL:
                    self._arrive(self.jobs[ev.payload], t)
                    self._next_arrival = ev.payload + 1
                    if self._next_arrival < len(self.jobs):
                        clock.push(self.jobs[self._next_arrival].submit_time, EventKind.ARRIVAL,
                                   self._next_arrival)
                    changed = True
                elif ev.kind is EventKind.COMPLETION:
                    job_id, epoch = ev.payload
                    if self.cluster.complete(job_id, epoch, t):
                        changed = True
                        done += 1
                elif ev.kind is EventKind.NODE_FAILURE:
                    self._fail_node(ev.payload, t)
                    changed = True
                elif ev.kind is EventKind.NODE_REPAIR:
                    self._repair_node(ev.payload, t)
                    changed = True
                elif ev.kind is EventKind.SCHEDULE:  # a guard acts (``_wake_for``)
                    self._wakes.discard(t)
                    changed = True
            self._now = t
            if changed:
                self._cycle()
                self._sample(t)
            last = t
            if progress is not None and changed:
                progress(done, len(self.jobs))
            if not self._work_left():
                break
        end = max(last, self.jobs[-1].submit_time if self.jobs else 0.0)
        self.cluster.account_idle(last, end)
        if (accrual := self.scheduler.observer.accrual) is not None:
            accrual.until(end)  # what is still allocated is charged up to the end
        return SimulationResult(policy=self.preset.name, outcomes=self._outcomes(),
                                samples=tuple(self.samples), end_time=end,
                                cycles=self.scheduler.cycles, events=self.events)

    def _cycle(self) -> None:
        """Run cycles at this instant until one changes nothing more.

        Evictions take effect at once in the simulated cluster, so the preemptor can bind in
        the very next cycle of the same instant (the live scheduler waits for the pods to go).
        """
        for _ in range(8):
            plan = self.scheduler.run_once()
            self._wake_for(plan)
            if not plan.evictions:
                return

    def _wake_for(self, plan: CyclePlan) -> None:
        """A cycle when a runaway guard acts next (``CyclePlan.wake``: set only when guards
        are, so a simulation without them runs exactly the cycles it always ran)."""
        at = plan.wake
        if at is not None and at > plan.now and at not in self._wakes:
            self._wakes.add(at)
            self.clock.push(at, EventKind.SCHEDULE, None)

    def _work_left(self) -> bool:
        """False once nothing can change any more: no arrivals left, nothing running, and no
        node under repair. Jobs still pending then never start (e.g. the per-pod deadlock)."""
        c = self.cluster
        return (self._next_arrival < len(self.jobs) or c.running_jobs > 0
                or any(w > self._now for w in self._wakes)
                or (self._nodes_down > 0 and any(st.end is None for st in c.jobs.values())))

    def _young_daly(self) -> None:
        f = self.options.failures
        if f.checkpoint_write_seconds is None or not f.mtbf_hours:
            return
        self.cluster.young_daly_mtbf = min(f.mtbf_hours.values()) * 3600.0

    def _outcomes(self) -> tuple[JobOutcome, ...]:
        out = []
        for st in sorted(self.cluster.jobs.values(), key=lambda s: s.job.job_id):
            out.append(JobOutcome(
                job_id=st.job.job_id, queue=st.job.queue, gpus=st.job.total_gpus,
                submit_time=st.job.submit_time, start_time=st.first_start, end_time=st.end,
                preemptions=st.preemptions, gpu_seconds_lost=st.lost_gpu_seconds,
                gpu_seconds_checkpointing=st.checkpoint_gpu_seconds,
                gpu_seconds_idle_partial=st.idle_partial_gpu_seconds, stopped=st.stopped,
                stop_time=st.stopped_at, job_class=st.job.job_class))
        # Jobs that never arrived (max_time) are not in cluster.jobs and are not reported.
        return tuple(out)


#: Allocations between young-generation collections during a replay (Python's default: 700).
REPLAY_GC_THRESHOLD = 10_000
#: Collections of a generation between collections of the next older one during a replay
#: (Python's default: 10). The older generations hold what a replay keeps for long (the
#: cache's gangs, the recall's shapes): each full collection of a Philly replay traverses
#: millions of objects, about 0.17 s, and five times rarer they cost 0.05 s instead of 0.5 s
#: over the first 30,000 jobs.
REPLAY_GC_OLDER_THRESHOLD = 50


@contextlib.contextmanager
def _collector_for_replay() -> Iterator[None]:
    """Collect garbage less eagerly while a replay runs; restore the settings afterwards.

    A replay allocates millions of short-lived values (resource vectors, snapshots' dicts)
    and hardly any reference cycles, while the inputs (the trace, the cache's pods) stay
    alive throughout. With the default thresholds the collector spent a fifth of a Philly
    replay traversing them. The inputs are frozen out of its sight and the young generation
    is collected after more allocations; nothing is left uncollected (reference counting
    frees everything but cycles, which the collector still finds).
    """
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(threshold[0], REPLAY_GC_THRESHOLD),
                     *(max(t, REPLAY_GC_OLDER_THRESHOLD) for t in threshold[1:]))
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def _by_queue_pool(flat: Mapping[tuple[str, str], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (queue, pool), gpus in sorted(flat.items()):
        if gpus:
            out.setdefault(queue, {})[pool] = gpus
    return out


def _differs(a: UtilizationSample, b: UtilizationSample) -> bool:
    return (a.allocated_gpus, a.busy_gpus, a.stranded_gpus, a.total_gpus, a.pending_gpus,
            dict(a.allocated_by_queue)) != (b.allocated_gpus, b.busy_gpus, b.stranded_gpus,
                                           b.total_gpus, b.pending_gpus,
                                           dict(b.allocated_by_queue))
