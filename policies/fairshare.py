"""Weighted dominant-resource fair share over the queue hierarchy, and the order of gangs.

Quota within a queue's nominal is guaranteed, so fairness only decides how what queues
*borrow* from their parent is divided. A queue's share is, over every pool and covered
resource, the largest fraction of its parent's lendable capacity that its subtree uses beyond
its own quota (the dominant resource), divided by its weight. Siblings with the lowest share
are the most under-served and go first.

Across the hierarchy two queues are compared where their paths split (as in Kueue's
hierarchical fair sharing): ``queue_key`` is the tuple of (share, name) from the top of the
tree down, so tuple comparison does exactly that.

With memory (``policies.usage_memory``), a queue whose share is above 0 at a level also
carries its *remembered share* there: what it borrowed in the past, decayed by a half-life,
on the same scale as its share. Without it (*remembered* empty) the keys are today's.
"""

from __future__ import annotations

from collections.abc import Mapping

from policies import interactive
from policies.queues import OrderingMode
from policies.quota import Key, QuotaLedger, QuotaTree
from scheduler.kit.memo import Slot, Slots
from scheduler.model import Gang

QueueKey = tuple[tuple[float, str], ...]
GangKey = tuple[int, float, float, int, str]


def borrowed_fraction(ledger: QuotaLedger, queue: str, pool: str, resource: str,
                      extra: int = 0) -> float:
    """Usage (plus *extra*) beyond the queue's subtree quota, as a fraction of what its
    parent can lend."""
    tree = ledger.tree
    path = tree.paths[queue]
    if len(path) < 2:
        return 0.0
    parent_capacity = tree.subtree_quota[(path[-2], pool)].get(resource, 0)
    if parent_capacity <= 0:
        return 0.0
    used = ledger.total.get((queue, pool), {}).get(resource, 0) + extra
    own = tree.subtree_quota[(queue, pool)].get(resource, 0)
    return max(0, used - own) / parent_capacity


def dominant_share(ledger: QuotaLedger, queue: str, pool_extra: str | None = None,
                   extra: Mapping[str, int] | None = None) -> float:
    """The queue's weighted dominant share (0 for a root: it borrows from nobody).

    With *extra* (amounts in pool *pool_extra*), the share the queue would have with that
    much more in use.
    """
    tree = ledger.tree
    best = 0.0
    root = tree.paths[queue][0]
    for pool in tree.pools_of(queue):
        add = extra if extra is not None and pool == pool_extra else None
        for resource in tree.covered[(root, pool)]:
            more = add.get(resource, 0) if add else 0
            best = max(best, borrowed_fraction(ledger, queue, pool, resource, more))
    return best / tree.queues.queues[queue].weight


#: Queues are ranked by their share with this fraction of their head gang added: 0 ranks by
#: current usage (big gangs of a light queue overshoot its share), 1 by usage after admission
#: (they undershoot). Half way makes the long-run share match the weights.
HEAD_FRACTION = 0.5


#: No memory: every remembered share is 0.
NO_MEMORY: Mapping[str, float] = {}


def queue_key(ledger: QuotaLedger, queue: str,
              head: Mapping[str, Mapping[str, int]] | None = None,
              remembered: Mapping[str, float] = NO_MEMORY) -> QueueKey:
    """Sort key of a queue (lower goes first): (share, name) from the top of its path down.

    *head* is the next gang's charge per pool it may use; the key is the best (lowest) over
    those pools of the shares with ``HEAD_FRACTION`` of it added. A root queue borrows from
    nobody: its key is a share of 0 under its own name. *remembered*: each queue's
    remembered share (``usage_memory.shares``), added where the share is above 0: a queue
    that stays within its guarantee ranks 0 whatever it used before.
    """
    path = ledger.tree.paths[queue]
    if len(path) < 2:
        return ((0.0, queue),)
    options: list[tuple[str | None, dict[str, int] | None]] = [(None, None)]
    if head:
        open_pools = set(ledger.tree.pools_of(queue))
        options = [(pool, {r: int(v * HEAD_FRACTION) for r, v in req.items()})
                   for pool, req in head.items() if pool in open_pools] or options
    if not remembered:
        return min(tuple((dominant_share(ledger, name, pool, extra), name)
                         for name in path[1:]) for pool, extra in options)
    return min(tuple((_with_memory(dominant_share(ledger, name, pool, extra),
                                   remembered.get(name, 0.0)), name) for name in path[1:])
               for pool, extra in options)


def _with_memory(share: float, remembered: float) -> float:
    """The share a queue is ranked by: its current share plus its remembered share, when it
    borrows at all (``usage_memory``)."""
    return share + remembered if share > 0 else share


def reads(tree: QuotaTree, queue: str) -> tuple[Key, ...]:
    """The ledger entries (``QuotaLedger.total``) that ``queue_key`` of *queue* depends on,
    besides the tree: every queue of its path below the root, in every pool of its tree."""
    path = tree.paths[queue]
    pools = tree.pools_of(queue)
    return tuple((name, pool) for name in path[1:] for pool in pools)


#: (queue, head's bounds key) -> the tree, the ledger entries the rank was worked out from
#: and their values (a ledger's unchanged entries stay the same objects when it is charged),
#: the rank, and the ledger it was last found for (a ledger is a value: charging makes a new
#: one, so while the ledger is the same object, nothing it reads changed).
RANKS: Slot[tuple[str, object], tuple[QuotaTree, tuple[Key, ...], tuple[object, ...],
                                      QueueKey, QuotaLedger]] = Slot("fairshare.rank")


def rank(slots: Slots, ledger: QuotaLedger, queue: str, key: object,
         head: Mapping[str, Mapping[str, int]],
         remembered: Mapping[str, float] = NO_MEMORY) -> QueueKey:
    """``queue_key`` of *queue* with *head* next (*key*: its bounds as a key), again while
    the ledger entries it reads are the same objects. A slot, but checked before use: the
    ledger is not in its key (it changes with every admission), the entries it read are.
    (*remembered* is one value for a whole cycle, and the slots live for one cycle.)"""
    tree, totals = ledger.tree, ledger.total
    hit = slots.table(RANKS).get((queue, key))
    if hit is not None and hit[0] is tree:
        _, read, seen, found, last = hit
        if last is ledger:  # asked again before any admission (most turns of a backlog)
            return found
        for k, v in zip(read, seen, strict=True):
            if totals.get(k) is not v:
                break
        else:
            slots.put(RANKS, (queue, key), (tree, read, seen, found, ledger))
            return found
    read = reads(tree, queue)
    found = queue_key(ledger, queue, head, remembered)
    slots.put(RANKS, (queue, key), (tree, read, tuple(totals.get(k) for k in read), found,
                                    ledger))
    return found


def gang_key(gang: Gang, mode: OrderingMode) -> GangKey:
    """Order inside a queue: interactive gangs before batch ones (``policies.interactive``:
    someone waits at them), then priority (higher first), then age (older first; of equal
    ages, the one the scheduler saw first: ``Gang.arrival``), then uid.
    Under FIFO the queues play no part, so interactive gangs go first overall; the tier is
    the one thing FIFO does not flatten, as a notebook must not wait behind a day's batch
    backlog."""
    tier = interactive.ORDER[gang.interactive]  # interactive.order_key, without the call
    if mode is OrderingMode.FIFO:
        return (tier, 0.0, gang.creation_time, gang.arrival, gang.uid)
    return (tier, float(-gang.priority), gang.creation_time, gang.arrival, gang.uid)
