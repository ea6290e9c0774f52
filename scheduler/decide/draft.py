"""The plan as far as one ``decide`` call has got, and the state the next gang is tried in.

``Draft`` is ``decide``'s working memory: the snapshot with this cycle's binds assumed, the
quota ledger with their charges (and those of nominations), the ``Obstacles`` later gangs
must respect, and the plan's entries so far. Steps only read it; ``fold`` is where an
``Outcome`` changes it (see ``Draft`` for the other three writers). It is created and
dropped inside ``decide``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from policies import semi
from policies.admission import charge_all
from policies.queues import PolicySet, Queue
from policies.quota import QuotaLedger
from scheduler.decide.memo import Epoch, Memo
from scheduler.decide.obstacles import Obstacles
from scheduler.decide.outcomes import (
    Bound,
    NotYet,
    Outcome,
    Provisioned,
    Reserved,
    Waiting,
)
from scheduler.decide.plan import (
    Bind,
    Eviction,
    Nomination,
    PendingReason,
    Provision,
    ReasonCategory,
    map_pods,
)
from scheduler.model import Gang, RunningGang, elastic, prebind
from scheduler.model.prebind import PreBind
from scheduler.placement.types import Solver
from scheduler.world.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Context:
    """What stays the same for the whole cycle."""

    policies: PolicySet
    now: float
    solver: Solver
    memo: Memo


class Draft:
    """See the module docstring.

    Its state is read through read-only properties; the only writers are ``fold`` (a
    considered gang's ``Outcome``, a deferred gang's ``Waiting`` too) and three named steps of the
    cycle that decide nothing about a gang: ``begin_turn`` (its place in the order),
    ``set_aside`` (a gang not considered at all) and ``keep_claim`` (a reserved gang of the
    previous plan keeps its pools until its turn). So whatever changes the plan or the state
    the next gang meets is one of these four calls."""

    __slots__ = ("_binds", "_context", "_evictions", "_ledger", "_nominations", "_obstacles",
                 "_order", "_pending", "_provisions", "_snapshot")

    def __init__(self, context: Context, snapshot: Snapshot, ledger: QuotaLedger,
                 obstacles: Obstacles | None = None) -> None:
        """The cycle's start; *obstacles*: ``Obstacles.at_start`` (a test may start with
        more)."""
        self._context = context
        self._snapshot = snapshot
        self._ledger = ledger
        # Gangs whose pods are already being deleted (an eviction under way, maybe decided by
        # a previous leader whose plan is lost): never victims again, and awaited rather
        # than added to (see ``Obstacles.draining``).
        self._obstacles = (Obstacles.at_start(snapshot.terminating) if obstacles is None
                           else obstacles)
        self._binds: list[Bind] = []
        self._evictions: list[Eviction] = []
        self._nominations: list[Nomination] = []
        self._provisions: list[Provision] = []
        self._pending: dict[str, PendingReason] = {}
        self._order: list[str] = []  # gang ids in the order they were considered

    # Reading ------------------------------------------------------------------------------
    @property
    def context(self) -> Context:
        return self._context

    @property
    def snapshot(self) -> Snapshot:
        """The cycle's snapshot with this cycle's binds and claims assumed."""
        return self._snapshot

    @property
    def ledger(self) -> QuotaLedger:
        """The quota ledger with this cycle's binds and nominations charged."""
        return self._ledger

    @property
    def obstacles(self) -> Obstacles:
        return self._obstacles

    @property
    def binds(self) -> Sequence[Bind]:
        return self._binds

    @property
    def evictions(self) -> Sequence[Eviction]:
        return self._evictions

    @property
    def nominations(self) -> Sequence[Nomination]:
        return self._nominations

    @property
    def provisions(self) -> Sequence[Provision]:
        return self._provisions

    @property
    def pending(self) -> Mapping[str, PendingReason]:
        return self._pending

    @property
    def order(self) -> Sequence[str]:
        """Gang ids in the order they were considered."""
        return self._order

    @property
    def epoch(self) -> Epoch:
        """What a gang's outcome depends on besides the gang (see ``Memo.failure_key``)."""
        return (self._snapshot, self._ledger, self._obstacles)

    # Writing: the cycle's steps that decide nothing about the gang -------------------------
    def begin_turn(self, gang: Gang) -> None:
        """The gang's turn comes: it takes the next place in the order (its reason's
        position), and the pools its previous reservation claimed are free again (it may
        reserve anew, or no longer need to)."""
        self._order.append(gang.id)
        if self._obstacles.claims:
            self._obstacles = self._obstacles.unclaim(gang.id)

    def set_aside(self, gang: Gang, category: ReasonCategory, message: str) -> None:
        """A gang that is not considered at all (members missing, its queue unknown or not
        its namespace's): its reason, with no place in the order."""
        self._wait(gang, category, message, ordered=False)

    def keep_claim(self, gang_id: str, pools: Iterable[str]) -> None:
        """A gang reserved in the previous plan keeps *pools* claimed until its turn
        (``begin_turn`` frees them), so a gang considered before it cannot take them."""
        self._obstacles = self._obstacles.claim(gang_id, pools)

    def _wait(self, gang: Gang, category: ReasonCategory, message: str,
              ordered: bool = True, estimated_start: float | None = None) -> None:
        if gang.later_steps:  # why the rest of its workload is not there yet
            message = f"{message}; {gang.later_steps}"
        self._pending[gang.id] = PendingReason(category, message,
                                               len(self._order) if ordered else 0,
                                               estimated_start)

    def fold(self, gang: Gang, queue: Queue, outcome: Outcome) -> None:
        """Take the gang's outcome into the plan and the state."""
        if type(outcome) is Waiting:  # most outcomes (a backlog's every cycle): the short way
            self._wait(gang, outcome.category, outcome.message)
            if outcome.blocks_queue:
                self._obstacles = self._obstacles.block_queue(queue.name, gang.id)
            if outcome.blocks_all:
                self._obstacles = self._obstacles.block(gang.id)
            return
        if isinstance(outcome, NotYet):  # reserved (or a waiting subclass)
            if isinstance(outcome, Reserved):
                self._obstacles = self._obstacles.reserve(outcome.reservation)
                self._wait(gang, ReasonCategory.RESERVED, outcome.message,
                           estimated_start=outcome.reservation.estimated_start)
            else:
                self._wait(gang, outcome.category, outcome.message)
            if outcome.blocks_queue:
                self._obstacles = self._obstacles.block_queue(queue.name, gang.id)
            if outcome.blocks_all:
                self._obstacles = self._obstacles.block(gang.id)
        elif isinstance(outcome, Bound) and not outcome.fit.placement.assignments:
            # Only optional members, and none fits: an elastic gang grows into room that
            # appears; it never displaces anyone to grow.
            self._wait(gang, ReasonCategory.PLACEMENT, elastic.describe_growth(
                gang, 0, gang.id in self._snapshot.running))
        elif isinstance(outcome, Bound):
            self._bind(gang, queue, outcome)
        elif isinstance(outcome, Provisioned):
            prebinds = outcome.fit.placement.prebinds
            self._claim(prebinds)
            self._provisions.append(Provision(gang.id, prebinds))
            self._wait(gang, ReasonCategory.VOLUMES,
                       f"its claims are bound first ({prebind.describe(prebinds)}): a claim its "
                       "members share across nodes is provisioned before they bind")
        else:
            self._evictions.extend(outcome.evictions)
            self._nominations.append(outcome.nomination)
            self._obstacles = self._obstacles.nominate(outcome.nomination.nodes,
                                                       outcome.evicting, outcome.awaiting)
            if outcome.charges is not None:
                self._ledger = charge_all(self._ledger, queue.name, outcome.charges)
            self._wait(gang, ReasonCategory.PREEMPTION_PENDING, outcome.message)

    def _bind(self, gang: Gang, queue: Queue, outcome: Bound) -> None:
        now = self._context.now
        fit = outcome.fit
        runtime = queue.runtime_of(gang.runtime_estimate)
        pod_nodes = map_pods(gang, fit.placement)
        running = RunningGang(gang=gang, allocations=fit.allocations, start_time=now,
                              expected_end=None if runtime is None else now + runtime,
                              members=fit.placement.members,
                              group_uid=gang.uid if gang.pod_group else None)
        growing = self._snapshot.running.get(gang.id)
        if growing is not None:  # members of a running elastic gang bound to it
            running = elastic.grown(growing, replace(running, pod_nodes=pod_nodes))
        elif gang.min_member < gang.size:  # an elastic gang: its minimum, its members' nodes
            running = replace(running, min_member=gang.min_member, pod_nodes=pod_nodes)
        self._snapshot = self._snapshot.with_replaced(running)
        self._claim(fit.placement.prebinds)
        self._ledger = charge_all(self._ledger, queue.name, fit.charges)
        growth = elastic.describe_growth(gang, fit.placement.pods_placed(), growing is not None)
        if queue.preemption.semi_preemptible:
            growth += semi.describe_at_risk(queue, running, self._snapshot, self._ledger)
        self._binds.append(Bind(gang.id, queue.name, fit.placement, pod_nodes,
                                gang.uid if gang.pod_group else None, gang.native,
                                growth.removeprefix("; ")))

    def _claim(self, prebinds: tuple[PreBind, ...]) -> None:
        """Later gangs see the claims decided (a PV taken, a claim provisioned for a node)."""
        if prebinds:
            self._snapshot = self._snapshot.with_volumes(
                prebind.assume(self._snapshot.volumes, prebinds))
