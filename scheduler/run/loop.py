"""The scheduler's cycle: snapshot the cache, decide, apply, take in the binds that landed.

Shared by the live scheduler and the simulator: both build the same
``Scheduler(cache, policies, clock, actuator, metrics)`` and call the same ``run_once()``; only
the clock (wall or virtual) and the actuator (Kubernetes API or the simulated cluster) differ.
Nothing here knows which one it has.

The loop keeps the cycle only, and what the cycle itself needs between cycles:

- the previous plan, handed to the next ``decide`` so nominations and reservations persist,
  and a ``Recall`` per node index, so ``decide`` reuses what earlier cycles worked out;
- the binds: assumed in the cache until the watch confirms them, from their hand-over when
  the actuator binds outside the cycle (the live one: ``scheduler.run.inflight``); their
  outcome is taken in when it lands, at the start of a later cycle. Nothing is deleted when a
  bind fails: the members it bound stay assumed bound (``scheduler.decide.housekeeping``
  decides whether to complete or roll back a partly bound gang), the others are forgotten,
  except after a failure only for want of an answer (no reply, 429, 5xx): those are *parked* on
  their nodes until the retry is due, then placed again first;
- when the next cycle is due if nothing changes (``next_due``: the plan's ``due``, an
  assumption lapsing, the actuator's retry), for a live loop that runs no cycle otherwise.

Every other job is a small module fed by the same cycle input, plan and apply result:
``backoff`` (a gang whose bind failed waits out a backoff; a fenced bind does not back off),
``guard_usage`` (GPU-hours of runs that ended, for the queues' budgets),
``housekeeping_input`` (what ``decide`` needs besides the pending gangs), ``latency`` (gang
scheduling latency, from the first cycle that saw a gang complete to when all of it was
bound), ``remembered`` (what queues borrowed, decayed: fair share with memory, handed to
the next ``decide``), ``last_cycle`` (the queue figures, worked out on first use) and
``observe`` (one summary log line per cycle, the metrics, GPU-seconds accrued up to every
scrape, the timed solver). Every line of a cycle carries its number.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import structlog

from scheduler.decide import cycle
from scheduler.decide.due import SLACK_SECONDS
from scheduler.decide.housekeeping import REPAIR_GRACE_SECONDS, PartlyBound
from scheduler.decide.plan import Bind, CyclePlan
from scheduler.decide.recall import Recall
from scheduler.feed.cache import ClusterCache
from scheduler.feed.cache_cycle import CycleInput
from scheduler.model import PodRef
from scheduler.model.node_groups import NodeGroup, ProvisioningState
from scheduler.report.chargeback import Ledger
from scheduler.report.queue_report import QueueReport
from scheduler.run.backoff import Backoffs
from scheduler.run.guard_usage import GuardUsage
from scheduler.run.housekeeping_input import HousekeepingInput
from scheduler.run.inflight import ApplyResult, Flight, Flights, prebinds_of
from scheduler.run.last_cycle import LastCycle
from scheduler.run.latency import SchedulingLatency
from scheduler.run.metrics import SchedulerMetrics
from scheduler.run.observe import CycleObserver
from scheduler.run.remembered import RememberedUsage

__all__ = ["Actuator", "ApplyResult", "PolicySource", "ScaleUpSource", "Scheduler"]

log = structlog.get_logger("gang_scheduler.loop")


class Actuator(Protocol):
    """Carries out a plan: the only side effects of a cycle."""

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult: ...


class ScaleUpSource(Protocol):
    """What the cluster-autoscaler can add and its answers to the scale-ups asked for
    (``scheduler.decide.scale_up``); the live scheduler reads them on their own thread."""

    def node_groups(self) -> tuple[NodeGroup, ...]: ...

    def asked(self) -> Mapping[str, ProvisioningState]: ...


class PolicySource(Protocol):
    """The queue policies in force (the last good version, when an update was invalid)."""

    def current(self) -> cycle.Policies: ...


class Scheduler:
    """Runs cycles on *cache* with *actuator*; the jobs beside the cycle are its
    ``backoffs``, ``housekeeping``, ``latency`` and ``observer`` (see the module docstring)."""

    def __init__(
        self,
        cache: ClusterCache,
        policies: PolicySource,
        clock: Callable[[], float],
        actuator: Actuator,
        metrics: SchedulerMetrics | None = None,
        *,
        backoff_initial: float = 5.0,
        backoff_max: float = 300.0,
        repair_grace: float = REPAIR_GRACE_SECONDS,
        answering: Callable[[], bool] | None = None,
        pool_gauge_interval: float = 0.0,
        ledger: Ledger | None = None,
        scale_up: ScaleUpSource | None = None,
    ) -> None:
        """*repair_grace*: see ``housekeeping``. *answering*: does the cluster answer
        requests right now (the live scheduler's outage tracker)? Without it, a backoff
        after a failure without an answer runs its course like any other.
        *pool_gauge_interval*: seconds between updates of the per-pool GPU gauges, a pass
        over every node (GPU-seconds allocated are accrued every cycle). *ledger*: the
        chargeback ledger the accrual sums into (default: its own). *scale_up*: node groups and
        the autoscaler's answers, for gangs of pools that may scale up (none: never ask)."""
        self.cache = cache
        self.policies = policies
        self.clock = clock
        self.actuator = actuator
        self.scale_up = scale_up
        self.backoffs = Backoffs(backoff_initial, backoff_max, answering)
        self.housekeeping = HousekeepingInput(cache, self.backoffs, repair_grace)
        self.guard_usage = GuardUsage()
        self.latency = SchedulingLatency(metrics)
        self.observer = CycleObserver(metrics, clock, pool_gauge_interval, ledger)
        self.flights = Flights(clock)  # binds handed to the actuator's binding stage
        self.remembered = RememberedUsage()  # what queues borrowed, for fair share
        self.cycles = 0
        self._last: LastCycle | None = None  # the previous plan is its ``plan``
        self._recall: Recall | None = None  # kept while the nodes (the node index) stay
        self._retry_at: float | None = None  # when the actuator wants a cycle to retry

    def run_once(self, takeover: bool = False) -> CyclePlan:
        """One cycle: decide on a snapshot, apply the plan, remember what happened.

        *takeover*: the first cycle after becoming leader, when gangs a predecessor left
        partly bound are rolled back even if their members started (see ``housekeeping``).
        """
        self.cycles += 1
        with structlog.contextvars.bound_contextvars(cycle=self.cycles):
            return self._cycle(takeover)

    def _cycle(self, takeover: bool) -> CyclePlan:
        self._land(self.flights.take_landed())
        self.backoffs.cycle_began()
        now = self.clock()
        self.cache.forget(self.backoffs.due(now))  # parked members whose retry is due
        inp = self.cache.cycle_input(now)
        self.latency.track(inp.gangs.pending, now)
        house = self.housekeeping.of(inp, now, takeover)
        policies = self.policies.current()
        solver = self.observer.solver()
        started = time.perf_counter()
        if self._recall is None or self._recall.index is not inp.snapshot.index:
            self._recall = Recall(inp.snapshot.index)
        usage = self.guard_usage.of(inp.snapshot.running, policies, now)
        plan = cycle.decide(inp.snapshot, inp.gangs.pending, policies, now,
                            previous=self.last_plan, solver=solver,
                            recall=self._recall, house=house, usage=usage,
                            memory=self.remembered.memory,
                            **self._scale_up_input())
        decided = time.perf_counter()
        result = self.actuator.apply(plan, now)
        applied = time.perf_counter()
        self._retry_at = None if result.retry_in is None else now + result.retry_in
        self.cache.assume_prebinds(result.prebinds, now)
        since = self.latency.take([b.gang_id for b in plan.binds])
        partial = {b.gang_id: house.partly_bound[b.gang_id] for b in plan.binds
                   if b.gang_id in house.partly_bound}
        if result.binding is not None:  # its claims are written on the binding stage
            self.cache.assume([pn for b in plan.binds for pn in b.pod_nodes], now, binding=True)
            self.cache.assume_prebinds(prebinds_of(plan.binds), now, binding=True)
            self.flights.launch(Flight(plan.binds, partial, since, result.binding, now))
        else:
            self.cache.assume([pn for b in plan.binds if b.gang_id in result.bound
                               for pn in b.pod_nodes], now)
            self._take(plan.binds, result, partial, since, self.clock())
        self.backoffs.rolled_back(plan, now)
        self.guard_usage.bound(plan.binds, inp.gangs.pending, now)
        self.remembered.cycle(inp.snapshot, inp.gangs.pending, policies,
                              self._recall.tree(policies.queues), plan)
        self._last = LastCycle(inp, policies, self._recall, plan, self.backoffs.until,
                               self.remembered.memory, usage)
        self.observer.cycle(self._last, result, decided - started, applied - decided,
                            len(self.flights))
        return plan

    def _scale_up_input(self) -> dict[str, Any]:
        if self.scale_up is None:
            return {}
        return {"node_groups": self.scale_up.node_groups(), "asked": self.scale_up.asked()}

    # Binds in flight ----------------------------------------------------------------------
    def _take(self, binds: Iterable[Bind], result: ApplyResult,
              partial: Mapping[str, PartlyBound], since: Mapping[str, float],
              bound_at: float) -> None:
        """Take the outcome of *binds* in (their members already assumed bound): of a failed
        gang, forget the members neither kept bound nor parked, so their capacity is free
        again; hand each outcome to the backoffs, the latency and the observer (*since*: when
        each gang was first complete)."""
        parked_uids = {ref.uid for ref, _ in result.parked}
        for b in binds:
            gid = b.gang_id
            parked: tuple[PodRef, ...] = ()
            if gid in result.failed:
                kept = [(ref, node) for ref, node in b.pod_nodes if ref.uid in parked_uids]
                self.cache.forget(ref for ref, _ in b.pod_nodes if ref.uid not in parked_uids)
                self.cache.assume(kept, bound_at, binding=True)  # until the retry is due
                parked = tuple(ref for ref, _ in kept)
            elif gid in result.bound:
                self.observer.partial_completed(b, partial)
            self.backoffs.take(b, result, parked, bound_at)
            self.latency.landed(b, result, since, bound_at)
        if result.left:  # members kept bound by a failed bind: their gang is repaired
            self.cache.assume(result.left, bound_at)
        self.observer.binds_taken(result)

    def _land(self, flights: Iterable[Flight]) -> None:
        """Take in the outcome of flights that landed."""
        for f in flights:
            result = f.outcome.result()
            landed = f.landed if f.landed is not None else self.clock()
            self.cache.settle((ref for b in f.binds if b.gang_id in result.bound
                               for ref, _ in b.pod_nodes), landed)
            self.cache.land_prebinds(f.prebinds(), result.prebinds, landed)
            self._take(f.binds, result, f.partial, f.complete_since, landed)
            self.observer.landed(f, result, landed)

    def drain(self, timeout: float) -> int:
        """Wait up to *timeout* seconds for the binds in flight and take their outcomes in;
        abandon the rest (on stepping down: the fence refuses their remaining writes, and
        whatever they left partly bound is the next leader's repair). Their members are no
        longer assumed: the cache is the watch's again. The number abandoned."""
        self._land(self.flights.wait(timeout))
        abandoned = self.flights.abandon()
        for f in abandoned:
            self.cache.forget(f.pods())
            self.cache.land_prebinds(f.prebinds(), (), self.clock())
        self.cache.forget(self.backoffs.release_all())  # the next leader decides afresh
        if abandoned:
            log.warning("binds_abandoned", gangs=sum(len(f.binds) for f in abandoned),
                        waited_s=timeout)
        return len(abandoned)

    # What the last cycle left -----------------------------------------------------------------
    @property
    def last_plan(self) -> CyclePlan | None:
        """The last cycle's plan (handed to the next ``decide``)."""
        return None if self._last is None else self._last.plan

    @property
    def last_queues(self) -> tuple[QueueReport, ...]:
        """Per-queue figures of the last cycle (worked out on first use: a simulation never
        reads them, the live scheduler's Queue status publisher at most every few seconds)."""
        return () if self._last is None else self._last.queues()

    @property
    def last_cycle(self) -> tuple[CycleInput, cycle.Policies] | None:
        """The last cycle's input and the policies it ran with (for the views)."""
        return None if self._last is None else (self._last.inp, self._last.policies)

    def backing_off(self, now: float) -> dict[str, float]:
        """Gang id -> when it may be tried again, for gangs in backoff (``Backoffs.until``)."""
        return self.backoffs.until(now)

    # When the next cycle is due ---------------------------------------------------------------
    def next_due(self) -> float | None:
        """When a cycle is due if nothing changes before (the clock's time; None: not until
        something changes): the last plan may change with time alone (``CyclePlan.due``),
        an assumption in the cache lapses, or the actuator retries what it could not carry
        out (``ApplyResult.retry_in``)."""
        plan, lapse = self.last_plan, self.cache.next_expiry()
        times = [plan.due if plan is not None else None, self._retry_at,
                 None if lapse is None else lapse + SLACK_SECONDS]
        return min((t for t in times if t is not None), default=None)

    def answered(self) -> bool:
        """Has the cluster begun to answer since the last cycle, ending a bind backoff that
        waited for it (``Backoffs.answered``)? A cycle is due at once."""
        return self.backoffs.answered(self.clock())

    def forget_accounting(self) -> None:
        """Start accounting afresh: the next cycle charges no time (after a leadership gap,
        in which another replica charged the GPUs allocated)."""
        self.observer.forget_accounting()
