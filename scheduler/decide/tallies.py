"""Per-queue tallies after a plan: a pure function of the cycle's input and its plan.

What each queue uses per pool and how many gangs it runs once the plan's binds are in,
how many it admitted and how many wait, and its *borrowed share*: the weighted dominant
share of what it borrows beyond its quota (``fairshare.dominant_share``, the figure the
cycle orders queues by; 0 within quota), with the plan's binds and nominations charged.

Worked out only when someone reads it (the metrics and the Queue status of the live
scheduler): a simulated cycle nobody reports on does not pay for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from policies import fairshare
from policies.admission import charge_all, placement_charges
from policies.queues import PolicySet
from scheduler.decide.plan import CyclePlan
from scheduler.decide.recall import Recall
from scheduler.model import Gang
from scheduler.model.demand import MILLI, gpus_of
from scheduler.model.resources import Resources
from scheduler.world.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class QueueTally:
    """What one queue counts after a plan: usage, gangs running, admitted and pending, and its
    borrowed share (the Kubernetes ``status`` of its Queue is written from its report)."""

    name: str
    usage: tuple[tuple[str, Resources], ...]  # per pool, after the plan's binds
    running: int  # gangs running, including the plan's binds
    admitted: int  # gangs bound by the plan
    pending: int  # gangs the plan left pending
    borrowed_share: float  # weighted dominant share of what the queue borrows (0: within quota)
    #: Per pool where a share of a device is held, the GPU-equivalents (thousandths) held
    #: there (``RunningGang.held_milli``): less than ``usage``'s GPUs, which quota charges
    #: whole. Pools without a share are absent (they hold their usage's GPUs whole).
    held: tuple[tuple[str, int], ...] = ()


def queue_tallies(snapshot: Snapshot, gangs: Iterable[Gang], policies: PolicySet,
                   plan: CyclePlan, recall: Recall | None = None) -> tuple[QueueTally, ...]:
    """The tally of every queue of *policies* after *plan*, decided on *snapshot* for
    *gangs* (the pending gangs of the cycle; *recall*: the one ``decide`` had, if any)."""
    if recall is None or recall.index is not snapshot.index:
        recall = Recall(snapshot.index)
    by_id = {g.id: g for g in gangs}
    ledger = recall.ledger(recall.tree(policies.queues), snapshot)
    after = snapshot
    for b in plan.binds:
        gang = by_id[b.gang_id]
        after = after.with_running(b.placement.as_running(gang, plan.now))
        ledger = charge_all(ledger, b.queue, placement_charges(gang, b.placement, snapshot))
    for n in plan.nominations:
        if n.placement is not None:
            gang = by_id[n.gang_id]
            ledger = charge_all(ledger, gang.queue,
                                placement_charges(gang, n.placement, snapshot))
    usage: dict[str, list[tuple[str, Resources]]] = {}
    for (queue, pool), res in sorted(after.queue_usage.items()):
        usage.setdefault(queue, []).append((pool, res))
    running = after.running_per_queue
    admitted: dict[str, int] = {}
    for b in plan.binds:
        admitted[b.queue] = admitted.get(b.queue, 0) + 1
    waiting: dict[str, int] = {}
    for g in by_id.values():
        if g.id in plan.pending:
            waiting[g.queue] = waiting.get(g.queue, 0) + 1
    not_held = _charged_not_held(after)
    return tuple(QueueTally(
        name=name, usage=tuple(usage.get(name, ())), running=running.get(name, 0),
        admitted=admitted.get(name, 0), pending=waiting.get(name, 0),
        borrowed_share=fairshare.dominant_share(ledger, name),
        held=tuple((pool, gpus_of(res) * MILLI - not_held[(name, pool)])
                   for pool, res in usage.get(name, ()) if (name, pool) in not_held))
        for name in policies.queues.queues)


def _charged_not_held(snapshot: Snapshot) -> dict[tuple[str, str], int]:
    """Per (queue, pool), the thousandths of a GPU quota charges running gangs but they do
    not hold (``RunningGang.held_milli``: a node's shares are charged rounded up to whole
    GPUs); absent: none."""
    out: dict[tuple[str, str], int] = {}
    nodes = snapshot.nodes
    for rg in snapshot.running.values():
        held = rg.held_milli
        if not held:
            continue
        for where, res in rg.charges:
            less = gpus_of(res) * MILLI - held.get(where, gpus_of(res) * MILLI)
            if less > 0 and where in nodes:
                key = (rg.gang.queue, nodes[where].pool)
                out[key] = out.get(key, 0) + less
    return out
