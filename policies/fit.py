"""``fit``: does this gang fit here? The one trial every search of the cycle makes.

A trial is admission by quota bounds (the pools where the queue's quota covers the gang's
upper-bound charge), placement restricted to those pools, then the exact charge of the chosen
nodes checked against the quota. The plain attempt, waiting for terminating gangs, proving a
set of preemption victims and finding a reservation's start all make this same trial and
differ only in the ``World`` they pass: the nodes with some running gangs gone, a ledger with
their usage released (or quota set aside), the nodes kept off.

A search wants a yes or no for the required members (``Question.WHETHER`` in its params);
the plain attempt (``optional``, ``Question.WHY``) places an elastic gang's optional members
too where quota allows, and says why quota refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from policies.admission import (
    admissible_pools,
    check_charges,
    one_fewer_optional,
    placement_charges,
    required_only,
)
from policies.queues import Queue
from policies.quota import QuotaLedger
from scheduler.model import Gang
from scheduler.model.release import Release
from scheduler.model.resources import Resources
from scheduler.placement.types import (
    RUNNING_GANGS_IN_THE_WAY,
    Placement,
    PlacementParams,
    Question,
    Solver,
    UnplaceableReason,
)
from scheduler.world.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Applicant:
    """A gang asking to start: the gang, its queue, and the most it could be charged in each
    pool it may use (``admission.pool_bounds``)."""

    gang: Gang
    queue: Queue
    bounds: Mapping[str, Resources]


@dataclass(frozen=True, slots=True)
class World:
    """What a trial is made against."""

    snapshot: Snapshot
    ledger: QuotaLedger
    #: Nodes kept off (nominated, reserved) or the only ones allowed, and the ``Question``
    #: asked: ``WHY`` also says why quota refuses the gang and, when no pool has a node it
    #: may use, lets placement say why (the plain attempt, whose answer becomes its reason).
    params: PlacementParams
    solver: Solver
    #: What is taken from running gangs first (victims, gangs that will have ended, draining
    #: gangs); the ledger is expected to have it released already.
    gone: tuple[Release, ...] = ()
    #: Place optional members too, as far as quota allows (the plain attempt).
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Fit:
    """The gang fits: where, and what it charges its queue per pool."""

    placement: Placement
    charges: Mapping[str, Resources]
    allocations: tuple[tuple[str, Resources], ...]  # per node, sorted


@dataclass(frozen=True, slots=True)
class Misfit:
    """The gang does not fit, and why."""

    message: str
    #: Why placement failed; None when quota refused the gang.
    reason: UnplaceableReason | None = None
    #: The pools quota admitted the gang in before placement failed (empty: none).
    pools: tuple[str, ...] = ()
    #: Whether the solver ran (searches count solves against a budget).
    solved: bool = False

    @property
    def quota(self) -> bool:
        return self.reason is None

    @property
    def preemption_may_help(self) -> bool:
        """Quota, or what is allocated to running gangs (not eligibility, not size)."""
        return self.reason is None or self.reason in RUNNING_GANGS_IN_THE_WAY


def fit(applicant: Applicant, world: World) -> Fit | Misfit:
    """Would the applicant start in *world*? All its required members, or not at all."""
    gang, queue = applicant.gang, applicant.queue
    question = world.params.question
    verdict = admissible_pools(gang, queue, world.ledger, applicant.bounds, question)
    if not verdict.admitted and (applicant.bounds or question is Question.WHETHER):
        return Misfit(verdict.message)
    snapshot = world.snapshot.without(world.gone) if world.gone else world.snapshot
    params = (restrict(world.params, verdict.pools, snapshot) if verdict.admitted
              else world.params)
    result = world.solver(gang, snapshot, params)
    if not isinstance(result, Placement):
        return Misfit(result.message, result.reason, verdict.pools, solved=True)
    if not world.optional:
        result = required_only(gang, result)
    allocations = result.allocations(gang)
    charges = placement_charges(gang, result, snapshot, allocations)
    problem = check_charges(queue, world.ledger, charges)
    # Optional members beyond the quota: drop them, the last placed first, as few as needed.
    while problem is not None and world.optional and (fewer := one_fewer_optional(gang, result)):
        result = fewer
        allocations = result.allocations(gang)
        charges = placement_charges(gang, result, snapshot, allocations)
        problem = check_charges(queue, world.ledger, charges)
    if problem is not None:
        return Misfit(problem, None, verdict.pools, solved=True)
    return Fit(result, charges, allocations)


def restrict(params: PlacementParams, pools: tuple[str, ...],
             snapshot: Snapshot) -> PlacementParams:
    """*params* limited to the nodes of *pools* (unchanged when that is every pool)."""
    if frozenset(pools) == frozenset(snapshot.pools()):
        return params
    allowed = snapshot.nodes_in(pools)
    if params.allowed_nodes is not None:
        allowed = allowed & params.allowed_nodes
    return replace(params, allowed_nodes=allowed)
