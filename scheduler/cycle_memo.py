"""Caches for ``decide``, so a backlog of similar gangs costs little.

Within a cycle most gangs are tried against the same quota ledger (it only changes when a
gang is admitted), and many share a queue and a shape. Answers keyed by the ledger's
identity (the memo holds the ledger, so the identity cannot be reused) are therefore shared:
admission verdicts, fair-share ranks, preemption candidates; and a gang shaped exactly like
one that already failed against the very same state gets that gang's reason
(``failure_key``). ``CycleMemo`` lives for one ``decide`` call.

What depends only on a gang's (immutable) roles and the nodes, its shape number and per-pool
bounds, is kept across cycles by the ``Recall``. Memoising a pure function keeps ``decide``
pure: the same inputs still give the same plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from policies import fairshare
from policies.admission import QuotaVerdict, admissible_pools
from policies.preemption import Candidate
from policies.queues import Queue
from policies.quota import QuotaLedger
from policies.reservation import Reservation, backfill_params
from scheduler.model import Gang, RunningGang
from scheduler.placement.types import PlacementParams
from scheduler.plan import ReasonCategory
from scheduler.recall import BoundsKey, Recall
from scheduler.resources import Resources
from scheduler.snapshot import Snapshot


class Epochal(Protocol):
    """What the failure memo reads of ``CycleState``."""

    snapshot: Snapshot
    ledger: QuotaLedger
    reservations: tuple[Reservation, ...]
    blocked_by: str | None
    blocked_queues: dict[str, str]
    held: set[str]
    terminating: set[str]
    claims: dict[str, frozenset[str]]

    def _epoch(self) -> tuple[object, ...]: ...


@dataclass(slots=True)
class CycleMemo:
    """Each cache says what it is keyed by."""

    recall: Recall
    all_pools: frozenset[str] | None = None
    parents: frozenset[str] | None = None  # queues with children
    verdicts: dict[tuple[object, ...], tuple[QuotaLedger, QuotaVerdict]] = field(
        default_factory=dict)  # by ledger, queue and bounds
    ever: dict[tuple[object, ...], QuotaVerdict] = field(default_factory=dict)  # queue, bounds
    queue_keys: dict[tuple[object, ...], tuple[QuotaLedger, fairshare.QueueKey]] = field(
        default_factory=dict)  # by ledger, queue and the head's bounds
    by_queue: dict[str, list[RunningGang]] | None = None  # running at the cycle's start
    candidates: dict[tuple[object, ...], tuple[QuotaLedger, list[Candidate]]] = field(
        default_factory=dict)  # see preemption.candidates
    usable: dict[tuple[object, ...], tuple[Snapshot, frozenset[str], int]] = field(
        default_factory=dict)  # see victims.VictimSearch
    #: Ledgers with reservations' quota held, by the ledger and the reservations' ids.
    held: dict[tuple[int, ...], tuple[QuotaLedger, tuple[Reservation, ...], QuotaLedger]] = \
        field(default_factory=dict)
    base: tuple[int, PlacementParams] | None = None  # by the size of the held node set
    #: Backfill params, by the reservations' ids, for the base params in ``restricted_for``.
    restricted: dict[tuple[int, ...], tuple[tuple[Reservation, ...], PlacementParams]] = \
        field(default_factory=dict)
    restricted_for: PlacementParams | None = None
    #: Reasons of gangs that failed, by queue and gang shape, valid for one state epoch.
    failures: dict[tuple[object, ...], tuple[ReasonCategory, str]] = field(
        default_factory=dict)
    epoch: tuple[object, ...] = ()

    def same_epoch(self, state: Epochal) -> bool:
        """Is the state (``CycleState._epoch``) the one the failure memo holds answers for?
        Objects by identity, the held-back gang's id and the sizes by value."""
        m = self.epoch
        return (bool(m) and m[0] is state.snapshot and m[1] is state.ledger
                and m[2] is state.reservations and m[3] == state.blocked_by
                and m[4] == len(state.blocked_queues) and m[5] == len(state.held)
                and m[6] == len(state.terminating) and m[7] == len(state.claims))

    def failure_key(self, state: Epochal, gang: Gang, queue: Queue,
                    restricting: tuple[Reservation, ...],
                    may_reserve: bool = True) -> tuple[object, ...] | None:
        """The failure memo's key for *gang* (starting a new epoch if the state changed), or
        None when the gang's outcome may depend on more than its shape: a gang with members
        already running is not a candidate victim of itself, unlike one of the same shape.
        The reservations the gang must keep off (*restricting*) are part of the key: gangs of
        one shape may differ in runtime, so in which reservations they end before, and in age,
        so in whether they may reserve (*may_reserve*, see ``reservation.starving``)."""
        snapshot = state.snapshot
        if gang.id in snapshot.running:
            return None
        if not self.same_epoch(state):
            self.failures.clear()
            self.epoch = state._epoch()
        return (queue.name, gang.priority, gang.preemption_policy, gang.topology,
                tuple(r.gang_id for r in restricting), may_reserve,
                self.recall.shape(gang, snapshot).number)

    def bounds_of(self, gang: Gang, snapshot: Snapshot) -> tuple[Mapping[str, Resources],
                                                                  BoundsKey]:
        """The gang's upper-bound quota charge per pool (shared: not to be changed), and a
        hashable key of it."""
        shape = self.recall.shape(gang, snapshot)
        return shape.bounds, shape.key

    def admission(self, gang: Gang, queue: Queue, ledger: QuotaLedger,
                  snapshot: Snapshot) -> QuotaVerdict:
        """``admissible_pools``, checked (and explained) once per queue, size and ledger."""
        b, bkey = self.bounds_of(gang, snapshot)
        key = (id(ledger), queue.name, bkey)
        hit = self.verdicts.get(key)
        if hit is None or hit[0] is not ledger:
            hit = self.verdicts[key] = (ledger, admissible_pools(gang, queue, ledger, b))
        return hit[1]

    def ever_admissible(self, gang: Gang, queue: Queue, ledger: QuotaLedger,
                        snapshot: Snapshot) -> bool:
        """Would quota admit the gang with every queue idle?"""
        b, bkey = self.bounds_of(gang, snapshot)
        key = (queue.name, bkey)
        hit = self.ever.get(key)
        if hit is None:
            empty = QuotaLedger.empty(ledger.tree)
            hit = self.ever[key] = admissible_pools(gang, queue, empty, b, explain=False)
        return hit.admitted

    def queue_key(self, ledger: QuotaLedger, queue: str, head: Gang,
                  snapshot: Snapshot) -> fairshare.QueueKey:
        """The fair-share rank of *queue* with *head* next."""
        b, bkey = self.bounds_of(head, snapshot)
        key = (id(ledger), queue, bkey)
        hit = self.queue_keys.get(key)
        if hit is None or hit[0] is not ledger:
            hit = self.queue_keys[key] = (ledger, fairshare.queue_key(ledger, queue, b))
        return hit[1]

    def base_params(self, policy: PlacementParams, held: set[str]) -> PlacementParams:
        """The policy's placement knobs with the nominated nodes excluded (reused while the
        held set, which only grows within a cycle, keeps its size)."""
        if self.base is None or self.base[0] != len(held):
            self.base = (len(held), replace(
                policy, excluded_nodes=policy.excluded_nodes | frozenset(held)))
        return self.base[1]

    def pools_of(self, gang: Gang, snapshot: Snapshot) -> frozenset[str]:
        """Pools with a node some pod of the gang may use (which reservations concern it)."""
        return self.recall.shape(gang, snapshot).pools

    def backfill_params(self, restricting: tuple[Reservation, ...],
                        base: PlacementParams) -> PlacementParams:
        """``reservation.backfill_params``, built once per set of reservations (and base)."""
        if not restricting:
            return base
        if self.restricted_for is not base:
            self.restricted.clear()
            self.restricted_for = base
        key = tuple(id(r) for r in restricting)
        hit = self.restricted.get(key)
        if hit is None:  # the value keeps the reservations alive, so their ids stay theirs
            hit = self.restricted[key] = (restricting, backfill_params(restricting, base))
        return hit[1]

    def held_ledger(self, ledger: QuotaLedger,
                    restricting: tuple[Reservation, ...]) -> QuotaLedger:
        """*ledger* with the reservations' quota set aside (one object while unchanged)."""
        if not restricting:
            return ledger
        key = (id(ledger), *(id(r) for r in restricting))
        hit = self.held.get(key)
        if hit is None or hit[0] is not ledger:
            if len(self.held) > 64:
                self.held.clear()  # the ledger changes with every admission
            held = ledger
            for r in restricting:
                held = r.hold(held)
            hit = self.held[key] = (ledger, restricting, held)
        return hit[2]

    def nodes_in(self, pools: tuple[str, ...], snapshot: Snapshot) -> frozenset[str]:
        """The nodes of *pools* (sorted names), computed once per cycle and pool set."""
        return snapshot.nodes_in(pools)

    def restrict(self, params: PlacementParams, pools: tuple[str, ...],
                 snapshot: Snapshot) -> PlacementParams:
        """Limit placement to nodes of the pools quota admits (no limit if that is all)."""
        if self.all_pools is None:
            self.all_pools = frozenset(snapshot.pools())
        if frozenset(pools) == self.all_pools:
            return params
        allowed = self.nodes_in(pools, snapshot)
        if params.allowed_nodes is not None:
            allowed = allowed & params.allowed_nodes
        return replace(params, allowed_nodes=allowed)
