"""Who may preempt whom: the candidate rules, kept apart from the search for a victim set.

A running gang is a candidate victim of a pending gang only when the policy says so:

- same queue: the preemptor's queue has ``withinQueue: LowerPriority`` and the victim has a
  lower priority;
- another queue under the same top-level queue (reclaim): the preemptor's queue has
  ``reclaimFromOthers`` other than ``Never`` (``LowerPriority`` also needs a lower priority),
  the preemptor's queue stays within its own quota with the gang admitted (it takes back what
  it lent, it does not borrow by force), and the victim's side of the tree is borrowing;
- always: the victim has run at least its queue's ``minRuntimeSeconds``, is not already
  being evicted, and is not the preemptor's own already-running part;
- never an interactive gang for a batch preemptor, and an interactive preemptor ranks above
  every batch gang where a lower priority is asked for (``policies.interactive``);
- never for a preemptor whose pods have ``preemptionPolicy: Never`` (Kubernetes' non-
  preempting priority classes): its priority orders it, it evicts nobody;
- by reclaim from a semi-preemptible queue, only what runs above that queue's quota: a gang
  whose minimum the queue's quota shields offers only its members above the minimum, and
  one at its minimum is no victim (``policies.semi``).

``could_preempt_back`` is the same rule the other way round, checked on the state after the
preemption; a victim that could at once preempt its preemptor is never chosen (no loops).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from policies import interactive, semi
from policies.admission import charge_all
from policies.fit import Applicant
from policies.queues import Queue, QueueSet, ReclaimPolicy, WithinQueuePreemption
from policies.quota import QuotaLedger
from scheduler.kit.memo import Slot, Slots
from scheduler.model import Gang, RunningGang
from scheduler.model.release import Release
from scheduler.model.resources import Resources
from scheduler.world.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Candidate:
    """What preempting a running gang would release, and why the policy allows it."""

    release: Release  # the whole gang, so far
    queue: str
    cost: float  # GPU-seconds of work lost (``Release.work_at_risk``)
    why: str  # for the eviction message

    @property
    def id(self) -> str:
        return self.release.id

    @property
    def running(self) -> RunningGang:
        return self.release.running


def ledger_without(ledger: QuotaLedger, releases: list[Release],
                   snapshot: Snapshot) -> QuotaLedger:
    """*ledger* with what *releases* free released."""
    for r in releases:
        ledger = charge_all(ledger, r.running.gang.queue, snapshot.pool_release(r), sign=-1)
    return ledger


def borrowing_below(ledger: QuotaLedger, victim_queue: str, other_queue: str,
                    pool: str) -> bool:
    """Is any queue on the victim's path, below where it meets *other_queue*, borrowing?"""
    vpath, opath = ledger.tree.paths[victim_queue], ledger.tree.paths[other_queue]
    shared = 0
    while shared < min(len(vpath), len(opath)) and vpath[shared] == opath[shared]:
        shared += 1
    return any(ledger.borrowing(name, pool) for name in vpath[shared:])


def within_quota_pools(ledger: QuotaLedger, queue: str,
                       bounds: Mapping[str, Resources]) -> frozenset[str]:
    """Pools where the queue's subtree stays within its own quota with the gang charged."""
    tree = ledger.tree
    out = set()
    for pool, request in bounds.items():
        if pool not in tree.pools_of(queue):
            continue
        used = ledger.total.get((queue, pool), {})
        quota = tree.subtree_quota[(queue, pool)]
        if all(used.get(r, 0) + request.get(r, 0) <= quota.get(r, 0) for r in quota):
            out.add(pool)
    return frozenset(out)


