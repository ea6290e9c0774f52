"""One gang at a time: admission -> placement -> preemption -> reservation -> a reason.

``CycleState`` is the working memory of a single ``decide`` call: the snapshot with this
cycle's binds assumed, the quota ledger, nodes held by nominations and the reservation, and
the plan being built. It is created and dropped inside ``decide``, so ``decide`` stays pure.
The order in which gangs come here is ``cycle``'s business.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from policies import fairshare
from policies.admission import (
    QuotaVerdict,
    admissible_pools,
    charge_all,
    check_charges,
    describe_never,
    placement_charges,
    pool_bounds,
    pool_nodes,
    required_only,
)
from policies.preemption import Candidate, running_by_queue
from policies.queues import PolicySet, Queue, QueueingStrategy
from policies.quota import QuotaLedger
from policies.reservation import (
    Reservation,
    ReservationRequest,
    backfill_params,
    ends_before,
    reserve,
)
from policies.victims import Preemption, VictimSearch
from scheduler.model import Gang, RunningGang
from scheduler.placement.types import (
    Placement,
    PlacementParams,
    PlacementResult,
    Unplaceable,
    UnplaceableReason,
)
from scheduler.plan import Bind, Eviction, Nomination, PendingReason, ReasonCategory, map_pods
from scheduler.resources import Resources
from scheduler.snapshot import Snapshot

Solver = Callable[[Gang, Snapshot, PlacementParams], PlacementResult]
BoundsKey = tuple[tuple[str, Resources], ...]
QueueKey = fairshare.QueueKey


@dataclass(slots=True)
class _Memo:
    """Caches that live for one cycle; each entry says what it is keyed by."""

    pool_nodes: dict[tuple[str, ...], frozenset[str]] = field(default_factory=dict)
    all_pools: frozenset[str] | None = None
    parents: frozenset[str] | None = None  # queues with children
    bounds: dict[str, tuple[dict[str, Resources], BoundsKey]] = field(
        default_factory=dict)  # by gang id
    verdicts: dict[tuple[object, ...], tuple[QuotaLedger, QuotaVerdict]] = field(
        default_factory=dict)  # by ledger, queue and bounds
    queue_keys: dict[tuple[object, ...], tuple[QuotaLedger, QueueKey]] = field(
        default_factory=dict)  # by ledger, queue and the head's bounds
    charges: dict[str, dict[str, Resources]] = field(default_factory=dict)  # by running gang
    by_queue: dict[str, list[RunningGang]] | None = None  # running at the cycle's start
    candidates: dict[tuple[object, ...], tuple[QuotaLedger, list[Candidate]]] = field(
        default_factory=dict)
    usable: dict[tuple[object, ...], tuple[Snapshot, frozenset[str], int]] = field(
        default_factory=dict)
    ever: dict[tuple[object, ...], QuotaVerdict] = field(default_factory=dict)
    held: tuple[QuotaLedger, Reservation, QuotaLedger] | None = None  # ledger, by, held
    base: tuple[int, PlacementParams] | None = None  # by the size of the held node set
    restricted: tuple[PlacementParams, Reservation, PlacementParams] | None = None


@dataclass(slots=True)
class CycleState:
    snapshot: Snapshot
    ledger: QuotaLedger
    policies: PolicySet
    now: float
    solve: Solver
    held: set[str] = field(default_factory=set)  # nodes held by nominations
    terminating: set[str] = field(default_factory=set)  # victims already being evicted
    reservation: Reservation | None = None
    blocked_by: str | None = None  # with backfill off: the gang everything waits behind
    blocked_queues: dict[str, str] = field(default_factory=dict)  # StrictFIFO queue -> head
    binds: list[Bind] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    nominations: list[Nomination] = field(default_factory=list)
    pending: dict[str, PendingReason] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    memo: _Memo = field(default_factory=lambda: _Memo())

    def _base_params(self) -> PlacementParams:
        """The policy's placement knobs with the nominated nodes excluded (reused while the
        held set, which only grows within a cycle, keeps its size)."""
        memo = self.memo
        if memo.base is None or memo.base[0] != len(self.held):
            policy = self.policies.scheduler.placement
            memo.base = (len(self.held), replace(
                policy, excluded_nodes=policy.excluded_nodes | frozenset(self.held)))
        return memo.base[1]

    def _backfill_params(self, runtime: float | None, base: PlacementParams) -> PlacementParams:
        """``backfill_params``, building the restricted params once per reservation."""
        r = self.reservation
        if r is None or ends_before(r, runtime, self.now):
            return base
        hit = self.memo.restricted
        if hit is None or hit[0] is not base or hit[1] is not r:
            hit = self.memo.restricted = (base, r, backfill_params(r, runtime, self.now, base))
        return hit[2]

    def _held_ledger(self) -> QuotaLedger:
        """The ledger with the reservation's quota set aside (one object while unchanged)."""
        r = self.reservation
        if r is None:
            return self.ledger
        held = self.memo.held
        if held is None or held[0] is not self.ledger or held[1] is not r:
            held = self.memo.held = (self.ledger, r, r.hold(self.ledger))
        return held[2]

    def _ever_admissible(self, gang: Gang, queue: Queue) -> QuotaVerdict:
        """Would quota admit the gang with every queue idle? (memoised per queue and size)"""
        bounds, bkey = self._bounds(gang)
        key = (queue.name, bkey)
        hit = self.memo.ever.get(key)
        if hit is None:
            empty = QuotaLedger.empty(self.ledger.tree)
            hit = self.memo.ever[key] = admissible_pools(gang, queue, empty, bounds,
                                                         explain=False)
        return hit

    def bounds_of(self, gang: Gang) -> dict[str, Resources]:
        """The gang's upper-bound quota charge per pool (cached: eligibility is static)."""
        return self._bounds(gang)[0]

    def _bounds(self, gang: Gang) -> tuple[dict[str, Resources], BoundsKey]:
        hit = self.memo.bounds.get(gang.id)
        if hit is None:
            bounds = pool_bounds(gang, self.snapshot)
            hit = self.memo.bounds[gang.id] = (bounds, tuple(sorted(bounds.items())))
        return hit

    def admission(self, gang: Gang, queue: Queue, ledger: QuotaLedger) -> QuotaVerdict:
        """``admissible_pools``, shared by gangs of one queue and size while the ledger is
        unchanged (a backlog of similar gangs is checked, and explained, once)."""
        bounds, bkey = self._bounds(gang)
        key = (id(ledger), queue.name, bkey)
        hit = self.memo.verdicts.get(key)
        if hit is None or hit[0] is not ledger:
            hit = self.memo.verdicts[key] = (ledger, admissible_pools(gang, queue, ledger,
                                                                      bounds))
        return hit[1]

    def queue_key(self, queue: str, head: Gang) -> QueueKey:
        """The fair-share rank of *queue* with *head* next (memoised like ``admission``)."""
        bounds, bkey = self._bounds(head)
        key = (id(self.ledger), queue, bkey)
        hit = self.memo.queue_keys.get(key)
        if hit is None or hit[0] is not self.ledger:
            hit = self.memo.queue_keys[key] = (self.ledger, fairshare.queue_key(
                self.ledger, queue, bounds))
        return hit[1]

    # Outcomes ----------------------------------------------------------------------------
    def wait(self, gang: Gang, category: ReasonCategory, message: str,
             ordered: bool = True) -> None:
        self.pending[gang.id] = PendingReason(category, message,
                                              len(self.order) if ordered else 0)

    def bind(self, gang: Gang, queue: Queue, placement: Placement,
             charges: Mapping[str, Resources]) -> None:
        runtime = queue.runtime_of(gang.runtime_estimate)
        running = RunningGang(gang=gang, allocations=placement.allocations(gang),
                              start_time=self.now,
                              expected_end=None if runtime is None else self.now + runtime)
        self.snapshot = self.snapshot.with_running(running)
        self.ledger = charge_all(self.ledger, queue.name, charges)
        self.binds.append(Bind(gang.id, queue.name, placement, map_pods(gang, placement)))

    def nominate(self, gang: Gang, queue: Queue, pre: Preemption) -> None:
        victims = tuple(v.id for v in pre.victims)
        for v in pre.victims:
            self.evictions.append(Eviction(v.id, gang.id, f"preempted by {gang.id} (priority "
                                           f"{gang.priority}): {v.why}"))
        nodes = pre.placement.nodes
        self.nominations.append(Nomination(gang.id, nodes, victims, self.now, pre.placement))
        self.held.update(nodes)
        self.terminating.update(victims)
        self.ledger = charge_all(self.ledger, queue.name, pre.charges)
        self.wait(gang, ReasonCategory.PREEMPTION_PENDING,
                  f"evicting {len(victims)} gang(s) ({', '.join(victims)}) to start on "
                  f"{', '.join(nodes)}; it binds once they are gone")

    # The decision for one gang -----------------------------------------------------------
    def consider(self, gang: Gang, queue: Queue) -> None:
        self.order.append(gang.id)
        sp = self.policies.scheduler
        if self._held_back(gang, queue):
            return
        base = self._base_params()
        # Backfill: unless it ends before the reservation starts, a gang may use neither the
        # reserved nodes nor the reserved quota.
        runtime = queue.runtime_of(gang.runtime_estimate)
        params = self._backfill_params(runtime, base)
        restricted = params is not base
        ledger = self._held_ledger() if restricted else self.ledger
        bounds = self.bounds_of(gang)
        verdict = self.admission(gang, queue, ledger)
        quota_problem: str | None = None
        failure: Unplaceable | None = None
        if verdict.admitted or not bounds:  # no usable pool at all: placement says why
            params = self._restrict(params, verdict.pools) if bounds else params
            result = self.solve(gang, self.snapshot, params)
            if isinstance(result, Placement):
                charges = placement_charges(gang, result, self.snapshot)
                quota_problem = check_charges(queue, ledger, charges)
                if quota_problem is not None:  # optional members beyond the quota: drop them
                    result = required_only(gang, result)
                    charges = placement_charges(gang, result, self.snapshot)
                    quota_problem = check_charges(queue, ledger, charges)
                if quota_problem is None:
                    self.bind(gang, queue, result, charges)
                    return
            else:
                failure = result
        else:
            quota_problem = verdict.message
        if sp.preemption and (quota_problem is not None
                              or (failure is not None and failure.preemption_may_help)):
            # Gangs being evicted or bound this cycle are not candidates.
            untouchable = frozenset(self.terminating) | {b.gang_id for b in self.binds}
            memo = self.memo
            if memo.by_queue is None:
                memo.by_queue = running_by_queue(self.snapshot)
            search = VictimSearch(gang, queue, self.snapshot, ledger, self.policies.queues,
                                  bounds, params, self.now, self.solve, untouchable,
                                  memo.charges, memo.by_queue, memo.candidates, memo.usable)
            pre = search.run()
            if pre is not None:
                self.nominate(gang, queue, pre)
                return
        if queue.queueing.strategy is QueueingStrategy.STRICT_FIFO:
            self.blocked_queues.setdefault(queue.name, gang.id)
        self._fail(gang, queue, quota_problem, failure, base, restricted)

    def _fail(self, gang: Gang, queue: Queue, quota_problem: str | None,
              failure: Unplaceable | None, base: PlacementParams, restricted: bool) -> None:
        """A reason for a gang that cannot start now; maybe the cycle's reservation."""
        sp = self.policies.scheduler
        bounds = self.bounds_of(gang)
        if quota_problem is not None or failure is None:
            category, message = ReasonCategory.QUOTA, quota_problem or "quota"
            if not self._ever_admissible(gang, queue).admitted:
                empty = QuotaLedger.empty(self.ledger.tree)
                self.wait(gang, category, describe_never(queue.name, bounds, empty))
                return
        else:
            category = (ReasonCategory.TOPOLOGY if failure.reason is UnplaceableReason.TOPOLOGY
                        else ReasonCategory.PLACEMENT)
            message = failure.message
            if failure.reason not in (UnplaceableReason.INSUFFICIENT_CAPACITY,
                                      UnplaceableReason.TOPOLOGY):
                self.wait(gang, category, message)
                return
        if not sp.backfill and self.blocked_by is None:
            self.blocked_by = gang.id
        r = self.reservation
        if r is not None and restricted:
            self.wait(gang, ReasonCategory.QUEUED,
                      f"{message}; the nodes and quota reserved for {r.gang_id} (estimated "
                      f"start in {r.estimated_start - self.now:.0f}s) are not usable by a gang "
                      "that would still run then")
            return
        if r is None and sp.reservation:
            request = ReservationRequest(gang, queue, self.snapshot, self.ledger, bounds, base)
            found = reserve(request, self.policies.queues, self.now, self.solve)
            if found is not None:
                self.reservation = found
                self.wait(gang, ReasonCategory.RESERVED,
                          f"{message}; reserved {len(found.nodes)} node(s) and its quota, "
                          f"estimated start in {found.estimated_start - self.now:.0f}s when "
                          "running gangs are expected to end")
                return
        self.wait(gang, category, message)

    def _held_back(self, gang: Gang, queue: Queue) -> bool:
        """Strict ordering rules that stop a gang before it is even tried."""
        if self.blocked_by is not None:
            self.wait(gang, ReasonCategory.QUEUED,
                      f"waits behind {self.blocked_by}, which does not fit yet (backfill is off)")
            return True
        head = self.blocked_queues.get(queue.name)
        if head is not None:
            self.wait(gang, ReasonCategory.QUEUED,
                      f"queue {queue.name} is StrictFIFO and its head {head} cannot start yet")
            return True
        if self.reservation is not None and not queue.queueing.backfill:
            self.wait(gang, ReasonCategory.QUEUED,
                      f"queue {queue.name} does not backfill; waits behind the reservation "
                      f"of {self.reservation.gang_id}")
            return True
        return False

    def _restrict(self, params: PlacementParams, pools: tuple[str, ...]) -> PlacementParams:
        """Limit placement to nodes of the pools quota admits (no limit if that is all)."""
        memo = self.memo
        if memo.all_pools is None:
            memo.all_pools = frozenset(self.snapshot.pools())
        if frozenset(pools) == memo.all_pools:
            return params
        if pools not in memo.pool_nodes:
            memo.pool_nodes[pools] = pool_nodes(self.snapshot, pools)
        allowed = memo.pool_nodes[pools]
        if params.allowed_nodes is not None:
            allowed = allowed & params.allowed_nodes
        return replace(params, allowed_nodes=allowed)
