"""The plan as far as one ``decide`` call has got, and the state the next gang is tried in.

``Draft`` is ``decide``'s working memory: the snapshot with this cycle's binds assumed, the
quota ledger with their charges (and those of nominations), the ``Obstacles`` later gangs
must respect, and the plan's entries so far. Steps only read it; ``fold`` is the one place an
``Outcome`` changes it. It is created and dropped inside ``decide``.
"""

from __future__ import annotations

from dataclasses import dataclass

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
from scheduler.model import Gang, RunningGang, prebind
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
    """See the module docstring."""

    __slots__ = ("binds", "context", "evictions", "ledger", "nominations", "obstacles",
                 "order", "pending", "provisions", "snapshot")

    def __init__(self, context: Context, snapshot: Snapshot, ledger: QuotaLedger) -> None:
        self.context = context
        self.snapshot = snapshot
        self.ledger = ledger
        # Gangs whose pods are already being deleted (an eviction under way, maybe decided by
        # a previous leader whose plan is lost): never victims again, and awaited rather
        # than added to (see ``Obstacles.draining``).
        self.obstacles = Obstacles.at_start(snapshot.terminating)
        self.binds: list[Bind] = []
        self.evictions: list[Eviction] = []
        self.nominations: list[Nomination] = []
        self.provisions: list[Provision] = []
        self.pending: dict[str, PendingReason] = {}
        self.order: list[str] = []  # gang ids in the order they were considered

    @property
    def epoch(self) -> Epoch:
        """What a gang's outcome depends on besides the gang (see ``Memo.failure_key``)."""
        return (self.snapshot, self.ledger, self.obstacles)

    def wait(self, gang: Gang, category: ReasonCategory, message: str,
             ordered: bool = True, estimated_start: float | None = None) -> None:
        if gang.later_steps:  # why the rest of its workload is not there yet
            message = f"{message}; {gang.later_steps}"
        self.pending[gang.id] = PendingReason(category, message,
                                              len(self.order) if ordered else 0,
                                              estimated_start)

    def fold(self, gang: Gang, queue: Queue, outcome: Outcome) -> None:
        """Take the gang's outcome into the plan and the state."""
        if isinstance(outcome, NotYet):  # reserved or waiting: most outcomes, so first
            if isinstance(outcome, Reserved):
                self.obstacles = self.obstacles.reserve(outcome.reservation)
                self.wait(gang, ReasonCategory.RESERVED, outcome.message,
                          estimated_start=outcome.reservation.estimated_start)
            else:
                self.wait(gang, outcome.category, outcome.message)
            if outcome.blocks_queue:
                self.obstacles = self.obstacles.block_queue(queue.name, gang.id)
            if outcome.blocks_all:
                self.obstacles = self.obstacles.block(gang.id)
        elif isinstance(outcome, Bound):
            self._bind(gang, queue, outcome)
        elif isinstance(outcome, Provisioned):
            prebinds = outcome.fit.placement.prebinds
            self._claim(prebinds)
            self.provisions.append(Provision(gang.id, prebinds))
            self.wait(gang, ReasonCategory.VOLUMES,
                      f"its claims are bound first ({prebind.describe(prebinds)}): a claim its "
                      "members share across nodes is provisioned before they bind")
        else:
            self.evictions.extend(outcome.evictions)
            self.nominations.append(outcome.nomination)
            self.obstacles = self.obstacles.nominate(outcome.nomination.nodes,
                                                     outcome.evicting, outcome.awaiting)
            if outcome.charges is not None:
                self.ledger = charge_all(self.ledger, queue.name, outcome.charges)
            self.wait(gang, ReasonCategory.PREEMPTION_PENDING, outcome.message)

    def _bind(self, gang: Gang, queue: Queue, outcome: Bound) -> None:
        now = self.context.now
        fit = outcome.fit
        runtime = queue.runtime_of(gang.runtime_estimate)
        running = RunningGang(gang=gang, allocations=fit.allocations, start_time=now,
                              expected_end=None if runtime is None else now + runtime,
                              members=fit.placement.members,
                              group_uid=gang.uid if gang.pod_group else None)
        self.snapshot = self.snapshot.with_running(running)
        self._claim(fit.placement.prebinds)
        self.ledger = charge_all(self.ledger, queue.name, fit.charges)
        self.binds.append(Bind(gang.id, queue.name, fit.placement, map_pods(gang, fit.placement),
                               gang.uid if gang.pod_group else None, gang.native))

    def _claim(self, prebinds: tuple[PreBind, ...]) -> None:
        """Later gangs see the claims decided (a PV taken, a claim provisioned for a node)."""
        if prebinds:
            self.snapshot = self.snapshot.with_volumes(
                prebind.assume(self.snapshot.volumes, prebinds))