def victim_reason(gang: Gang, queue: Queue, rg: RunningGang, victim_queue: Queue,
                  ledger: QuotaLedger, snapshot: Snapshot,
                  reclaim_pools: frozenset[str], shield: semi.Shield | None = None) -> str | None:
    """Why *rg* may be preempted for *gang* (None: it may not), ignoring time and state.

    The one place the tier enters the candidate rules (``policies.interactive``): a batch
    gang never takes an interactive one, and "lower priority" means "ranked lower", where
    an interactive gang ranks above every batch gang. *shield*: the victim queue's, when it
    is semi-preemptible (``policies.semi``): reclaim leaves a shielded gang at its minimum
    alone (what it may take of the others is ``semi.reclaimable``)."""
    if interactive.shielded(rg.gang, gang):
        return None
    lower = interactive.outranks(gang, rg.gang)
    if victim_queue.name == queue.name:
        if queue.preemption.within_queue is WithinQueuePreemption.LOWER_PRIORITY and lower:
            return interactive.victim_why(rg.gang, gang, queue.name)
        return None
    reclaim = queue.preemption.reclaim_from_others
    if reclaim is ReclaimPolicy.NEVER or (reclaim is ReclaimPolicy.LOWER_PRIORITY and not lower):
        return None
    paths = ledger.tree.paths
    if not reclaim_pools or paths[victim_queue.name][0] != paths[queue.name][0]:
        return None
    if shield is not None and semi.reclaimable(rg, shield) is None:
        return None
    for pool in snapshot.pool_usage(rg):
        if pool in reclaim_pools and borrowing_below(ledger, victim_queue.name, queue.name,
                                                     pool):
            if shield is not None:
                return semi.why_reclaimed(rg, shield, pool, queue.name)
            return (f"queue {victim_queue.name} borrows quota in pool {pool} that queue "
                    f"{queue.name} reclaims")
    return None


def running_by_queue(snapshot: Snapshot) -> dict[str, list[RunningGang]]:
    """Running gangs grouped by queue, each group sorted by id (an index for ``candidates``)."""
    out: dict[str, list[RunningGang]] = {}
    for rg in snapshot.running.values():
        out.setdefault(rg.gang.queue, []).append(rg)
    return out


def candidates(applicant: Applicant, snapshot: Snapshot, ledger: QuotaLedger,
               queues: QueueSet, now: float, untouchable: frozenset[str],
               by_queue: Mapping[str, list[RunningGang]] | None = None) -> list[Candidate]:
    """Every running gang the policy lets the applicant preempt, sorted by id.

    *untouchable*: gangs being evicted or bound this cycle. *by_queue*:
    ``running_by_queue(snapshot)``, when the caller has it already.
    """
    if not applicant.gang.may_preempt:
        return []  # preemptionPolicy Never
    return without(scan(applicant, snapshot, ledger, queues, now, untouchable, by_queue),
                   applicant.gang)


#: (ledger, queue, priority, tier, bounds, number untouchable) -> ``scan``.
SCANS: Slot[tuple[object, ...], list[Candidate]] = Slot("preemption.scan")
#: ``running_by_queue`` of the first snapshot searched (the running gangs are the same all
#: cycle: those leaving are untouchable).
BY_QUEUE: Slot[None, dict[str, list[RunningGang]]] = Slot("preemption.running_by_queue")


def candidates_in(slots: Slots, applicant: Applicant, snapshot: Snapshot, ledger: QuotaLedger,
                  queues: QueueSet, now: float, untouchable: frozenset[str]) -> list[Candidate]:
    """``candidates``, scanned once per ledger, queue, priority and bounds in *slots* while
    the untouchable gangs stay the same."""
    gang = applicant.gang
    if not gang.may_preempt:
        return []
    key = (ledger, applicant.queue.name, gang.priority, gang.tier,
           tuple(applicant.bounds.items()), len(untouchable))
    found = slots.table(SCANS).get(key)
    if found is None:
        by_queue = slots.get_or_make(BY_QUEUE, None, lambda: running_by_queue(snapshot))
        found = slots.put(SCANS, key, scan(applicant, snapshot, ledger, queues, now,
                                           untouchable, by_queue))
    return without(found, gang)


def without(found: list[Candidate], gang: Gang) -> list[Candidate]:
    """*found* without the gang's own running part (a gang is never its own victim)."""
    return [c for c in found if c.id != gang.id]


def scan(applicant: Applicant, snapshot: Snapshot, ledger: QuotaLedger, queues: QueueSet,
         now: float, untouchable: frozenset[str],
         by_queue: Mapping[str, list[RunningGang]] | None = None) -> list[Candidate]:
    """``candidates``, the gang's own running part included: the same for every gang of the
    queue, priority and bounds (so one scan may serve them all).

    Only the queues the rules could pick from are scanned: its own (``withinQueue``) and,
    when it may reclaim at all, the other queues of its tree.
    """
    out = []
    for rg, vq, why, release in _eligible(applicant, snapshot, ledger, queues, untouchable,
                                          by_queue):
        if now - rg.start_time >= vq.preemption.min_runtime_seconds:
            out.append(Candidate(release, vq.name, release.work_at_risk(now), why))
    out.sort(key=lambda c: c.id)
    return out


