"""One gang at a time: admission -> placement -> preemption -> reservation -> a reason.

``CycleState`` is the working memory of a single ``decide`` call: the snapshot with this
cycle's binds assumed, the quota ledger, nodes held by nominations and the reservations (at
most one per node pool), and the plan being built. It is created and dropped inside
``decide``, so ``decide`` stays pure.
The order in which gangs come here is ``cycle``'s business.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from policies import fairshare
from policies.admission import (
    admissible_pools,
    charge_all,
    check_charges,
    describe_never,
    placement_charges,
    required_only,
)
from policies.preemption import ledger_without, running_by_queue
from policies.queues import PolicySet, Queue, QueueingStrategy
from policies.quota import QuotaLedger
from policies.reservation import (
    Reservation,
    ReservationRequest,
    relevant,
    reserve,
    restricting,
    starving,
)
from policies.victims import Preemption, VictimSearch
from scheduler.cycle_memo import CycleMemo
from scheduler.model import Gang, RunningGang
from scheduler.model.pods import PreemptionPolicy
from scheduler.placement.types import (
    Placement,
    PlacementParams,
    Solver,
    Unplaceable,
    UnplaceableReason,
)
from scheduler.plan import Bind, Eviction, Nomination, PendingReason, ReasonCategory, map_pods
from scheduler.resources import Resources
from scheduler.snapshot import Snapshot

#: ``placement.solve`` or a stand-in. Its answer may depend on a gang's roles and topology,
#: never on its name or id (beyond naming the result): a gang shaped like one that already
#: failed against the same state is given that gang's reason without another solve.


@dataclass(slots=True)
class CycleState:
    snapshot: Snapshot
    ledger: QuotaLedger
    policies: PolicySet
    now: float
    solve: Solver
    held: set[str] = field(default_factory=set)  # nodes held by nominations
    terminating: set[str] = field(default_factory=set)  # victims already being evicted
    #: Running gangs whose pods are terminating and that no nomination waits for yet: a
    #: pending gang that fits once they are gone waits for them instead of evicting more.
    draining: list[str] = field(default_factory=list)
    #: Pools pairwise disjoint: a gang reserves only where no reservation concerns it.
    reservations: tuple[Reservation, ...] = ()
    #: Pools of the previous plan's reservations whose gangs are yet to be reconsidered
    #: this cycle (see ``cycle._carry_over``); nobody else reserves there meanwhile.
    claims: dict[str, frozenset[str]] = field(default_factory=dict)
    blocked_by: str | None = None  # with backfill off: the gang everything waits behind
    blocked_queues: dict[str, str] = field(default_factory=dict)  # StrictFIFO queue -> head
    binds: list[Bind] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    nominations: list[Nomination] = field(default_factory=list)
    pending: dict[str, PendingReason] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    memo: CycleMemo = field(kw_only=True)

    def bounds_of(self, gang: Gang) -> Mapping[str, Resources]:
        """The gang's upper-bound quota charge per pool."""
        return self.memo.bounds_of(gang, self.snapshot)[0]

    def queue_key(self, queue: str, head: Gang) -> fairshare.QueueKey:
        return self.memo.queue_key(self.ledger, queue, head, self.snapshot)

    # Outcomes ----------------------------------------------------------------------------
    def wait(self, gang: Gang, category: ReasonCategory, message: str,
             ordered: bool = True) -> None:
        self.pending[gang.id] = PendingReason(category, message,
                                              len(self.order) if ordered else 0)

    def bind(self, gang: Gang, queue: Queue, placement: Placement,
             charges: Mapping[str, Resources],
             allocations: tuple[tuple[str, Resources], ...] | None = None) -> None:
        runtime = queue.runtime_of(gang.runtime_estimate)
        running = RunningGang(gang=gang, allocations=placement.allocations(gang)
                              if allocations is None else allocations,
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
        self.hold(gang, queue.name, Nomination(gang.id, nodes, victims, self.now, pre.placement),
                  victims, pre.charges,
                  f"evicting {len(victims)} gang(s) ({', '.join(victims)}) to start on "
                  f"{', '.join(nodes)}; it binds once they are gone")

    def hold(self, gang: Gang, queue: str, nom: Nomination, terminating: Sequence[str],
             charges: Mapping[str, Resources] | None, message: str) -> None:
        """*gang* waits for *terminating* gangs to go: its nodes held and its quota charged
        (*charges*, if known) so nothing else takes them meanwhile."""
        self.nominations.append(nom)
        self.held.update(nom.nodes)
        self.terminating.update(terminating)
        if charges is not None:
            self.ledger = charge_all(self.ledger, queue, charges)
        self.wait(gang, ReasonCategory.PREEMPTION_PENDING, message)

    # The decision for one gang -----------------------------------------------------------
    def consider(self, gang: Gang, queue: Queue) -> None:
        self.order.append(gang.id)
        self.claims.pop(gang.id, None)
        memo = self.memo
        # Only reservations in a pool the gang may use concern it (see policies.reservation).
        concern = (relevant(self.reservations, memo.pools_of(gang, self.snapshot))
                   if self.reservations else ())
        if ((self.blocked_by is not None or self.blocked_queues or concern)
                and self._held_back(gang, queue, concern)):
            return
        base = memo.base_params(self.policies.scheduler.placement, self.held)
        # Backfill: a gang may use neither the nodes nor the quota of a reservation it would
        # still be running at when the reserved gang is expected to start.
        restricted = restricting(concern, queue.runtime_of(gang.runtime_estimate), self.now)
        params = memo.backfill_params(restricted, base)
        # A gang shaped exactly like one that already failed against this very state (same
        # snapshot, ledger, reservations, held nodes...) fails the same way, with the same
        # reason: every step below depends on the gang only through its shape.
        key = memo.failure_key(self, gang, queue, restricted,
                               starving(gang, queue, self.policies.scheduler, self.now))
        if key is not None:
            hit = memo.failures.get(key)
            if hit is not None:
                self.pending[gang.id] = PendingReason(hit[0], hit[1], len(self.order))
                return
        self._decide(gang, queue, base, params, restricted)
        if key is not None and memo.same_epoch(self):
            reason = self.pending.get(gang.id)
            if reason is not None:
                memo.failures[key] = (reason.category, reason.message)

    def _epoch(self) -> tuple[object, ...]:
        """What the decision for a gang depends on besides the gang (identities and sizes:
        each of these only changes by replacement or growth within a cycle)."""
        return (self.snapshot, self.ledger, self.reservations, self.blocked_by,
                len(self.blocked_queues), len(self.held), len(self.terminating),
                len(self.claims))

    def _decide(self, gang: Gang, queue: Queue, base: PlacementParams, params: PlacementParams,
                restricted: tuple[Reservation, ...]) -> None:
        """*restricted*: the reservations the gang must keep off."""
        sp = self.policies.scheduler
        memo = self.memo
        ledger = memo.held_ledger(self.ledger, restricted)
        bounds = self.bounds_of(gang)
        verdict = memo.admission(gang, queue, ledger, self.snapshot)
        quota_problem: str | None = None
        failure: Unplaceable | None = None
        never = ""  # why preemption, which would help, is not used
        if verdict.admitted or not bounds:  # no usable pool at all: placement says why
            params = memo.restrict(params, verdict.pools, self.snapshot) if bounds else params
            result = self.solve(gang, self.snapshot, params)
            if isinstance(result, Placement):
                allocations = result.allocations(gang)
                charges = placement_charges(gang, result, self.snapshot, allocations)
                quota_problem = check_charges(queue, ledger, charges)
                if quota_problem is not None:  # optional members beyond the quota: drop them
                    result = required_only(gang, result)
                    allocations = result.allocations(gang)
                    charges = placement_charges(gang, result, self.snapshot, allocations)
                    quota_problem = check_charges(queue, ledger, charges)
                if quota_problem is None:
                    self.bind(gang, queue, result, charges, allocations)
                    return
            else:
                failure = result
        else:
            quota_problem = verdict.message
        if (self.draining and gang.may_preempt
                and (quota_problem is not None
                     or (failure is not None and failure.preemption_may_help))
                and self._await_draining(gang, queue, ledger, bounds, params)):
            return
        if sp.preemption and (quota_problem is not None
                              or (failure is not None and failure.preemption_may_help)):
            # Gangs being evicted or bound this cycle are not candidates.
            untouchable = frozenset(self.terminating) | {b.gang_id for b in self.binds}
            if memo.by_queue is None:
                memo.by_queue = running_by_queue(self.snapshot)
            # A gang that may not preempt (preemptionPolicy Never) is searched for as if it
            # could, only to say in its reason that preemption would have helped.
            preemptor = gang if gang.may_preempt else replace(
                gang, preemption_policy=PreemptionPolicy.PREEMPT_LOWER_PRIORITY)
            search = VictimSearch(preemptor, queue, self.snapshot, ledger,
                                  self.policies.queues, bounds, params, self.now, self.solve,
                                  untouchable, memo.by_queue, memo.candidates, memo.usable)
            pre = search.run()
            if pre is not None and gang.may_preempt:
                self.nominate(gang, queue, pre)
                return
            if pre is not None:
                never = (f"preemption is disabled by its preemptionPolicy (Never): evicting "
                         f"{len(pre.victims)} gang(s) would let it start now")
        if queue.queueing.strategy is QueueingStrategy.STRICT_FIFO:
            self.blocked_queues.setdefault(queue.name, gang.id)
        self._fail(gang, queue, quota_problem, failure, base, restricted)
        if never:
            reason = self.pending[gang.id]
            self.pending[gang.id] = replace(reason, message=f"{reason.message}; {never}")

    def _await_draining(self, gang: Gang, queue: Queue, ledger: QuotaLedger,
                        bounds: Mapping[str, Resources], params: PlacementParams) -> bool:
        """Would the gang fit once the terminating gangs are gone? Then it waits for them
        like a preemptor for its victims (nodes held, quota charged, nominated) and evicts
        nobody: after a failover the new leader has no plan saying whom they were for."""
        gone = [self.snapshot.running[g] for g in self.draining if g in self.snapshot.running]
        if not gone:
            return False
        after = ledger_without(ledger, gone, self.snapshot)
        verdict = admissible_pools(gang, queue, after, bounds, explain=False)
        if not verdict.admitted:
            return False
        future = self.snapshot.without_gangs([rg.id for rg in gone])
        params = self.memo.restrict(params, verdict.pools, future)
        result = self.solve(gang, future, params)
        if not isinstance(result, Placement):
            return False
        result = required_only(gang, result)
        charges = placement_charges(gang, result, future)
        if check_charges(queue, after, charges) is not None:
            return False
        nodes = set(result.nodes)
        waits = tuple(rg.id for rg in gone if nodes.intersection(rg.nodes)) or tuple(
            rg.id for rg in gone)
        self.draining = [g for g in self.draining if g not in waits]
        self.hold(gang, queue.name, Nomination(gang.id, result.nodes, waits, self.now, result,
                                               inherited=True),
                  (), charges, awaiting_terminating(waits, result.nodes))
        return True

    def _fail(self, gang: Gang, queue: Queue, quota_problem: str | None,
              failure: Unplaceable | None, base: PlacementParams,
              restricted: tuple[Reservation, ...]) -> None:
        """A reason for a gang that cannot start now; maybe a reservation in its pools."""
        sp = self.policies.scheduler
        bounds = self.bounds_of(gang)
        if quota_problem is not None or failure is None:
            category, message = ReasonCategory.QUOTA, quota_problem or "quota"
            if not self.memo.ever_admissible(gang, queue, self.ledger, self.snapshot):
                empty = QuotaLedger.empty(self.ledger.tree)
                self.wait(gang, category, describe_never(queue.name, bounds, empty))
                return
        else:
            category = (ReasonCategory.TOPOLOGY if failure.reason is UnplaceableReason.TOPOLOGY
                        else ReasonCategory.PLACEMENT)
            message = failure.message
            if failure.reason not in (UnplaceableReason.INSUFFICIENT_CAPACITY,
                                      UnplaceableReason.TOPOLOGY):
                if restricted and self._fits_without(gang, base, failure):
                    # Kept off reserved nodes that are all it could use: it waits for them.
                    self.wait(gang, ReasonCategory.QUEUED,
                              f"waits for the nodes reserved for {_held(restricted, self.now)}: "
                              "every node it may use is reserved, and it would still run "
                              f"then ({message})")
                    return
                self.wait(gang, category, message)
                return
        if not sp.backfill and self.blocked_by is None:
            self.blocked_by = gang.id
        if sp.reservation and not starving(gang, queue, sp, self.now):
            message = (f"{message}; no reservation before it has been pending "
                       f"{queue.reserve_after(sp):.0f}s (reserveAfterSeconds)")
        elif sp.reservation and len(self.reservations) + len(self.claims) < sp.max_reservations:
            # Only in pools it may use with no reservation yet (nor claimed by a previously
            # reserved gang, which counts against the cap too, so it keeps its turn), so the
            # cycle's reservations stay one per pool, and a gang that may use several pools is
            # not starved by single-pool gangs reserving in turn.
            params = self._unreserved(gang, base)
            if params is not None:
                request = ReservationRequest(gang, queue, self.snapshot, self.ledger, bounds,
                                             params)
                found = reserve(request, self.policies.queues, self.now, self.solve)
                if found is not None:
                    self.reservations = (*self.reservations, found)
                    self.wait(gang, ReasonCategory.RESERVED,
                              f"{message}; reserved {len(found.nodes)} node(s) and its quota, "
                              f"estimated start in {found.estimated_start - self.now:.0f}s "
                              "when running gangs are expected to end")
                    return
        if restricted:
            self.wait(gang, ReasonCategory.QUEUED,
                      f"{message}; the nodes and quota reserved for "
                      f"{_held(restricted, self.now)} are not usable by a gang that would "
                      "still run then")
            return
        self.wait(gang, category, message)

    def _fits_without(self, gang: Gang, base: PlacementParams, failure: Unplaceable) -> bool:
        """Did only the reservations' exclusion make *failure* final (no usable node, or
        none big enough)? Then the gang fits, or waits for capacity, without them."""
        if failure.reason not in (UnplaceableReason.NO_ELIGIBLE_NODES,
                                  UnplaceableReason.NEVER_FITS):
            return False
        result = self.solve(gang, self.snapshot, base)
        return isinstance(result, Placement) or result.preemption_may_help

    def _unreserved(self, gang: Gang, params: PlacementParams) -> PlacementParams | None:
        """*params* without the nodes of pools that hold a reservation or are claimed by a
        previously reserved gang; None when that leaves none of the gang's pools."""
        taken = frozenset(p for r in self.reservations for p in r.pools)
        taken |= frozenset(p for pools in self.claims.values() for p in pools)
        if not taken:
            return params
        if self.memo.pools_of(gang, self.snapshot) <= taken:
            return None
        nodes = self.memo.nodes_in(tuple(sorted(taken)), self.snapshot)
        return replace(params, excluded_nodes=params.excluded_nodes | nodes)

    def _held_back(self, gang: Gang, queue: Queue, concern: tuple[Reservation, ...]) -> bool:
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
        if concern and not queue.queueing.backfill:
            self.wait(gang, ReasonCategory.QUEUED,
                      f"queue {queue.name} does not backfill; waits behind the reservation "
                      f"of {' and '.join(r.gang_id for r in concern)}")
            return True
        return False


def _held(reservations: tuple[Reservation, ...], now: float) -> str:
    return " and for ".join(f"{r.gang_id} (estimated start in {r.estimated_start - now:.0f}s)"
                            for r in reservations)


def awaiting_terminating(gangs: Sequence[str], nodes: Sequence[str]) -> str:
    """The reason of a gang waiting for gangs evicted before this scheduler's plan (the same
    words on every cycle, whichever leader decided the evictions)."""
    return (f"waiting for {len(gangs)} terminating gang(s) ({', '.join(gangs)}) to go, "
            f"without evicting more; nodes held: {', '.join(nodes)}")
