"""Per-queue figures an operator reads: usage and quota per pool, gang counts, shares.

Derived from one cycle's queue tallies (``scheduler.decide.tallies``) and the policies that
cycle ran with, so the metrics (``scheduler.run.loop``, live and simulated alike) and the Queue
status the leader writes (``scheduler.kube.write.queue_status``) show the same numbers. Pure:
no clock, no I/O.

A parent queue has no gangs of its own; its figures are those of its whole subtree, so
``kubectl get queues`` adds up. Two shares make fairness visible:

- ``fair_share``: what the queue is entitled to of what it shares with its siblings,
  ``weight / sum(sibling weights)`` (1 for a root, which shares with nobody);
- ``usage_share``: what it actually uses of what it shares, always 0..1: the dominant
  resource over pools of ``subtree usage / what the parent's subtree has``, where the parent's
  subtree has every quota in it in full (its siblings' lending limits aside: a sibling's
  unlendable quota is still part of what they share), or what it uses if more (a parent that
  borrows from its own siblings). For a root: of its own subtree.

With fair share with memory on (``policies.usage_memory``), a third figure says what the
queue is remembered for: ``remembered_gpu_hours``, the GPU-hours its subtree borrowed beyond
its quota, each hour decayed by the half-life since (None when memory is off), and
``remembered_share``, the share it adds to the queue's fair-share rank while it borrows.

Two backlogged siblings with weights 1:3 on 16 GPUs show fair shares 0.25 / 0.75 and, once
they are allocated 4 and 12 GPUs, the same usage shares. (Dividing by the parent's *lendable* quota,
as before issue 32, read 2.0 for deploy/queues' team-b with 32 h100 GPUs: research can
lend only 16 of its teams' 32.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from policies.cluster_check import quota_warnings
from policies.guards import BudgetUse
from policies.queues import PolicySet
from policies.quota import QuotaTree
from scheduler.decide.tallies import QueueTally
from scheduler.model.demand import MILLI, gpus_of
from scheduler.model.resources import Resources, total


@dataclass(frozen=True, slots=True)
class PoolUsage:
    pool: str
    allocated: Resources  # allocated to the subtree's running gangs (this cycle's binds included)
    nominal: Resources  # the subtree's quota (covered resources; zeros dropped)
    covered: frozenset[str]  # resources quota governs in this pool
    #: GPU-equivalents (thousandths) the subtree holds here when some is a share of a device
    #: (``QueueTally.held``); None: it holds ``allocated``'s GPUs whole.
    held_milli: int | None = None

    @property
    def borrowed(self) -> Resources:
        """Covered usage above the quota: taken from idle quota of siblings."""
        return Resources({r: max(0, self.allocated[r] - self.nominal[r]) for r in self.covered})


@dataclass(frozen=True, slots=True)
class QueueReport:
    name: str
    parent: str | None
    pools: tuple[PoolUsage, ...]  # sorted by pool
    running: int  # gangs running in the subtree (admitted), this cycle's binds included
    admitted: int  # gangs bound by this cycle
    pending: int  # gangs waiting, whatever the reason (members missing and backoff too)
    fair_share: float
    usage_share: float
    borrowed_share: float  # decide's weighted dominant share of what the queue borrows
    #: The queue's own quotas that the cluster cannot honour (``policies.cluster_check``).
    warnings: tuple[str, ...] = ()
    #: Decayed GPU-hours borrowed (fair share with memory); None: memory is off.
    remembered_gpu_hours: float | None = None
    remembered_share: float = 0.0  # added to its rank while it borrows
    remembered_at: float | None = None  # when they were worked out (the plan's time)
    #: Its GPU-hour budget (``spec.guards.budget``) and what its subtree used of it this
    #: period; None: it has no budget.
    budget: BudgetUse | None = None

    @property
    def allocated_gpus(self) -> int:
        return sum(gpus_of(p.allocated) for p in self.pools)

    @property
    def nominal_gpus(self) -> int:
        return sum(gpus_of(p.nominal) for p in self.pools)


def queue_reports(tallies: Iterable[QueueTally], policies: PolicySet,
                  pending: Mapping[str, int] | None = None,
                  capacity: Mapping[str, Resources] | None = None, *,
                  remembered: Mapping[str, float] | None = None,
                  remembered_shares: Mapping[str, float] | None = None,
                  remembered_at: float | None = None,
                  budgets: Mapping[str, BudgetUse] | None = None) -> tuple[QueueReport, ...]:
    """One report per queue of *policies* (sorted by name), from a plan's queue tallies.

    *pending* counts every waiting gang per queue (the loop knows gangs the plan never
    considered: members missing, bind backoff); without it the plan's own counts are used.
    *capacity* (allocatable per pool with nodes) adds each queue's quota warnings.
    *remembered*: decayed GPU-seconds borrowed per queue as of *remembered_at*, with
    *remembered_shares* (None: memory is off). *budgets*: each budgeted queue's use of its
    GPU-hour budget (``scheduler.decide.guards.budgets``).
    """
    queues = policies.queues
    tree = QuotaTree.build(queues)
    by_name = {s.name: s for s in tallies}
    subtree: dict[str, list[str]] = {}
    for name in queues.queues:
        for ancestor in tree.paths[name]:
            subtree.setdefault(ancestor, []).append(name)
    usage: dict[str, tuple[PoolUsage, ...]] = {}
    for name in sorted(queues.queues):
        used: dict[str, list[Resources]] = {}
        held: dict[str, int] = {}  # pool -> thousandths a share makes less than whole
        for m in subtree.get(name, ()):
            tally = by_name.get(m)
            if tally is None:
                continue
            shares = dict(tally.held)
            for pool, res in tally.usage:
                used.setdefault(pool, []).append(res)
                if pool in shares:
                    held[pool] = held.get(pool, 0) + gpus_of(res) * MILLI - shares[pool]
        usage[name] = tuple(
            PoolUsage(pool, total(used.get(pool, ())),
                      Resources(tree.subtree_quota.get((name, pool), {})),
                      tree.covered_in(name, pool),
                      (gpus_of(total(used[pool])) * MILLI - held[pool]) if pool in held
                      else None)
            for pool in sorted(set(tree.pools_of(name)) | set(used)))
    out = []
    for name in sorted(queues.queues):
        members = [by_name[m] for m in subtree.get(name, ()) if m in by_name]
        pools = usage[name]
        own = by_name.get(name)
        out.append(QueueReport(
            name=name, parent=queues.parent_of(name), pools=pools,
            running=sum(s.running for s in members), admitted=sum(s.admitted for s in members),
            pending=sum(s.pending if pending is None else pending.get(s.name, 0)
                        for s in members),
            fair_share=_fair_share(policies, name),
            usage_share=_usage_share(tree, name, usage, subtree),
            borrowed_share=own.borrowed_share if own is not None else 0.0,
            warnings=() if capacity is None else quota_warnings(queues.queues[name], capacity),
            remembered_gpu_hours=(None if remembered is None
                                  else remembered.get(name, 0.0) / 3600.0),
            remembered_share=(remembered_shares or {}).get(name, 0.0),
            remembered_at=None if remembered is None else remembered_at,
            budget=(budgets or {}).get(name)))
    return tuple(out)


def _fair_share(policies: PolicySet, name: str) -> float:
    queues = policies.queues
    parent = queues.parent_of(name)
    if parent is None:
        return 1.0
    weights = sum(queues.queues[s].weight for s in queues.children_of(parent))
    return queues.queues[name].weight / weights if weights > 0 else 0.0


def _usage_share(tree: QuotaTree, name: str, usage: Mapping[str, tuple[PoolUsage, ...]],
                 subtree: Mapping[str, list[str]]) -> float:
    """The dominant share of what the parent's subtree has (see the module docstring)."""
    over = tree.queues.parent_of(name) or name
    shared = {p.pool: p.allocated for p in usage[over]}
    best = 0.0
    for p in usage[name]:
        quota = total(tree.nominal(m, p.pool) for m in subtree.get(over, ()))
        for r in p.covered:
            has = max(quota[r], shared.get(p.pool, Resources())[r])
            if has > 0:
                best = max(best, p.allocated[r] / has)
    return best
