"""The scheduler's memory of what queues borrowed (fair share with memory), cycle to cycle.

Why a run-layer module: ``decide`` is pure, so what queues used in earlier cycles must come in
as an argument (``policies.usage_memory.UsageMemory``) and the next one be kept by whoever
runs the cycles. This is that keeper, fed like the other jobs beside the loop by the cycle's
input, policies and plan, with the plan's ``now``: the live scheduler and the simulator keep
it alike, so a simulated week remembers what a live week would.

What each cycle tells it: the GPUs each queue's subtree borrows beyond its quota once the
plan's binds are in (``usage_memory.borrowed_gpus``); they count from the plan's time until
the next cycle. With no half-life set the memory stays empty and ``decide`` ranks as before.

**A restart forgets.** The memory lives in the scheduler process only: after a restart (or
when another replica takes over the lease) it starts empty and is rebuilt from what runs from
then on; after one half-life it holds half of what a scheduler that never stopped would
remember, after four half-lives over 90%. What runs keeps counting at once (its borrowed GPUs
are the first cycle's rates); what ran before the restart and ended is not counted. A
deliberate trade: persisting it on the Queue status would need a read-back path and a
clock shared across replicas, for a figure that only breaks ties among borrowing queues.
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
