"""Hierarchical quota: what each queue may still take in each pool, lending and borrowing.

The model follows Kueue's hierarchical cohorts, restated per (queue, pool, resource):

- ``subtree quota`` = own nominal + what the children can lend (their subtree quota, capped
  by their ``lendingLimit``); ``guaranteed`` = subtree quota - what the queue lends upwards;
- ``stored usage`` of a queue = its own gangs' usage + the part of each child's stored usage
  above that child's guaranteed amount (the part the child took from its parent);
- ``available`` = the unused part of its guarantee + what its parent can still give, capped by
  the ``borrowingLimit``; at a root, subtree quota minus stored usage.

Only resources named in some ``nominal`` of the tree for the pool are governed ("covered");
a tree without any quota for a pool may not use that pool. The ledger is immutable: charging
returns a new ledger, so trying a set of preemption victims never needs undoing.

Quota set aside for a reserved gang (``hold``) is charged like usage, so it limits everyone
the same way, but the ledger remembers who holds it: a pending message can then say "16 held
for reserved gang ns/big" instead of counting it as usage (or a negative availability).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from policies.queues import QueueSet
from scheduler.model.resources import Resources

Key = tuple[str, str]  # (queue, pool)
Amounts = Mapping[str, int]


@dataclass(frozen=True, slots=True)
class QuotaTree:
    """The static part: per (queue, pool) quotas derived once from the queue set."""

    queues: QueueSet
    paths: Mapping[str, tuple[str, ...]]  # root first
    covered: Mapping[Key, frozenset[str]]  # keyed by (root, pool)
    subtree_quota: Mapping[Key, Amounts]
    guaranteed: Mapping[Key, Amounts]
    pools_by_root: Mapping[str, tuple[str, ...]]

    @classmethod
    def build(cls, queues: QueueSet) -> QuotaTree:
        paths = {q.name: queues.path_of(q.name) for q in queues}
        covered: dict[Key, set[str]] = {}
        for q in queues:
            root = paths[q.name][0]
            for quota in q.quotas:
                covered.setdefault((root, quota.pool), set()).update(quota.covered)
        pools_by_root: dict[str, list[str]] = {}
        for root, pool in sorted(covered):
            pools_by_root.setdefault(root, []).append(pool)
        subtree: dict[Key, dict[str, int]] = {}
        guaranteed: dict[Key, dict[str, int]] = {}
        children: dict[str, list[str]] = {}
        for name, path in sorted(paths.items()):
            if len(path) > 1:
                children.setdefault(path[-2], []).append(name)
        # Deepest queues first, so children are done before their parent.
        for name in sorted(paths, key=lambda n: (-len(paths[n]), n)):
            queue = queues.queues[name]
            root = paths[name][0]
            for pool in pools_by_root.get(root, ()):
                pq = queue.quota(pool)
                amounts = {r: pq.nominal[r] if pq else 0 for r in covered[(root, pool)]}
                for child in children.get(name, ()):
                    for r, v in subtree[(child, pool)].items():
                        amounts[r] += v - guaranteed[(child, pool)][r]
                subtree[(name, pool)] = amounts
                if len(paths[name]) == 1:  # a root lends to nobody
                    guaranteed[(name, pool)] = dict(amounts)
                    continue
                lend = pq.lending_limit if pq else None
                g: dict[str, int] = {}
                for r, v in amounts.items():
                    cap = lend.limit(r) if lend else None
                    g[r] = v - (v if cap is None else min(v, cap))
                guaranteed[(name, pool)] = g
        return cls(queues, paths, {k: frozenset(v) for k, v in covered.items()}, subtree,
                   guaranteed, {k: tuple(v) for k, v in pools_by_root.items()})

    def pools_of(self, queue: str) -> tuple[str, ...]:
        """Pools the queue's tree has quota in (the only pools it may use)."""
        path = self.paths.get(queue)
        return self.pools_by_root.get(path[0], ()) if path else ()

    def covered_in(self, queue: str, pool: str) -> frozenset[str]:
        return self.covered.get((self.paths[queue][0], pool), frozenset())

    def nominal(self, queue: str, pool: str) -> Resources:
        pq = self.queues.queues[queue].quota(pool)
        return pq.nominal if pq else Resources()


#: Who holds quota without using it: (reserved gang, its queue, the covered amounts held).
Hold = tuple[str, str, Resources]

_NO_HOLDS: Mapping[Key, tuple[Hold, ...]] = MappingProxyType({})


