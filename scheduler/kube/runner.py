"""The live scheduler process: informers -> cache -> Scheduler.run_once -> KubeActuator.

Every replica watches the cluster (so a standby's cache is warm); only the leader runs
cycles and writes. A cycle runs when something changed (the cache, the policies, a bind
outcome, leadership) or when the last plan comes due (a backoff ends, a gang starves, a
timeout runs out: ``scheduler.run.wake``), and never otherwise: an idle cluster costs no cycles
and no writes. Between cycles the loop sleeps until something changes, the next due time,
or ``cycle_interval`` seconds (its heartbeat and leadership check) at most; after a cycle it
rests ``poll_interval``, so the watch events of a burst are batched into the next cycle.
Queue figures postponed by their rate limit are written when due, without a cycle.

Gangs left partly bound are repaired on every cycle (completed, or rolled back: see
``scheduler.decide.housekeeping``); the first cycle of a new term (``LeaderElector.term``: the Lease
acquired, not merely renewed late) is a takeover, when ``decide`` rolls back at once what a
crashed predecessor left cut mid-bind and this cycle cannot complete (a running gang short of
a lost member is kept). A replica whose renewal was only late keeps the same term: it stops
writing while late and then carries on without a takeover, so it never rolls back a gang it
was itself binding. After each cycle the bound
PodGroups' status follows their pods.

Binds run outside the cycle (``scheduler.run.inflight``); a bind's outcome landing starts a
cycle, which takes it in. While binds are in flight the loop rests after each cycle as long
as the cycle took (half a second at most), leaving the binder and the informers at least
half of the interpreter. Before giving the Lease up, and whenever this replica is not
leading, the binds in flight are waited for (``DRAIN_SECONDS`` at most: every request has a
timeout, so they end) and the rest abandoned: the fence refuses their remaining writes.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable

import structlog

from policies.queues import PolicySet
from policies.validation import PolicyStore
from scheduler.feed.cache import ClusterCache
from scheduler.feed.grouping import GroupingConfig
from scheduler.kube.client import KubeClient, connect
from scheduler.kube.events import EventRecorder
from scheduler.kube.lead import fence_policy
from scheduler.kube.lead.fence import FencedClient, FenceToken
from scheduler.kube.lead.leader import LeaderElector
from scheduler.kube.read import feed, informer
from scheduler.kube.read.input_warnings import InputWarnings
from scheduler.kube.read.policy_feed import LivePolicies
from scheduler.kube.read.scale_up_feed import ScaleUpFeed
from scheduler.kube.tending import Tending
from scheduler.kube.write.actuator import ActuatorConfig, KubeActuator
from scheduler.kube.write.binder import Binder
from scheduler.kube.write.gang_notices import GangNotices
from scheduler.kube.write.group_sync import GroupStatusSync
from scheduler.kube.write.owner_estimates import OwnerEstimates
from scheduler.kube.write.provisioning import ScaleUpWriter
from scheduler.kube.write.queue_finalizer import QueueFinalizers
from scheduler.kube.write.queue_status import QueueStatusPublisher
from scheduler.kube.write.runtime_ledger import RuntimeLedger
from scheduler.kube.write.shortfalls import ShortfallReporter
from scheduler.kube.write.status import StatusWriter
from scheduler.kube.write.writer import Retry
from scheduler.report.chargeback import Period, Row, day_of
from scheduler.run import kueue_mode, memory
from scheduler.run.config import SchedulerConfig
from scheduler.run.gpu_use import GpuUse
from scheduler.run.loop import Scheduler
from scheduler.run.metrics import SchedulerMetrics
from scheduler.run.serve import Health
from scheduler.run.wake import Marks, Wake
from scheduler.views import live as live_view
from scheduler.views.state import ClusterView

log = structlog.get_logger("gang_scheduler.runner")

#: How long stepping down waits for the binds in flight before abandoning them.
DRAIN_SECONDS = 60.0
#: The longest rest after a cycle while binds are in flight (see the module docstring).
REST_MAX_SECONDS = 0.5
#: Seconds between updates of the per-pool GPU gauges (``Scheduler``).
POOL_GAUGE_SECONDS = 1.0
#: A cycle that raised is run again after this long, changed input or not.
FAILED_CYCLE_RETRY_SECONDS = 5.0


def _answering(client: KubeClient) -> Callable[[], bool] | None:
    """Does the apiserver answer right now (no outage under way)? Unit tests' fakes have no
    outage tracker."""
    outages = getattr(client, "outages", None)
    return None if outages is None else lambda: not outages.down


class LiveScheduler(Tending):
    def __init__(self, config: SchedulerConfig, client: KubeClient,
                 metrics: SchedulerMetrics | None = None, health: Health | None = None,
                 identity: str | None = None, poll_interval: float = 0.05,
                 queue_status_interval: float | None = None) -> None:
        self.config = config
        self.client = client
        self.metrics = metrics or SchedulerMetrics(pricing=config.pricing)
        # Read at scrape time: a refused Queue shows in the gauge as soon as its Valid=False
        # condition is written, not one loop iteration later.
        self.metrics.invalid_queues.set_function(lambda: len(self.policies.invalid))
        self.health = health or Health()
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}"
        self.poll_interval = poll_interval
        self.cache = ClusterCache(GroupingConfig(scheduler_name=config.scheduler_name,
                                                 default_queue=config.default_queue))
        self.wake = Wake()  # when the next cycle runs (see the module docstring)
        self.cache.on_change = self.wake.poke
        # Queue status (figures and the Valid condition) is written by the leader only, at
        # most every queueStatusIntervalSeconds (the argument overrides it, for tests).
        if queue_status_interval is None:
            queue_status_interval = config.queue_status_interval_seconds
        # Every write (binds, evictions, status, events) goes through the fence; reads and the
        # Lease itself use the plain client (scheduler.kube.lead.fence). Unit tests' fakes are not
        # KubeClients and have no apiserver to fence.
        writes: KubeClient = (FencedClient(client, self._may_write,
                                           self.metrics.fenced_writes.inc, self._fence_token,
                                           self.metrics.fenced_by_apiserver.inc)
                              if isinstance(client, KubeClient) else client)
        answering = _answering(client)
        retry = Retry(answering or (lambda: True), self.metrics.status_writes_failed.inc,
                      self.metrics.status_write_retries.inc)
        self.queue_status = QueueStatusPublisher(writes, lambda: self.is_leader,
                                                 min_interval=queue_status_interval,
                                                 retry=retry)
        self.policies = LivePolicies(writes, initial=PolicyStore(PolicySet(
            scheduler=config.policy())), write_status=self.queue_status.set_validity,
            on_change=self.wake.poke,
            overlay=kueue_mode.overlay(config.kueue, config.default_queue))
        self.finalizers = QueueFinalizers(writes, self.policies.objects, retry=retry)
        self.input_warnings = InputWarnings()
        self.informers = feed.cache_informers(client, self.cache, config.node_labels,
                                              self.input_warnings, config.scheduler_name)
        self.informers.append(informer.Informer(client, informer.QUEUES, self.policies.handle))
        self.binder = Binder(writes, concurrency=config.bind_concurrency,
                             queue_of=self.cache.queue_of)
        self.events = EventRecorder(writes, interval=config.event_min_interval_seconds)
        # Whole-gang scale-up (spec.scaleUp.pools): read on its own thread, only while some
        # pool may scale up; the requests are written by the actuator's background writer.
        self.scale_up_feed = ScaleUpFeed(
            client, lambda: self.policies.current().scheduler.scale_up_pools,
            config.node_labels, refreshed=self.wake.poke)
        self.actuator = KubeActuator(
            writes, self.binder, StatusWriter(writes), self.events,
            ActuatorConfig(config.scheduler_name, config.eviction_grace_period_seconds),
            self.metrics, retry=retry, scale_ups=ScaleUpWriter(writes),
            asked_before=self.scale_up_feed.listed)
        self.group_sync = GroupStatusSync(self.cache, self.actuator.statuses,
                                          self.actuator.writer, self.actuator.native_statuses)
        self.shortfalls = ShortfallReporter(self.events, self.metrics, self.cache.group,
                                            self.cache.gang_pods)
        self.gang_notices = GangNotices(self.events, self.cache.group, self.cache.gang_pods)
        self.owner_estimates = OwnerEstimates(self.actuator.statuses, self.actuator.writer,
                                              self.cache.gang_pods)
        self.runtime_ledger = RuntimeLedger(self.actuator.statuses, self.actuator.writer)
        self.scheduler = Scheduler(
            self.cache, self.policies, time.time, self.actuator, self.metrics,
            backoff_initial=config.bind_backoff_initial_seconds,
            backoff_max=config.bind_backoff_max_seconds,
            repair_grace=config.partial_gang_grace_seconds,
            answering=answering, pool_gauge_interval=POOL_GAUGE_SECONDS,
            scale_up=self.scale_up_feed)
        self.scheduler.flights.on_land = self.wake.poke
        le = config.leader_election
        self.elector = (LeaderElector(client, le.lease_namespace, le.lease_name, self.identity,
                                      lease_duration=le.lease_duration_seconds,
                                      renew_deadline=le.renew_deadline_seconds,
                                      retry_period=le.retry_period_seconds)
                        if le.enabled else None)
        self.recent = live_view.Recent()  # preemptions and reservations, for the dashboard
        #: GPU utilisation joined with the gangs (``gpuMetrics``; None: off). Read on its own
        #: thread; a good read wakes the loop, which sets the gauges without a cycle.
        self.gpu_use = (GpuUse(config.gpu_metrics, self.metrics, refreshed=self.wake.poke)
                        if config.gpu_metrics is not None else None)
        self.stop_event = threading.Event()
        self._threads: list[threading.Thread] = []
        self._cycle_lock = threading.Lock()  # taken for a whole cycle; see _quiesce
        self._cycle_term: int | None = None  # the term the last cycle began in
        #: Passes of the leader's loop: each runs a cycle, or finds none due (nothing changed
        #: or came due: a cycle would repeat the last plan). Tests count them as chances.
        self.passes = 0

    @classmethod
    def from_kubeconfig(cls, config: SchedulerConfig, kubeconfig: str | None,
                        **kwargs: object) -> LiveScheduler:
        client = connect(kubeconfig, pool_maxsize=max(64, config.bind_concurrency * 2))
        return cls(config, client, **kwargs)  # type: ignore[arg-type]

    @property
    def is_leader(self) -> bool:
        return self.elector is None or self.elector.is_leader

    @property
    def term(self) -> int | None:
        """The current leadership term (0 without leader election), None when not leading."""
        return 0 if self.elector is None else self.elector.term

    def _may_write(self) -> bool:
        """The fence's test: leading now, in the term the cycle under way began in (a plan
        made before the Lease changed hands never goes out in a later term)."""
        started = self._cycle_term
        return self.is_leader and (started is None or self.term == started)

    def _fence_token(self) -> FenceToken | None:
        """The term the scheduler's Bindings and Evictions are stamped with (none without
        leader election: the apiserver's fence then lets them through)."""
        return None if self.elector is None else self.elector.fence_token

    def _await_fence(self) -> None:
        """A new term's first writes wait until the apiserver's fence sees the term
        (``scheduler.kube.lead.fence_policy``): it reads the Lease through an informer, and a
        write it refused for lagging would be a fenced write, a wasted cycle."""
        token = self._fence_token()
        if token is None or self.elector is None:
            return
        waited = fence_policy.wait_until_seen(self.client, token, self.elector.namespace,
                                              interval=0.01, leading=lambda: self.is_leader)
        if waited is not None:
            log.info("fence_sees_term", identity=self.identity,
                     lease_transitions=token.transitions, waited_s=round(waited, 3))

    def start(self, sync_timeout: float = 120.0) -> None:
        started = time.monotonic()
        memory.pause()  # the first lists are the cache, not garbage (scheduler.run.memory)
        try:
            for inf in self.informers:
                inf.start()
            if not feed.wait_for_sync(self.informers, sync_timeout):
                raise TimeoutError(f"informers did not sync within {sync_timeout:.0f}s")
        finally:
            memory.settle()
        self.health.set_ready(True)
        if self.gpu_use is not None:
            self._threads.append(self.gpu_use.reader.start(self.stop_event))
        self._threads.append(self.scale_up_feed.start(self.stop_event))
        log.info("caches_synced", identity=self.identity, nodes=len(self.cache.nodes()),
                 pods=len(self.cache.pods()), seconds=round(time.monotonic() - started, 2))
        if self.elector is not None:
            t = threading.Thread(target=self.elector.run, args=(self.stop_event, self._quiesce),
                                 name="leader-election", daemon=True)
            t.start()
            self._threads.append(t)

    def run(self) -> None:
        """The scheduling loop; returns when ``stop()`` is called."""
        led: int | None = None  # the term of the last cycle run (None: none yet)
        while not self.stop_event.is_set():
            self.health.heartbeat()
            leader, term = self.is_leader, self.term
            self.metrics.is_leader.set(1 if leader else 0)
            if not leader or term is None:  # a late renewal keeps *led*: see the docstring
                if len(self.scheduler.flights):
                    with self._cycle_lock:
                        self.scheduler.drain(DRAIN_SECONDS)
                self.stop_event.wait(self.poll_interval * 4)
                continue
            self.passes += 1
            self.metrics.loop_passes.inc()
            self.wake.event.clear()  # before the marks are read: a change after sets it
            marks = Marks(self.cache.generation, self.policies.current(), term,
                          self.scheduler.flights.any_landed, self.scheduler.answered(),
                          self.scale_up_feed.view)
            why = self.wake.why(marks, time.time())
            if why is None:
                self._between_cycles()
                continue
            started = time.monotonic()
            with self._cycle_lock:
                if not self.is_leader or self.term != term:  # changed meanwhile
                    continue
                self.wake.began(marks)  # (not before: a change skipped here is kept)
                self._cycle(term, term != led, why)
                led = term
            rest = self.poll_interval
            if len(self.scheduler.flights):
                # Binds in flight, and the watch confirming each one starts a cycle: rest as
                # long as the cycle took, so the binder's threads and the informers (one
                # interpreter lock) get at least half of the time.
                rest = max(rest, min(REST_MAX_SECONDS, time.monotonic() - started))
            self.stop_event.wait(rest)

    def _cycle(self, term: int, takeover: bool, why: str) -> None:
        """One decision cycle and what follows it (under the cycle lock)."""
        self._cycle_term = term
        if takeover:
            self._await_fence()
            log.info("leading", identity=self.identity, term=term)
            self.queue_status.took_over()
            self.scheduler.forget_accounting()
            self.runtime_ledger.forget()
            # Fair share with memory: start from what the last leader wrote on the Queues.
            self.scheduler.remembered.restore(self.policies.remembered(), self.scheduler.clock(),
                                              self.policies.current())
        try:
            log.debug("cycle_due", why=why)
            plan = self.scheduler.run_once(takeover=takeover)
            self.recent.observe(plan)
            self.owner_estimates.publish(plan)
            self._count_runtime(plan.now)
            self.queue_status.publish(self.scheduler.last_queues)
            self._sync_finalizers()
            self._follow_the_pods()
            self._warn_of_inputs()
            self._gpu_gauges()
        except Exception:  # keep scheduling on the last good state
            log.exception("cycle_failed")
            # Tried again after a while even if nothing changes: what failed may pass then.
            self.wake.ended(time.time() + FAILED_CYCLE_RETRY_SECONDS)
            return
        self.wake.ended(self.scheduler.next_due())

    def chargeback(self, period: Period) -> tuple[Row, ...] | None:
        """The chargeback rows of *period* (``/api/v1/chargeback``), charged up to now; None on
        a replica that has not led a cycle."""
        accrual = self.scheduler.observer.accrual
        if accrual is None or not self.is_leader:
            return None
        return accrual.rows(period)

    def view(self) -> ClusterView | None:
        """The views' rows from the last cycle; None on a replica that has not led one."""
        last, plan = self.scheduler.last_cycle, self.scheduler.last_plan
        if last is None or plan is None or not self.is_leader:
            return None
        inp, policies = last
        accrual = self.scheduler.observer.accrual
        month = day_of(plan.now).replace(day=1)
        return live_view.build(live_view.Cycle(inp, plan, policies, self.scheduler.last_queues,
                                               self.policies.invalid),
                               self.cache.gang_pods, self.recent.events,
                               failures=self.cache,
                               charged=accrual.rows(since=month) if accrual else (),
                               gpu=self.gpu_use.source() if self.gpu_use is not None else None)

    def _quiesce(self) -> None:
        """Called by the elector before it gives the Lease up: let the current cycle end,
        and the binds in flight."""
        with self._cycle_lock:
            self.scheduler.drain(DRAIN_SECONDS)

    def stop(self) -> None:
        self.stop_event.set()
        self.wake.poke()
        for inf in self.informers:
            inf.stop()
        for t in self._threads:
            t.join(timeout=5)
        self.actuator.close()
        self.queue_status.close()
        self.finalizers.close()
        self.binder.close()
