"""Weighted dominant-resource fair share over the queue hierarchy, and the order of gangs.

Quota within a queue's nominal is guaranteed, so fairness only decides how what queues
*borrow* from their parent is divided. A queue's share is, over every pool and covered
resource, the largest fraction of its parent's lendable capacity that its subtree uses beyond
its own quota (the dominant resource), divided by its weight. Siblings with the lowest share
are the most under-served and go first.

Across the hierarchy two queues are compared where their paths split (as in Kueue's
hierarchical fair sharing): ``queue_key`` is the tuple of (share, name) from the top of the
tree down, so tuple comparison does exactly that.
"""

from __future__ import annotations

from collections.abc import Mapping

from policies.queues import OrderingMode
from policies.quota import QuotaLedger
from scheduler.model import Gang

QueueKey = tuple[tuple[float, str], ...]
GangKey = tuple[float, float, str]


def borrowed_fraction(ledger: QuotaLedger, queue: str, pool: str, resource: str) -> float:
    """Usage beyond the queue's subtree quota, as a fraction of what its parent can lend."""
    tree = ledger.tree
    path = tree.paths[queue]
    if len(path) < 2:
        return 0.0
    parent_capacity = tree.subtree_quota[(path[-2], pool)].get(resource, 0)
    if parent_capacity <= 0:
        return 0.0
    used = ledger.total.get((queue, pool), {}).get(resource, 0)
    own = tree.subtree_quota[(queue, pool)].get(resource, 0)
    return max(0, used - own) / parent_capacity


def dominant_share(ledger: QuotaLedger, queue: str) -> float:
    """The queue's weighted dominant share (0 for a root: it borrows from nobody)."""
    tree = ledger.tree
    best = 0.0
    root = tree.paths[queue][0]
    for pool in tree.pools_of(queue):
        for resource in tree.covered[(root, pool)]:
            best = max(best, borrowed_fraction(ledger, queue, pool, resource))
    return best / tree.queues.queues[queue].weight


def queue_keys(ledger: QuotaLedger, queues: list[str]) -> Mapping[str, QueueKey]:
    """Sort keys of queues (lower goes first), computing each ancestor's share once.

    A root queue borrows from nobody: its key is a share of 0 under its own name.
    """
    shares: dict[str, float] = {}
    keys: dict[str, QueueKey] = {}
    for queue in queues:
        path = ledger.tree.paths[queue]
        parts: list[tuple[float, str]] = []
        for name in path[1:]:
            if name not in shares:
                shares[name] = dominant_share(ledger, name)
            parts.append((shares[name], name))
        keys[queue] = tuple(parts) if parts else ((0.0, queue),)
    return keys


def gang_key(gang: Gang, mode: OrderingMode) -> GangKey:
    """Order inside a queue: priority (higher first), then age (older first), then uid."""
    if mode is OrderingMode.FIFO:
        return (0.0, gang.creation_time, gang.uid)
    return (float(-gang.priority), gang.creation_time, gang.uid)