def protected_until(applicant: Applicant, snapshot: Snapshot, ledger: QuotaLedger,
                    queues: QueueSet, now: float,
                    untouchable: frozenset[str]) -> dict[str, float]:
    """Running gangs the rules let the applicant preempt, with the time their queue's
    ``minRuntimeSeconds`` protection ends: the quota they borrow (or the nodes they run on) is
    reclaimable then, which an estimated start must count on. Those unprotected already are
    not counted: counted as released now, they promised a start *now* to gangs the victim
    search of the same cycle could not start (the reservation then took the victims' nodes
    rather than nodes that do free up). Empty for a gang that may not preempt."""
    if not applicant.gang.may_preempt:
        return {}
    return {rg.id: rg.start_time + vq.preemption.min_runtime_seconds
            for rg, vq, _, _ in _eligible(applicant, snapshot, ledger, queues, untouchable)
            if now - rg.start_time < vq.preemption.min_runtime_seconds
            and rg.id != applicant.gang.id}


def _eligible(applicant: Applicant, snapshot: Snapshot, ledger: QuotaLedger, queues: QueueSet,
              untouchable: frozenset[str],
              by_queue: Mapping[str, list[RunningGang]] | None = None,
              ) -> Iterator[tuple[RunningGang, Queue, str, Release]]:
    """Running gangs the rules let the applicant preempt whatever their runtime so far,
    with their queue, why, and what of them it may take (the whole gang, but of a gang of
    another, semi-preemptible queue only what runs above that queue's quota)."""
    gang, queue = applicant.gang, applicant.queue
    reclaim_pools = within_quota_pools(ledger, queue.name, applicant.bounds)
    names: list[str] = []
    if queue.preemption.within_queue is WithinQueuePreemption.LOWER_PRIORITY:
        names.append(queue.name)
    if queue.preemption.reclaim_from_others is not ReclaimPolicy.NEVER and reclaim_pools:
        paths = ledger.tree.paths
        root = paths[queue.name][0]
        names.extend(n for n in paths if n != queue.name and paths[n][0] == root)
    if not names:
        return
    if by_queue is None:
        by_queue = running_by_queue(snapshot)
    for name in names:
        vq = queues.queues[name]
        running = by_queue.get(name, ())
        shield = (semi.shield_of(vq, running, ledger.tree, snapshot)
                  if name != queue.name else None)
        for rg in running:
            if rg.id in untouchable or rg.id not in snapshot.running:
                continue
            why = victim_reason(gang, queue, rg, vq, ledger, snapshot, reclaim_pools, shield)
            if why is not None:
                yield rg, vq, why, semi.reclaimable(rg, shield) or Release.whole(rg)


def could_preempt_back(victim: Candidate, gang: Gang, queue: Queue,
                       charges: Mapping[str, Resources], ledger_after: QuotaLedger,
                       queues: QueueSet, snapshot: Snapshot) -> bool:
    """Would the victim, pending again, be allowed to preempt *gang* once it runs?

    *ledger_after* is the quota state with the victims gone and *gang* charged *charges*.
    """
    vq = queues.get(victim.queue)
    if vq is None or interactive.shielded(gang, victim.running.gang):
        return False
    higher = interactive.outranks(victim.running.gang, gang)
    if vq.name == queue.name:
        return vq.preemption.within_queue is WithinQueuePreemption.LOWER_PRIORITY and higher
    reclaim = vq.preemption.reclaim_from_others
    if reclaim is ReclaimPolicy.NEVER or (reclaim is ReclaimPolicy.LOWER_PRIORITY
                                          and not higher):
        return False
    if queues.root_of(vq.name) != queues.root_of(queue.name):
        return False
    back = within_quota_pools(ledger_after, vq.name, snapshot.pool_usage(victim.running))
    return any(pool in back and borrowing_below(ledger_after, queue.name, vq.name, pool)
               for pool in charges)
