"""What the leader keeps up to date around its cycles that is not the plan: PodGroup status,
shortfalls and gang notices following the pods, Queue finalizers, Warning events on unreadable
inputs, the GPU-use gauges, the runtime each workload ran (``RuntimeLedger``), and the queue
figures and settled shortfalls due between cycles.

Separate from ``runner`` because none of it decides or binds: ``runner`` is the loop, its
leadership and fencing; this is the housekeeping each pass runs after a cycle or instead of
one. ``LiveScheduler`` inherits it and builds every part it uses (declared below).
"""

from __future__ import annotations

import time
from itertools import chain

from scheduler.feed.cache import ClusterCache
from scheduler.kube.events import EventRecorder, EventType, ObjectRef
from scheduler.kube.read.input_warnings import InputWarnings
from scheduler.kube.read.policy_feed import LivePolicies
from scheduler.kube.write.gang_notices import GangNotices
from scheduler.kube.write.group_sync import GroupStatusSync
from scheduler.kube.write.queue_finalizer import QueueFinalizers
from scheduler.kube.write.queue_status import QueueStatusPublisher
from scheduler.kube.write.runtime_ledger import RuntimeLedger
from scheduler.kube.write.shortfalls import ShortfallReporter
from scheduler.run.config import SchedulerConfig
from scheduler.run.gpu_use import GpuUse
from scheduler.run.loop import Scheduler
from scheduler.run.wake import Wake


class Tending:
    """The between-cycles and after-cycle writes of ``LiveScheduler``."""

    config: SchedulerConfig
    cache: ClusterCache
    scheduler: Scheduler
    policies: LivePolicies
    wake: Wake
    events: EventRecorder
    queue_status: QueueStatusPublisher
    finalizers: QueueFinalizers
    input_warnings: InputWarnings
    group_sync: GroupStatusSync
    shortfalls: ShortfallReporter
    gang_notices: GangNotices
    gpu_use: GpuUse | None
    runtime_ledger: RuntimeLedger

    def _between_cycles(self) -> None:
        """No cycle is due: write what is due without one (queue figures, a shortfall that
        has settled), then sleep until something changes, the next cycle or write is due, or
        ``cycle_interval`` (the heartbeat) at most."""
        self._warn_of_inputs()
        self._sync_finalizers()
        if self.gpu_use is not None and self.gpu_use.due:
            self._gpu_gauges()
        figures = self.queue_status.due_in()
        if figures is not None and figures <= 0:
            self.queue_status.publish(self.scheduler.last_queues)
            figures = self.queue_status.due_in()
        short_in = self.shortfalls.due_in(time.monotonic())
        if short_in is not None and short_in <= 0:
            self.shortfalls.settle(time.monotonic())
            short_in = self.shortfalls.due_in(time.monotonic())
        longest = self.config.cycle_interval_seconds
        for deadline in (figures, short_in):
            if deadline is not None:
                longest = min(longest, deadline)
        self.wake.event.wait(self.wake.sleep(time.time(), longest))

    def _follow_the_pods(self) -> None:
        """PodGroup status, running gangs short of members and gang notices, from the gangs
        as the cache has them once the cycle's plan went out (``ClusterCache.gangs_now``),
        not from the cycle's own input.

        Why read the cache again rather than reuse the cycle's input and result: the cache
        after ``apply`` differs from the cycle's input in what these writers are for, and
        nothing in the plan or ``ApplyResult`` carries it without grouping the pods again
        (which only the cache does):

        - the plan's binds are assumed in it (handed to the binder, or bound): a gang bound
          this cycle is running here, pending in the cycle's input, so a JobSet's other
          PodGroups are marked scheduled (``GroupStatusSync``) right after the hand-over,
          not a cycle later (when the bind lands);
        - watch events that arrived during ``decide`` and ``apply`` are in it: a gang that
          lost a member meanwhile is reported short (its settle time starting) and a new
          notice is told now, not after the next cycle;
        - reading it expires the assumptions that lapsed by now (bumping the generation the
          wake compares), as every ``cycle_input`` does.

        Why ``gangs_now`` and not a second ``cycle_input``: these writers read gangs only.
        Both rebuild the gangs changed since the cycle's input (most of the cost, and what
        the writers need); ``gangs_now`` leaves deriving the snapshot and the gang set to the
        next cycle's input, which takes in everything changed since, once
        (``benchmarks/bench_after_cycle.py`` has the figures). The gangs are the same.

        The cycle's input is already reused where the cycle's view is what is wanted: Queue
        figures (``last_queues``), finalizers (``last_cycle``) and the views."""
        gangs = self.cache.gangs_now(self.scheduler.clock())
        running = gangs.running
        self.group_sync.sync(running)
        self.shortfalls.report(running, time.monotonic())
        self.gang_notices.report(chain(gangs.pending, (r.gang for r in running.values())))

    def _count_runtime(self, now: float) -> None:
        """Runs that ended this cycle, added to their owners' runtime (``RuntimeLedger``)."""
        last = self.scheduler.last_cycle
        if last is not None:
            inp, policies = last
            self.runtime_ledger.observe(inp.snapshot.running, policies.queues, now)

    def _sync_finalizers(self) -> None:
        """The finalizer on each Queue (``queue_finalizer``): removed from a Queue being
        deleted once no running gang was admitted under it and no queue names it as parent.
        Running gangs as of the last cycle (a change since would have run one)."""
        last = self.scheduler.last_cycle
        if last is None:
            return  # nothing known to run yet: remove nothing
        queues = self.policies.current().queues
        in_use = {rg.gang.queue for rg in last[0].snapshot.running.values()}
        in_use |= {p for q in queues.queues if (p := queues.parent_of(q)) is not None}
        self.finalizers.sync(in_use | self.policies.waiting_parents())

    def _warn_of_inputs(self) -> None:
        """A Warning event on each object whose annotations the informers found unreadable,
        or that they could not use at all, since the last cycle (the leader only: standbys
        log them, see ``InputWarnings``)."""
        for f in self.input_warnings.drain():
            self.events.emit(ObjectRef(f.kind, f.namespace, f.name, f.uid, f.api_version),
                             f.reason, f.message, EventType.WARNING)

    def _gpu_gauges(self) -> None:
        """The GPU-use gauges and the idle GPUs the chargeback charges (``Accrual.set_idle``)
        from the last cycle's running gangs and the last good GPU samples (after a cycle, and
        after a read between cycles)."""
        last = self.scheduler.last_cycle
        if self.gpu_use is None or last is None:
            return
        snapshot = last[0].snapshot
        accrual = self.scheduler.observer.accrual
        self.gpu_use.update(snapshot.running, self.cache.gang_pods,
                            {name: n.pool for name, n in snapshot.nodes.items()},
                            accrual.set_idle if accrual is not None else None)
