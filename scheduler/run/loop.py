"""The scheduler: snapshot the cache, decide, apply. Shared by the live scheduler and the simulator.

Both build the same ``Scheduler(cache, policies, clock, actuator, metrics)`` and call the
same ``run_once()``; only the clock (wall or virtual) and the actuator (Kubernetes API or the
simulated cluster) differ. Nothing here knows which one it has.

What the loop adds around the pure ``decide``:

- a gang whose bind failed waits out a backoff before it is tried again
  (``scheduler.run.backoff``: a pod deleted under us is not retried every cycle). Nothing is
  deleted when a bind fails: the members it bound stay assumed bound
  (``scheduler.decide.housekeeping`` decides whether to complete or roll back a partly bound
  gang), the others are forgotten, except after a failure only for want of an answer (no
  reply, 429, 5xx): those are *held* on their nodes until the retry is due (for no reply at
  all, as soon as the cluster answers again), then placed again first. A bind fenced midway
  (the Lease lost or renewed late) does not back off at all. The backoffs go to ``decide``
  with the other ``Housekeeping`` (why each gang's last bind failed, gangs not formed, gangs
  partly bound and since when, whether this is a takeover);
- when the next cycle is due if nothing changes (``next_due``: the plan's ``due``, an
  assumption lapsing), for a live loop that runs no cycle otherwise;
- GPU-seconds charged to what is held (``scheduler.run.accrual``), up to every scrape;
- a ``Recall`` per node index, so ``decide`` reuses what earlier cycles worked out;
- binds are assumed in the cache until the watch confirms them, from their hand-over when
  the actuator binds outside the cycle (the live one: ``inflight``); their outcome is taken
  in when it lands, at the start of a later cycle (a failed bind frees its capacity then);
- the previous plan is handed to the next ``decide`` so nominations and reservations persist;
- metrics and one summary log line per cycle (info when the cycle did something, debug when
  idle), every line of the cycle carrying its number.

Gang scheduling latency runs from the first cycle that saw a gang complete to when all of
it was bound (``scheduler.run.latency``). With metrics,
``decide`` gets a solver that times each placement solve: the same ``placement.solve``, so
plans are unchanged.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

import structlog

from scheduler import placement
from scheduler.decide import cycle
from scheduler.decide.due import SLACK_SECONDS
from scheduler.decide.housekeeping import (
    REPAIR_GRACE_SECONDS,
    FormationProblem,
    Housekeeping,
    PartlyBound,
    cut_while_binding,
)
from scheduler.decide.plan import Bind, CyclePlan, RollbackCause
from scheduler.decide.recall import Recall
from scheduler.decide.statuses import queue_statuses
from scheduler.feed.cache import ClusterCache, CycleInput
from scheduler.kit.memo import Last
from scheduler.model import Gang, PodRef
from scheduler.model.workloads import PodPhase
from scheduler.placement.types import Placement, PlacementParams, PlacementResult
from scheduler.report.queue_report import QueueReport, queue_reports
from scheduler.run.accrual import Accrual
from scheduler.run.backoff import Backoffs
from scheduler.run.inflight import ApplyResult, Flight, Flights
from scheduler.run.latency import CompleteSince
from scheduler.run.metrics import SchedulerMetrics
from scheduler.world.snapshot import Snapshot

log = structlog.get_logger("gang_scheduler.loop")

_NO_HOUSEKEEPING = Housekeeping()


class Actuator(Protocol):
    """Carries out a plan: the only side effects of a cycle."""

    def apply(self, plan: CyclePlan, now: float) -> ApplyResult: ...


class PolicySource(Protocol):
    """The queue policies in force (the last good version, when an update was invalid)."""

    def current(self) -> cycle.Policies: ...


class Scheduler:
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
    ) -> None:
        """*repair_grace*: see ``housekeeping``. *answering*: does the cluster answer
        requests right now (the live scheduler's outage tracker)? Without it, a backoff
        after a failure without an answer runs its course like any other.
        *pool_gauge_interval*: seconds between updates of the per-pool GPU gauges, a pass
        over every node (GPU-seconds held are accrued every cycle)."""
        self.cache = cache
        self.policies = policies
        self.clock = clock
        self.actuator = actuator
        self.metrics = metrics
        self.repair_grace = repair_grace
        self.backoffs = Backoffs(backoff_initial, backoff_max, answering)
        self.pool_gauge_interval = pool_gauge_interval
        self._accrual: Accrual | None = None  # for ``metrics``, made on first use
        self._partly_since: dict[str, float] = {}  # gang id -> first cycle seen partly bound
        self._previous: CyclePlan | None = None
        self._recall: Recall | None = None  # kept while the nodes (the node index) stay
        self._complete = CompleteSince()  # where each gang's scheduling latency starts
        self._solve_s = 0.0  # placement time within the current decide
        self._retry_at: float | None = None  # when the actuator wants a cycle to retry
        self.cycles = 0
        self.last_plan: CyclePlan | None = None
        #: The last cycle's plan, input, policies and recall, and its queue reports once
        #: worked out.
        self._reported: tuple[CyclePlan, CycleInput, cycle.Policies, Recall,
                              tuple[QueueReport, ...] | None] | None = None
        self._waiting_memo: Last[CyclePlan, Counter[tuple[str, str]]] = Last()
        self.flights = Flights(clock)  # binds handed to the actuator's binding stage

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
        self._release(now)
        inp = self.cache.cycle_input(now)
        self._complete.track(inp.gangs.pending, now)
        house = self._housekeeping(inp, now, takeover)
        policies = self.policies.current()
        self._solve_s = 0.0
        started = time.perf_counter()
        if self._recall is None or self._recall.index is not inp.snapshot.index:
            self._recall = Recall(inp.snapshot.index)
        plan = cycle.decide(inp.snapshot, inp.gangs.pending, policies, now,
                            previous=self._previous,
                            solver=self._timed_solve if self.metrics is not None else None,
                            recall=self._recall, house=house)
        decided = time.perf_counter()
        result = self.actuator.apply(plan, now)
        applied = time.perf_counter()
        self._retry_at = None if result.retry_in is None else now + result.retry_in
        self.cache.assume_prebinds(result.prebinds, now)
        since = self._complete.take([b.gang_id for b in plan.binds])
        partial = {b.gang_id: house.partly_bound[b.gang_id] for b in plan.binds
                   if b.gang_id in house.partly_bound}
        if result.binding is not None:
            self.cache.assume([pn for b in plan.binds for pn in b.pod_nodes], now, binding=True)
            self.flights.launch(Flight(plan.binds, partial, since, result.binding, now))
        else:
            self.cache.assume([pn for b in plan.binds if b.gang_id in result.bound
                               for pn in b.pod_nodes], now)
            self._take(plan.binds, result, partial, since, self.clock())
        for gid in (r.gang_id for r in plan.rollbacks if r.cause is RollbackCause.TIMED_OUT):
            self.backoffs.fail(gid, now)
        self._previous = plan
        self.last_plan = plan
        self._reported = (plan, inp, policies, self._recall, None)
        self._observe(plan, result, decided - started, applied - decided, inp)
        return plan

    # Binds in flight ----------------------------------------------------------------------
    def _take(self, binds: Iterable[Bind], result: ApplyResult,
              partial: Mapping[str, PartlyBound], since: Mapping[str, float],
              bound_at: float) -> None:
        """Take the outcome of *binds* in (their members already assumed bound): of a failed
        gang, forget the members neither kept bound nor held, so their capacity is free
        again, and back the gang off; count and log what was bound, with each gang's latency
        from *since*."""
        bound, unanswered = set(result.bound), set(result.unanswered)
        held = {ref.uid for ref, _ in result.held}
        m = self.metrics
        for b in binds:
            gid = b.gang_id
            if gid in result.failed:
                holding = [(ref, node) for ref, node in b.pod_nodes if ref.uid in held]
                self.cache.forget(ref for ref, _ in b.pod_nodes if ref.uid not in held)
                self.cache.assume(holding, bound_at, binding=True)  # until the retry is due
                if gid not in result.fenced:  # fenced: nothing wrong with it, no backoff
                    self.backoffs.fail(gid, bound_at, result.failed[gid],
                                        transient=bool(holding) or gid in unanswered,
                                        unanswered=gid in unanswered,
                                        held=tuple(ref for ref, _ in holding))
                if gid in since:  # it is pending again: its latency runs on
                    self._complete.restore(gid, since[gid])
                continue
            if gid not in bound:
                continue
            self.backoffs.succeed(gid)
            ns = gid.split("/", 1)[0]
            if gid in partial:
                log.info("partial_gang_completed", gang=gid, bound=len(partial[gid].pods),
                         namespace=ns, queue=b.queue)
            latency = max(0.0, bound_at - since[gid]) if gid in since else 0.0
            log.info("gang_bound", gang=gid, namespace=ns, queue=b.queue,
                     pods=len(b.pod_nodes), nodes=len(b.placement.nodes),
                     latency_s=round(latency, 3))
            if m is not None:
                m.scheduling_latency.labels(b.queue).observe(latency)
        if result.left:  # members kept bound by a failed bind: their gang is repaired
            self.cache.assume(result.left, bound_at)
        if m is None:
            return
        if result.bound:
            m.binds.labels("success").inc(len(result.bound))
        if result.failed:
            m.binds.labels("failure").inc(len(result.failed))

    def _release(self, now: float) -> None:
        """Forget the held members of gangs whose retry is due: ``decide`` places them again
        (first: their gang is partly bound, or whole again if the watch saw them bound)."""
        self.cache.forget(self.backoffs.due(now))

    def _land(self, flights: Iterable[Flight]) -> None:
        """Take in the outcome of flights that landed."""
        for f in flights:
            result = f.outcome.result()
            landed = f.landed if f.landed is not None else self.clock()
            self.cache.settle((ref for b in f.binds if b.gang_id in result.bound
                               for ref, _ in b.pod_nodes), landed)
            self.cache.assume_prebinds(result.prebinds, landed)
            self._take(f.binds, result, f.partial, f.complete_since, landed)
            log.debug("binds_landed", bound=len(result.bound), failed=len(result.failed),
                      bind_ms=round((landed - f.launched) * 1000, 1))
            if self.metrics is not None:
                self.metrics.bind_duration.observe(max(0.0, landed - f.launched))

    def drain(self, timeout: float) -> int:
        """Wait up to *timeout* seconds for the binds in flight and take their outcomes in;
        abandon the rest (on stepping down: the fence refuses their remaining writes, and
        whatever they left partly bound is the next leader's repair). Their members are no
        longer assumed: the cache is the watch's again. The number abandoned."""
        self._land(self.flights.wait(timeout))
        abandoned = self.flights.abandon()
        for f in abandoned:
            self.cache.forget(f.pods())
        self.cache.forget(self.backoffs.release_all())  # the next leader decides afresh
        if abandoned:
            log.warning("binds_abandoned", gangs=sum(len(f.binds) for f in abandoned),
                        waited_s=timeout)
        return len(abandoned)

    @property
    def last_queues(self) -> tuple[QueueReport, ...]:
        """Per-queue figures of the last cycle (worked out on first use: a simulation never
        reads them, the live scheduler's status writer reads them at most every few seconds)."""
        if self._reported is None:
            return ()
        plan, inp, policies, recall, reports = self._reported
        if reports is None:
            per_queue: Counter[str] = Counter()
            for (queue, _), n in self._waiting_of(plan, inp).items():
                per_queue[queue] += n
            snapshot = inp.snapshot
            capacity = {p: snapshot.total_allocatable(p) for p in snapshot.pools()}
            statuses = queue_statuses(snapshot, inp.gangs.pending, policies, plan, recall)
            reports = queue_reports(statuses, policies, per_queue, capacity)
            self._reported = (plan, inp, policies, recall, reports)
        return reports

    @property
    def last_cycle(self) -> tuple[CycleInput, cycle.Policies] | None:
        """The last cycle's input and the policies it ran with (for the views)."""
        return None if self._reported is None else (self._reported[1], self._reported[2])

    def _waiting_of(self, plan: CyclePlan, inp: CycleInput) -> Counter[tuple[str, str]]:
        """``_waiting`` of the last cycle, worked out once."""
        return self._waiting_memo.get(plan, lambda p: self._waiting(p, inp))

    def _timed_solve(self, gang: Gang, snapshot: Snapshot,
                     params: PlacementParams) -> PlacementResult:
        started = time.perf_counter()
        result = placement.solve(gang, snapshot, params)
        elapsed = time.perf_counter() - started
        self._solve_s += elapsed
        if self.metrics is not None:
            solver = result.solved_by if isinstance(result, Placement) else "unplaceable"
            self.metrics.solver_duration.labels(solver).observe(elapsed)
        return result

    # Housekeeping -------------------------------------------------------------------------
    def _housekeeping(self, inp: CycleInput, now: float, takeover: bool) -> Housekeeping:
        """What ``decide`` needs to know besides the pending gangs: backoffs, gangs that
        cannot be formed and gangs left partly bound (with their pods, from the cache)."""
        gangs = inp.gangs
        since = self._partly_since
        for gid in [gid for gid in since if gid not in gangs.partially_bound]:
            del since[gid]
        if not (self.backoffs or gangs.problems or gangs.partially_bound or takeover):
            return _NO_HOUSEKEEPING
        unformed = {gid: FormationProblem(why, tuple(
            PodRef(p.namespace, p.name, p.uid)
            for p in self.cache.gang_pods(gid) if not p.node_name), self.cache.native_group(gid))
            for gid, why in gangs.problems.items()}
        partly = {}
        for gid, refs in gangs.partially_bound.items():
            pods = {p.uid: p for p in self.cache.gang_pods(gid)}
            bound = [pods[r.uid] for r in refs if r.uid in pods]
            started = any(p.phase is not PodPhase.PENDING for p in bound)
            group = self.cache.group(gid)
            partly[gid] = PartlyBound(refs, started, since.setdefault(gid, now),
                                      cut_while_binding(bound, pods.values()),
                                      group.schedule_timeout_seconds if group else None)
        backoff = self.backing_off(now)
        return Housekeeping(backoff, unformed, partly, takeover, self.repair_grace,
                            failed_binds=self.backoffs.failed_binds(backoff))

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

    # Observability ----------------------------------------------------------------------------
    def forget_accounting(self) -> None:
        """Start accounting afresh: the next cycle charges no time (after a leadership gap,
        in which another replica charged the GPUs held)."""
        if self._accrual is not None:
            self._accrual.forget()

    def _accrual_of(self, m: SchedulerMetrics) -> Accrual:
        """The accrual of metrics *m*, charged up to the moment whenever they are read."""
        if self._accrual is None or self._accrual.metrics is not m:
            accrual = self._accrual = Accrual(m, self.pool_gauge_interval)
            m.before_scrape(lambda: accrual.until(self.clock()))
        return self._accrual

    def _waiting(self, plan: CyclePlan, inp: CycleInput) -> Counter[tuple[str, str]]:
        """Pending gangs by (queue, reason category); gangs backing off have reason Backoff."""
        queue_of = {g.id: g.queue for g in inp.gangs.pending}
        pending = Counter((queue_of.get(gid, ""), r.category.value)
                          for gid, r in plan.pending.items())
        for gid in self.backing_off(plan.now):
            if gid in queue_of and gid not in plan.pending:
                pending[(queue_of[gid], "Backoff")] += 1
        return pending

    def _observe(self, plan: CyclePlan, result: ApplyResult, decide_s: float, apply_s: float,
                 inp: CycleInput) -> None:
        categories = Counter(r.category for r in plan.pending.values())
        reasons = {c.value: n for c, n in categories.items()}
        busy = plan.binds or plan.evictions or result.failed or result.blocked
        (log.info if busy else log.debug)(
            "cycle_summary", binds=len(plan.binds), failed=len(result.failed),
            in_flight=len(self.flights), evictions=len(result.evicted),
            blocked=len(result.blocked), nominations=len(plan.nominations),
            pending=len(plan.pending), reasons=dict(sorted(reasons.items())),
            decide_ms=round(decide_s * 1000, 1), solve_ms=round(self._solve_s * 1000, 1),
            apply_ms=round(apply_s * 1000, 1))
        m = self.metrics
        if m is None:
            return
        m.cycles.inc()
        m.cycle_duration.observe(decide_s)
        m.apply_duration.observe(apply_s)
        m.set_pending(self._waiting_of(plan, inp))
        m.set_queues(self.last_queues)
        ran = self.last_cycle  # this cycle's, with the policies it ran with
        self._accrual_of(m).cycle(inp.snapshot, plan, inp.gangs.pending,
                                  ran[1].queues if ran is not None else None)
        for r in plan.rollbacks:
            m.rollbacks.labels(str(r.cause)).inc()
        if result.blocked:
            m.evictions_blocked.inc(len(result.blocked))
        m.count_evictions(inp.snapshot.running.get(v) for v in result.evicted)