@dataclass(frozen=True, slots=True, eq=False)
class QuotaLedger:
    """Usage charged to queues, per pool; ``charge`` returns a new ledger.

    Compared (and hashed) by identity: a ledger only changes by replacement, so "the same
    ledger" is one object, and answers worked out against it can be kept by it."""

    tree: QuotaTree
    stored: Mapping[Key, Amounts]  # own usage + children's usage above their guarantee
    total: Mapping[Key, Amounts]  # all usage in the subtree (for fair share and the tallies)
    #: Holds recorded under every queue on the holder's path (see ``held``); they are part
    #: of ``stored`` and ``total`` already.
    holds: Mapping[Key, tuple[Hold, ...]] = field(default_factory=lambda: _NO_HOLDS)

    @classmethod
    def empty(cls, tree: QuotaTree) -> QuotaLedger:
        return cls(tree, {}, {})

    def usage(self, queue: str, pool: str) -> Resources:
        """Everything the queue's subtree uses in *pool* (covered resources only)."""
        return Resources(self.total.get((queue, pool), {}))

    def charge(self, queue: str, pool: str, amounts: Mapping[str, int],
               sign: int = 1) -> QuotaLedger:
        """Add (or with ``sign=-1`` remove) usage of a gang of *queue* in *pool*."""
        path = self.tree.paths.get(queue)
        if path is None:
            return self  # gangs of unknown queues are charged to nobody
        covered = self.tree.covered.get((path[0], pool))
        if not covered:
            return self
        delta = {r: sign * v for r, v in amounts.items() if r in covered and v}
        if not delta:
            return self
        stored = dict(self.stored)
        total = dict(self.total)
        for name in path:
            key = (name, pool)
            total[key] = _plus(total.get(key, {}), delta)
        for depth in range(len(path) - 1, -1, -1):
            key = (path[depth], pool)
            old = stored.get(key, {})
            new = _plus(old, delta)
            stored[key] = new
            if depth == 0:
                break
            g = self.tree.guaranteed[key]
            delta = {r: max(0, new.get(r, 0) - g.get(r, 0)) - max(0, old.get(r, 0) - g.get(r, 0))
                     for r in delta}
            delta = {r: v for r, v in delta.items() if v}
            if not delta:
                break
        return QuotaLedger(self.tree, stored, total, self.holds)

    def hold(self, queue: str, pool: str, amounts: Mapping[str, int],
             holder: str) -> QuotaLedger:
        """``charge``, remembering that *holder* (a reserved gang of *queue*) holds it."""
        charged = self.charge(queue, pool, amounts)
        if charged is self:
            return self
        covered = self.tree.covered[(self.tree.paths[queue][0], pool)]
        record = (holder, queue, Resources({r: v for r, v in amounts.items()
                                            if r in covered and v}))
        holds = dict(self.holds)
        for name in self.tree.paths[queue]:
            holds[(name, pool)] = (*holds.get((name, pool), ()), record)
        return replace(charged, holds=holds)

    def held(self, queue: str, pool: str) -> tuple[Hold, ...]:
        """Holds of gangs of the queue's subtree in *pool*, in the order they were made."""
        return self.holds.get((queue, pool), ())

    def available(self, queue: str, pool: str) -> dict[str, int]:
        """What the queue may still take in *pool*, per covered resource.

        Never below 0: quota held for a reservation, or a nomination's charge, may take a
        queue (or its cohort) past what it may use, and then it may take nothing; how far
        past is for ``usage`` and ``held`` to tell, not a negative availability.
        """
        path = self.tree.paths[queue]
        covered = self.tree.covered.get((path[0], pool), frozenset())
        out: dict[str, int] = {}
        for r in covered:
            avail = 0
            for depth, name in enumerate(path):
                key = (name, pool)
                quota = self.tree.subtree_quota[key].get(r, 0)
                used = self.stored.get(key, {}).get(r, 0)
                if depth == 0:
                    avail = quota - used
                    continue
                g = self.tree.guaranteed[key].get(r, 0)
                from_parent = avail
                pq = self.tree.queues.queues[name].quota(pool)
                limit = pq.borrowing_limit.limit(r) if pq else None
                if limit is not None:
                    from_parent = min(from_parent, (quota - g) - max(0, used - g) + limit)
                avail = max(0, g - used) + from_parent
            out[r] = max(0, avail)
        return out

    def shortfall(self, queue: str, pool: str, request: Mapping[str, int]) -> Resources:
        """How much of *request* exceeds what the queue may take in *pool* (empty: it fits)."""
        avail = self.available(queue, pool)
        return Resources({r: v - avail[r] for r, v in request.items()
                          if r in avail and v > avail[r]})

    def borrowing(self, queue: str, pool: str) -> bool:
        """Is the queue's subtree using more than its own quota in *pool*?

        Quota held for a reserved gang is not usage here: a hold may take its queue past its
        quota (that is what keeps the quota free for the reserved gang), but the queue's
        running gangs borrow nothing more for it, so a hold alone must not make them
        reclaimable by other queues (which then evict them, and they reclaim back).
        """
        used = self.total.get((queue, pool), {})
        quota = self.tree.subtree_quota.get((queue, pool), {})
        holds = self.holds.get((queue, pool), ())
        if holds:
            used = dict(used)
            for _, _, amounts in holds:
                for r, v in amounts.items():
                    used[r] = used.get(r, 0) - v
        return any(v > quota.get(r, 0) for r, v in used.items())


def _plus(a: Amounts, b: Amounts) -> dict[str, int]:
    out = dict(a)
    for r, v in b.items():
        out[r] = out.get(r, 0) + v
    return out
