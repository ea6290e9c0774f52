"""The scheduler's memory of what queues borrowed (fair share with memory), cycle to cycle.

Why a run-layer module: ``decide`` is pure, so what queues used in earlier cycles must come in
as an argument (``policies.usage_memory.UsageMemory``) and the next one be kept by whoever
runs the cycles. This is that keeper, fed like the other jobs beside the loop by the cycle's
input, policies and plan, with the plan's ``now``: the live scheduler and the simulator keep
it alike, so a simulated week remembers what a live week would.

What each cycle tells it: the GPUs each queue's subtree borrows beyond its quota once the
plan's binds are in (``usage_memory.borrowed_gpus``); they count from the plan's time until
the next cycle. With no half-life set the memory stays empty and ``decide`` ranks as before.

**It survives a restart, through the Queue status.** The leader writes each queue's
remembered GPU-hours with the time they were worked out (``status.rememberedGPUHours``,
``status.rememberedAt``: ``scheduler.kube.write.queue_status``); every replica reads them
back from the Queue objects it watches, and a replica that takes the lease starts from them
(``restore``), decayed to its own time. What ran between the last write and the takeover is
not counted (a lease period, or the time the scheduler was down: nothing ran then that it
placed, though what kept running is not counted either). Without such a status (a first
start, or a cluster whose statuses were cleared) the memory starts empty and is rebuilt from
what runs: half after one half-life, over 90% after four. The simulator never restarts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from policies import usage_memory
from policies.admission import placement_charges
from policies.queues import PolicySet
from policies.quota import QuotaTree
from scheduler.decide.plan import CyclePlan
from scheduler.model import Gang
from scheduler.model.resources import Resources
from scheduler.world.snapshot import Snapshot


class RememberedUsage:
    """The ``UsageMemory`` the next cycle is handed (``memory``), kept from each cycle."""

    def __init__(self) -> None:
        self.memory = usage_memory.UsageMemory()
        self._half_life = 0.0

    def cycle(self, snapshot: Snapshot, pending: Iterable[Gang], policies: PolicySet,
              tree: QuotaTree, plan: CyclePlan) -> None:
        """Take in one cycle: decay what is remembered to the plan's time, then count what
        each queue borrows once the plan's binds are in (*tree*: the quota tree of
        *policies*' queues; *pending*: the cycle's pending gangs, the plan's binds among
        them)."""
        half_life = self._half_life = policies.scheduler.usage_half_life_seconds
        if half_life <= 0:
            self.memory = usage_memory.UsageMemory()
            return
        usage: dict[tuple[str, str], Resources] = dict(snapshot.queue_usage)
        if plan.binds:
            by_id = {g.id: g for g in pending}
            for b in plan.binds:
                for pool, res in placement_charges(by_id[b.gang_id], b.placement,
                                                   snapshot).items():
                    key = (b.queue, pool)
                    usage[key] = usage[key] + res if key in usage else res
        self.memory = self.memory.observed(plan.now, half_life,
                                           usage_memory.borrowed_gpus(tree, usage))

    def restore(self, saved: Mapping[str, tuple[float, float]], now: float,
                policies: PolicySet) -> None:
        """Start from what a predecessor saved (queue -> (GPU-seconds, as of when)), on
        taking the lease: its figures are newer than whatever this replica remembers."""
        self._half_life = policies.scheduler.usage_half_life_seconds
        self.memory = usage_memory.UsageMemory.restored(saved, now, self._half_life)

    def gpu_seconds(self, now: float) -> Mapping[str, float]:
        """Remembered GPU-seconds per queue at *now* (empty when off)."""
        return self.memory.at(now, self._half_life)

    def shares(self, tree: QuotaTree, now: float) -> Mapping[str, float]:
        """Each queue's remembered share at *now*, as ``decide`` ranks by it."""
        return usage_memory.shares(self.memory, tree, now, self._half_life)

    @property
    def on(self) -> bool:
        """Is a half-life set (as of the last cycle)?"""
        return self._half_life > 0
