"""Why a reserved gang started before its first estimate: a decomposition for bench_eta.

For every gang with a reservation, the snapshot of the cycle that made its first estimate is
kept: the running gangs and when the estimator expected each to end. When the gang binds
more than ``EARLY`` seconds before that estimate, the first of these that is true is its
cause:

- ``own preemption``: it was bound after evicting victims itself (a priority preemption or a
  reclaim), of gangs running when it was estimated or of one started since (a backfill);
- ``preempted for another``: a gang it waited for (running then, expected to end after the
  start) was evicted for another gang, pending when the estimate was made or arrived later;
- ``ended before its estimate``: a gang it waited for finished before the end the estimator
  assumed (how far off, and where the estimate came from: the gang's own, or its queue's
  ``defaultRuntimeSeconds``);
- ``new capacity``: more schedulable nodes than when it was estimated;
- ``fewer releases than estimated``: none of the above; every gang it waited for ended when
  expected, and the gang still started with fewer of them gone than the estimate assumed
  (on the reserved nodes or elsewhere): the estimate itself was pessimistic.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from policies.queues import QueueSet
from policies.reservation import expected_end
from scheduler.decide.plan import CyclePlan, ReasonCategory
from scheduler.feed.cache_cycle import CycleInput

EARLY = 600.0  # seconds: "started more than 10 min early"


@dataclass(frozen=True, slots=True)
class Estimated:
    """What the first estimate of a reserved gang was made from."""

    at: float
    estimate: float
    nodes: tuple[str, ...]
    #: Running gangs then: id -> (expected end per the estimator, or None; from its own
    #: runtime estimate rather than its queue's default).
    running: dict[str, tuple[float | None, bool]]
    ready_nodes: int
    pending: frozenset[str]  # gangs pending then (a preemptor among them was known)


@dataclass
class Causes:
    """Watches the plans and the snapshots they were made from; counts causes of early starts."""

    queues: QueueSet
    first: dict[str, Estimated] = field(default_factory=dict)
    preemptors: dict[str, list[str]] = field(default_factory=dict)  # gang -> evictions' why
    victims: dict[str, list[str]] = field(default_factory=dict)  # preemptor -> its victims
    evicted_by: dict[str, str] = field(default_factory=dict)  # victim -> preemptor
    ended: dict[str, float] = field(default_factory=dict)  # gang -> when it left running
    seen_running: dict[str, float] = field(default_factory=dict)  # gang -> last seen running
    counts: Counter[str] = field(default_factory=Counter)
    off_by: list[float] = field(default_factory=list)  # minutes, gangs that ended early
    defaults: int = 0  # of those, estimates from the queue's default
    early: int = 0
    bound: set[str] = field(default_factory=set)  # bound once: later spells are not counted

    def see(self, inp: CycleInput, plan: CyclePlan) -> None:
        snap, now = inp.snapshot, plan.now
        for gid in list(self.seen_running):
            if gid not in snap.running and gid not in self.ended:
                self.ended[gid] = now
        for gid in snap.running:
            self.seen_running[gid] = now
            self.ended.pop(gid, None)
        for ev in plan.evictions:
            self.preemptors.setdefault(ev.preemptor, []).append(ev.message)
            self.victims.setdefault(ev.preemptor, []).append(ev.victim)
            self.evicted_by[ev.victim] = ev.preemptor
        for gid, reason in plan.pending.items():
            if (reason.category is ReasonCategory.RESERVED and reason.estimated_start is not None
                    and gid not in self.first and gid not in self.bound):
                res = plan.reservation_of(gid)
                running = {r: (expected_end(rg, self.queues, now), rg.gang.runtime_estimate
                               is not None) for r, rg in snap.running.items()}
                ready = sum(1 for n in snap.nodes.values() if n.ready)
                self.first[gid] = Estimated(now, reason.estimated_start,
                                            res.nodes if res else (), running, ready,
                                            frozenset(plan.pending))
        for b in plan.binds:
            est = self.first.get(b.gang_id)
            if est is not None and now < est.estimate - EARLY:
                self.early += 1
                self.counts[self._cause(b.gang_id, est, inp, now, b.placement.nodes)] += 1
            self.first.pop(b.gang_id, None)
            self.bound.add(b.gang_id)  # only the first start counts

    def _cause(self, gid: str, est: Estimated, inp: CycleInput, now: float,
               nodes: tuple[str, ...]) -> str:
        if gid in self.preemptors:
            why = self.preemptors[gid][0]
            kind = "priority" if "priority" in why.split(":", 1)[-1] else "reclaim"
            later = any(v not in est.running for v in self.victims[gid])
            return (f"own preemption ({kind}, of a gang started after the estimate)" if later
                    else f"own preemption ({kind})")
        waited = [r for r, (end, _) in est.running.items()
                  if end is not None and end > now and r not in inp.snapshot.running]
        by_other = [r for r in waited if r in self.evicted_by]
        if by_other:
            known = any(self.evicted_by[r] in est.pending for r in by_other)
            return ("preempted for another (pending at the estimate)" if known
                    else "preempted for another (arrived later)")
        if waited:
            for r in waited:
                end, own = est.running[r]
                assert end is not None
                self.off_by.append((end - self.ended.get(r, now)) / 60)
                self.defaults += not own
            return "ended before its estimate"
        if sum(1 for n in inp.snapshot.nodes.values() if n.ready) > est.ready_nodes:
            return "new capacity"
        where = "on the reserved nodes" if set(nodes) <= set(est.nodes) else "elsewhere"
        return f"fewer releases than estimated ({where})"

    def report(self) -> str:
        lines = [f"Causes of the {self.early} start(s) more than {EARLY / 60:.0f} min early:"]
        lines += [f"  {n:4d}  {cause}" for cause, n in self.counts.most_common()]
        if self.off_by:
            off = sorted(self.off_by)
            lines.append(f"  gangs waited for that ended early: {len(off)}, by median "
                         f"{off[len(off) // 2]:.0f} min (max {off[-1]:.0f}); "
                         f"{self.defaults} estimated from the queue's default")
        return "\n".join(lines)


def merge(parts: list[Causes]) -> Causes:
    """The causes of several runs together (for the report)."""
    out = Causes(parts[0].queues)
    for c in parts:
        out.counts.update(c.counts)
        out.off_by.extend(c.off_by)
        out.defaults += c.defaults
        out.early += c.early
    return out
