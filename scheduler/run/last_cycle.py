"""The last cycle, kept for what reads it between cycles: its queue figures, worked out once.

Why apart from the loop: the loop's job is the cycle; what it leaves behind is read by others
(the live scheduler's Queue status publisher, at most every few seconds; the views; the metrics
after each cycle), and a simulation never reads the queue figures, so they are worked out on
first use from the cycle's own input, policies, recall and plan, never from the cache again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from policies import usage_memory
from policies.guards import NO_USAGE, Usage
from scheduler.decide import cycle
from scheduler.decide.guards import budgets
from scheduler.decide.plan import CyclePlan
from scheduler.decide.recall import Recall
from scheduler.decide.tallies import queue_tallies
from scheduler.feed.cache_cycle import CycleInput
from scheduler.model import Tier
from scheduler.report.queue_report import QueueReport, queue_reports

#: Gang id -> when it may be tried again, for gangs in backoff at a given time.
BackingOff = Callable[[float], dict[str, float]]


@dataclass(slots=True)
class LastCycle:
    """One cycle's input, the policies it ran with, its recall and plan; *backing_off* says
    which gangs were backing off (they wait with reason Backoff); *memory*: what queues
    borrowed, as of this cycle (``scheduler.run.remembered``); *usage*: GPU-hours of ended
    runs the cycle's budgets counted (``scheduler.run.guard_usage``)."""

    inp: CycleInput
    policies: cycle.Policies
    recall: Recall
    plan: CyclePlan
    backing_off: BackingOff
    memory: usage_memory.UsageMemory | None = None
    usage: Usage = NO_USAGE
    _waiting: Counter[tuple[str, str]] | None = field(default=None, repr=False)
    _queues: tuple[QueueReport, ...] | None = field(default=None, repr=False)

    def waiting(self) -> Counter[tuple[str, str]]:
        """Pending gangs by (queue, reason category); gangs backing off have reason Backoff
        (worked out once)."""
        if self._waiting is None:
            queue_of = {g.id: g.queue for g in self.inp.gangs.pending}
            self._waiting = Counter((queue_of.get(gid, ""), why)
                                    for gid, why in self._waiting_ids())
        return self._waiting

    def _waiting_ids(self) -> list[tuple[str, str]]:
        """(gang id, reason category) of each waiting gang, those backing off included."""
        known = {g.id for g in self.inp.gangs.pending}
        out = [(gid, r.category.value) for gid, r in self.plan.pending.items()]
        out += [(gid, "Backoff") for gid in self.backing_off(self.plan.now)
                if gid in known and gid not in self.plan.pending]
        return out

    def tiers(self) -> Counter[tuple[str, str, str]]:
        """Gangs by (queue, tier, state): ``pending`` are those ``waiting`` counts,
        ``running`` those running after the plan (the cycle's and those it binds). A tier is
        ``interactive`` or ``batch`` (``scheduler.model.Tier``), so the series stay bounded
        by the queues."""
        gangs = {g.id: g for g in self.inp.gangs.pending}
        running = self.inp.snapshot.running
        gangs.update((gid, rg.gang) for gid, rg in running.items())

        def key(gid: str, state: str) -> tuple[str, str, str]:
            g = gangs.get(gid)
            return ("", Tier.BATCH.value, state) if g is None else (g.queue, g.tier.value,
                                                                    state)

        out = Counter(key(gid, "pending") for gid, _ in self._waiting_ids())
        out.update(key(gid, "running") for gid in {*running, *(b.gang_id
                                                               for b in self.plan.binds)})
        return out

    def queues(self) -> tuple[QueueReport, ...]:
        """Per-queue figures (worked out on first use)."""
        if self._queues is None:
            per_queue: Counter[str] = Counter()
            for (queue, _), n in self.waiting().items():
                per_queue[queue] += n
            snapshot = self.inp.snapshot
            capacity = {p: snapshot.total_allocatable(p) for p in snapshot.pools()}
            tallies = queue_tallies(snapshot, self.inp.gangs.pending, self.policies,
                                      self.plan, self.recall)
            half_life, now = self.policies.scheduler.usage_half_life_seconds, self.plan.now
            remembered = shares = None
            if half_life > 0 and self.memory is not None:
                remembered = self.memory.at(now, half_life)
                shares = usage_memory.shares(self.memory, self.recall.tree(self.policies.queues),
                                             now, half_life)
            self._queues = queue_reports(tallies, self.policies, per_queue, capacity,
                                         remembered=remembered, remembered_shares=shares,
                                         remembered_at=now,
                                         budgets=budgets(snapshot, self.policies.queues,
                                                         self.usage, now))
        return self._queues
