"""What ``decide`` worked out in earlier cycles on the same nodes and may reuse: the recall.

Most of a cycle's input is the previous cycle's: the same queues, nearly the same usage, the
same pending gangs (the cluster cache hands ``decide`` the very same gang objects while they
are unchanged). The scheduler loop keeps one ``Recall`` for as long as the nodes stay the
same (the snapshot's ``NodeIndex``) and hands it to every ``decide``:

- ``tree``: the quota tree of the queue set in force (a queue set is one object until the
  policies change), and which of its queues are parents (they have no gangs);
- ``ledger``: the quota ledger of the last usage seen, brought up to date by charging only
  the usage that changed since (charges commute);
- ``admissible``: each pending gang's queue, or why it cannot be considered, and the pods
  the plan names for it, by gang object;
- ``shapes``: per roles object, its shape number, per-pool quota bounds and usable pools;
- ``hopeless``: per (shape number, topology constraint, queue), why a gang whose placement
  depends on its shape alone can never start (or None), under one queue set and one set of
  placement knobs: it reads only the nodes, the quota tree and the knobs (``trial.hopeless``),
  so it is asked once while they stay, not once a cycle;
- ``packing``: under the ``fragmentation`` packing policy, the policy set carrying the
  cycle's observed mix, the same object while the mix stays equal (``hopeless`` holds on).

Every entry is a pure function of the objects it is kept for, so ``decide`` with a fresh
recall (tests, benchmarks, the first cycle) decides exactly as with a warm one.

Why apart from the cycle's ``Memo`` and its slots: a recall outlives ``decide`` (the loop
keeps it while the node index stays), so what it keeps must stay right across cycles whose
snapshots, ledgers and gangs all differ; its entries are keyed by the long-lived objects
(queue set, gang and roles objects, the last usage) and refreshed incrementally. A memo slot
lives for one cycle and may key by anything of that cycle (a ledger, the obstacles), since
the whole store is dropped with it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from policies.admission import pool_bounds
from policies.queues import PolicySet, Queue, QueueSet
from policies.quota import QuotaLedger, QuotaTree
from scheduler.decide.housekeeping import members
from scheduler.decide.plan import Members, ReasonCategory
from scheduler.kit.memo import BOUND, LARGE, Last, kept_for
from scheduler.model import Gang, Role
from scheduler.model.resources import EMPTY, Resources
from scheduler.placement.gpu_shares import Mix
from scheduler.world.node_index import NodeIndex
from scheduler.world.snapshot import Snapshot

#: A gang's queue, or why the gang cannot be considered at all.
Admissible = Queue | tuple[ReasonCategory, str]
#: A gang, its queue (or why not) and the pods the plan names for it.
Judged = tuple[Gang, Admissible, Members]

#: Per-pool bounds as a hashable key.
BoundsKey = tuple[tuple[str, Resources], ...]

@dataclass(frozen=True, slots=True)
class Shape:
    """What a gang's roles amount to, whatever the gang is called."""

    #: Equal roles (names, counts, required counts, requirements, device GPUs), equal numbers.
    number: int
    bounds: Mapping[str, Resources]  # per pool, the most the gang could be charged there
    key: BoundsKey  # ``bounds`` as a key
    pools: frozenset[str]  # pools with a node some pod of the gang may use


