"""Semi-preemptible queues (``spec.preemption.semiPreemptible``, as in Run:ai and KAI): the
part of a gang within its queue's quota is safe from reclaim, the part above it may be taken
back.

Why a rule over what runs, not a mark made at admission: the decision core keeps no state
between cycles, and a mark would have to survive a restart and a quota change. So each scan
works out which gangs are *shielded* from what runs now:

- a gang's **minimum** is its members up to its minimum (an elastic gang's
  ``gangscheduler.io/min-member`` or PodGroup ``minMember``: its lowest ranks, the ones a
  shrink keeps, ``scheduler.model.elastic.surplus``); a gang that is not elastic is its own
  minimum;
- the queue's gangs are taken earliest started first (then by id, for determinism) and a
  gang is shielded when its minimum still fits, with the minimums shielded before it, within
  the queue's quota (its subtree quota per pool and covered resource: the same amount
  ``QuotaLedger.borrowing`` compares with). Earliest first, because those started when the
  quota was theirs; a later gang whose minimum no longer fits runs on borrowed quota whole.

What reclaim by another queue may then take (``reclaimable``): from a shielded elastic gang
only its members above the minimum (highest rank first, by the shrink that the victim search
tries before whole gangs, ``policies.shrink``); a shielded gang at its minimum nothing; an
unshielded gang, whole, as without the field. Since the shielded minimums fit within the
quota, a queue that borrows always has something unshielded to give back: reclaim never has
to touch a shielded minimum. Admission is unchanged: any gang may borrow as before; the field
only says which part of what runs is at risk. Preemption within the queue (priority) is
unchanged too: the shield is against other queues taking back what they lent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from policies.queues import Queue
from policies.quota import QuotaLedger, QuotaTree
from scheduler.model import PodRef, RunningGang
from scheduler.model.elastic import rank_key, surplus
from scheduler.model.release import Release
from scheduler.model.resources import Resources
from scheduler.world.snapshot import Snapshot

FIELD = "spec.preemption.semiPreemptible"


@dataclass(frozen=True, slots=True)
class Shield:
    """The running gangs of one semi-preemptible queue whose minimum is within its quota."""

    queue: str
    shielded: frozenset[str]

    def covers(self, rg: RunningGang) -> bool:
        return rg.id in self.shielded


def minimum_usage(rg: RunningGang, snapshot: Snapshot) -> Mapping[str, Resources]:
    """What the gang's minimum is charged per pool (the whole gang's charge when it is not
    elastic or has no member to spare)."""
    whole = snapshot.pool_usage(rg)
    spare = surplus(rg)
    if not spare:
        return whole
    freed = snapshot.pool_release(Release.of_pods(rg, spare))
    return {pool: used - freed.get(pool, Resources()) for pool, used in whole.items()}


def shield_of(queue: Queue, running: Iterable[RunningGang], tree: QuotaTree,
              snapshot: Snapshot) -> Shield | None:
    """The queue's shield (None when the queue is not semi-preemptible): its gangs,
    earliest started first, whose minimum fits within its quota with those before it."""
    if not queue.preemption.semi_preemptible:
        return None
    quota = tree.subtree_quota
    used: dict[tuple[str, str], int] = {}  # (pool, resource) -> kept minimums' charge
    shielded = set()
    for rg in sorted(running, key=lambda g: (g.start_time, g.id)):
        need = minimum_usage(rg, snapshot)
        adds = {(pool, r): v for pool, res in need.items()
                for r in tree.covered_in(queue.name, pool) if (v := res.get(r, 0))}
        if all(used.get(k, 0) + v <= quota.get((queue.name, k[0]), {}).get(k[1], 0)
               for k, v in adds.items()):
            shielded.add(rg.id)
            for k, v in adds.items():
                used[k] = used.get(k, 0) + v
    return Shield(queue.name, frozenset(shielded))


def reclaimable(rg: RunningGang, shield: Shield | None) -> Release | None:
    """What reclaim by another queue may take of *rg*: the whole gang without a shield or
    when the shield does not cover it; of a shielded gang only its members above the
    minimum (None: it is at its minimum, nothing may be taken)."""
    if shield is None or not shield.covers(rg):
        return Release.whole(rg)
    spare = surplus(rg)
    return Release.of_pods(rg, spare) if spare else None


def describe_members(pods: Iterable[PodRef]) -> str:
    """"el-4..el-7" for a run of consecutive ranks, else the names in rank order."""
    ordered = sorted(pods, key=rank_key)
    names = [p.name for p in ordered]
    if len(names) > 2:
        first, last = rank_key(ordered[0]), rank_key(ordered[-1])
        if (len(first) == len(last) >= 2 and first[:-2] == last[:-2]
                and isinstance(first[-2], int) and isinstance(last[-2], int)
                and last[-2] - first[-2] == len(names) - 1):
            return f"{names[0]}..{names[-1]}"
    return ", ".join(names)


def why_reclaimed(rg: RunningGang, shield: Shield, pool: str, reclaimer: str) -> str:
    """The eviction's reason when the victim's queue is semi-preemptible."""
    if shield.covers(rg):
        return (f"queue {shield.queue} is semi-preemptible ({FIELD}): these members run "
                f"above its quota in pool {pool}, which queue {reclaimer} reclaims; the "
                f"gang's minimum runs within the quota and is kept")
    return (f"queue {shield.queue} borrows quota in pool {pool} that queue {reclaimer} "
            f"reclaims; the gang's minimum does not fit within the quota beside the gangs "
            f"started before it, so {FIELD} does not keep it")


def at_risk(queue: Queue, rg: RunningGang, snapshot: Snapshot,
            tree: QuotaTree) -> Release | None:
    """What reclaim by another queue could take of *rg* (running in *snapshot*) by the rule
    of *queue*, a semi-preemptible queue (None: nothing, it runs at a kept minimum)."""
    mates = [g for g in snapshot.running.values() if g.gang.queue == queue.name]
    return reclaimable(rg, shield_of(queue, mates, tree, snapshot))


def describe_at_risk(queue: Queue, rg: RunningGang, snapshot: Snapshot,
                     ledger: QuotaLedger) -> str:
    """What a bind into a semi-preemptible queue adds to its message (*snapshot* and *ledger*
    with the gang bound): "; members el-4..el-7 run above team-a's quota and may be taken
    back" when the queue borrows in a pool the gang uses; "" otherwise, and for any other
    queue (a message only, so the work can say where it stands)."""
    if not queue.preemption.semi_preemptible or not any(
            ledger.borrowing(queue.name, pool) for pool in snapshot.pool_usage(rg)):
        return ""
    release = at_risk(queue, rg, snapshot, ledger.tree)
    if release is None:
        return ""
    if release.is_whole:
        return (f"; its minimum does not fit within {queue.name}'s quota beside the gangs "
                f"started before it: the whole gang runs on borrowed quota and may be taken "
                f"back ({FIELD})")
    return (f"; members {describe_members(release.pods)} run above {queue.name}'s quota "
            f"and may be taken back ({FIELD})")


def describe_standing(queue: Queue, rg: RunningGang, snapshot: Snapshot,
                      tree: QuotaTree) -> str:
    """Where a running gang of a semi-preemptible queue stands against reclaim, for
    ``explain`` ("" for a queue without the field)."""
    if not queue.preemption.semi_preemptible:
        return ""
    release = at_risk(queue, rg, snapshot, tree)
    if release is None:
        return (f"its minimum runs within {queue.name}'s quota: other queues' reclaim never "
                f"takes it ({FIELD})")
    if release.is_whole:
        return (f"its minimum does not fit within {queue.name}'s quota beside the gangs "
                f"started before it: while {queue.name} borrows, reclaim may take the whole "
                f"gang ({FIELD})")
    return (f"its minimum runs within {queue.name}'s quota and is kept; members "
            f"{describe_members(release.pods)} above it may be taken back while "
            f"{queue.name} borrows ({FIELD})")


def describe_shielding(ledger: QuotaLedger, queue: str, pool: str) -> str:
    """What a queue waiting for its lent quota is told about the semi-preemptible queues of
    its tree that borrow in *pool*: reclaim gives back only what runs above their quota
    ("" when there is none)."""
    tree = ledger.tree
    root = tree.paths[queue][0]
    names = [q.name for q in tree.queues if q.preemption.semi_preemptible
             and q.name != queue and tree.paths[q.name][0] == root
             and ledger.borrowing(q.name, pool)]
    if not names:
        return ""
    one = len(names) == 1
    return (f"; {'queue' if one else 'queues'} {', '.join(names)} "
            f"{'is' if one else 'are'} semi-preemptible ({FIELD}): reclaim takes back only "
            f"what runs above {'its' if one else 'their'} quota, never a gang's minimum "
            f"within it")