class Recall:
    """See the module docstring."""

    __slots__ = ("_admissible", "_hopeless", "_ledger", "_numbers", "_packing", "_shapes", "_tree",
                 "index")

    def __init__(self, index: NodeIndex) -> None:
        self.index = index
        #: The queue set -> its tree and its parent queues.
        self._tree: Last[QueueSet, tuple[QuotaTree, frozenset[str]]] = Last()
        self._ledger: tuple[QuotaTree, Mapping[tuple[str, str], Resources], QuotaLedger] | None \
            = None
        #: The queue set -> gang id -> the gang judged under it.
        self._admissible: Last[QueueSet, dict[str, Judged]] = Last()
        #: Roles (by identity) -> (the roles, their shape); shape tuples -> numbers.
        self._shapes: dict[int, tuple[tuple[Role, ...], Shape]] = {}
        self._numbers: tuple[dict[tuple[object, ...], int], itertools.count[int]] = (
            {}, itertools.count())
        #: (the queue set, the placement knobs) it holds for, and the ``hopeless`` answers.
        self._hopeless: tuple[QueueSet, object, dict[Any, Any], dict[Any, Any]] | None = None
        #: (the policy set, the observed mix) -> the policy set placing under that mix.
        self._packing: tuple[PolicySet, Mix, PolicySet] | None = None

    def packing(self, policies: PolicySet, mix: Mix) -> PolicySet:
        """*policies* with ``fragmentation_mix`` set to *mix*: the same object again while
        *policies* is and *mix* is equal, so the tables kept per placement knobs (``hopeless``,
        compared by identity) hold across cycles whose mix did not change."""
        kept = self._packing
        if kept is not None and kept[0] is policies and kept[1] == mix:
            return kept[2]
        sp = policies.scheduler
        placed = replace(policies, scheduler=replace(
            sp, placement=replace(sp.placement, fragmentation_mix=mix)))
        self._packing = (policies, mix, placed)
        return placed

    def tree(self, queues: QueueSet) -> QuotaTree:
        """The quota tree of *queues*."""
        return self._tree.get(queues, _tree_of)[0]

    def parents(self, queues: QueueSet) -> frozenset[str]:
        """The queues of *queues* with children."""
        return self._tree.get(queues, _tree_of)[1]

    def hopeless(self, queues: QueueSet, params: object) -> tuple[dict[Any, Any], dict[Any, Any]]:
        """The tables of ``trial.hopeless`` answers that hold under *queues* and placement
        knobs *params* (both compared by identity: a new policy set starts new tables) on
        this recall's nodes: by (shape number, topology, queue), and by gang object (id ->
        the gang, its queue's name, the answer) for the gangs asked again cycle after cycle.
        Not slots: they outlive the cycle, emptied when the queue set or the knobs change
        and (one bounding policy) when full."""
        hit = self._hopeless
        if hit is None or hit[0] is not queues or hit[1] is not params:
            hit = self._hopeless = (queues, params, {}, {})
        by_shape, by_gang = hit[2], hit[3]
        if len(by_shape) >= BOUND:
            by_shape.clear()
        if len(by_gang) >= LARGE:
            by_gang.clear()
        return by_shape, by_gang

    def ledger(self, tree: QuotaTree, snapshot: Snapshot) -> QuotaLedger:
        """The running gangs charged to their queues (the snapshot's usage per queue and pool).

        A ledger depends only on the tree and the usage per (queue, pool), and charges
        commute, so the last ledger is brought up to date by charging what changed.
        Not a slot: an incremental update of one value from the last, not answers by key.
        """
        usage = snapshot.queue_usage
        hit = self._ledger
        if hit is not None and hit[0] is tree:
            _, before, ledger = hit
            if before is usage:
                return ledger
            for key in sorted(before.keys() | usage.keys()):
                old, new = before.get(key, EMPTY), usage.get(key, EMPTY)
                if old != new:
                    ledger = ledger.charge(key[0], key[1], new - old)
        else:
            ledger = QuotaLedger.empty(tree)
            for (queue, pool), res in sorted(usage.items()):
                ledger = ledger.charge(queue, pool, res)
        self._ledger = (tree, usage, ledger)
        return ledger

    def admissible(self, queues: QueueSet, gangs: Iterable[Gang],
                   judge: Callable[[Gang], Admissible]) -> list[Judged]:
        """``judge(gang)`` for each of *gangs*, with the gang's ``Members``, reusing both for
        the same gang objects under the same queue set (gangs no longer asked about are
        forgotten). Not a slot: pruned to this call's gangs each time (a working set),
        where a slot's table keeps every key until it is full."""
        before = self._admissible.peek(queues) or {}
        known: dict[str, Judged] = {}
        out = []
        for gang in gangs:
            hit = before.get(gang.id)
            if hit is None or hit[0] is not gang:
                hit = (gang, judge(gang), members(gang))
            known[gang.id] = hit
            out.append(hit)
        self._admissible.put(queues, known)
        return out

    def shape(self, gang: Gang, snapshot: Snapshot) -> Shape:
        """The shape of the gang's roles (worked out once per roles object).

        Asked on every gang's turn, millions of times in a simulation of a long backlog: a
        hit is read here, without making the closure ``kept_for`` would be handed."""
        roles = gang.roles
        hit = self._shapes.get(id(roles))
        if hit is not None and hit[0] is roles:
            return hit[1]
        return kept_for(self._shapes, id(gang.roles), gang.roles,
                        lambda roles: self._shape(gang, roles, snapshot), LARGE)

    def _shape(self, gang: Gang, roles: tuple[Role, ...], snapshot: Snapshot) -> Shape:
        numbers, counter = self._numbers
        if not self._shapes:
            # Emptied when full (or never filled): numbers are never reused, so a number
            # handed out before still means the same shape.
            numbers.clear()
        # Requirements name device claims by template, not what they count for in quota
        # (the namespace's templates and classes do): the count is part of the shape.
        key = tuple((r.name, r.count, r.min_count, r.requirements, r.device_gpus,
                     r.device_milli)
                    for r in roles)
        number = numbers.get(key)
        if number is None:
            number = numbers[key] = next(counter)
        bounds = pool_bounds(gang, snapshot)
        pools = frozenset(p for r in roles for p in snapshot.eligible_pools(r.requirements))
        return Shape(number, bounds, tuple(sorted(bounds.items())), pools)


def _tree_of(queues: QueueSet) -> tuple[QuotaTree, frozenset[str]]:
    tree = QuotaTree.build(queues)
    return tree, frozenset(p[-2] for p in tree.paths.values() if len(p) > 1)
