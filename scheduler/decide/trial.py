"""One gang's turn: what the steps of ``consider`` read, each part worked out once.

Kept apart from the steps so each reads as a short rule over a ``Trial``; the trial owns the
knowledge the rules share (its world, its plain attempt, its victim search, why it can never
start), so no step recomputes what another already asked for.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from policies.admission import describe_never_admissible, ever_admissible
from policies.fit import Applicant, Fit, Misfit, World, fit, restrict
from policies.preemption import candidates_in
from policies.queues import Queue, QueueingStrategy
from policies.quota import QuotaLedger
from policies.reservation import Reservation, backfill_params_in, held_ledger, restricting
from policies.shrink import shrink_victims
from policies.victims import Preemption, room_of, select_victims
from scheduler.decide.draft import Draft
from scheduler.decide.memo import FailureKey
from scheduler.decide.obstacles import base_params
from scheduler.decide.outcomes import Waiting
from scheduler.decide.plan import ReasonCategory
from scheduler.decide.recall import Shape
from scheduler.kit.lazy import lazy
from scheduler.model import Gang
from scheduler.model.pods import PreemptionPolicy
from scheduler.placement.never_placeable import never_placeable_in
from scheduler.placement.terms import context_key
from scheduler.placement.types import Placement, PlacementParams, Question, UnplaceableReason

R = ReasonCategory
#: Placement failures that running gangs ending (or preemption) can cure.
_CAPACITY = (UnplaceableReason.INSUFFICIENT_CAPACITY, UnplaceableReason.TOPOLOGY,
             UnplaceableReason.DEVICES)
#: The pending reason category of a placement failure (PLACEMENT unless listed).
_CATEGORY = {UnplaceableReason.TOPOLOGY: R.TOPOLOGY, UnplaceableReason.VOLUMES: R.VOLUMES,
             UnplaceableReason.UNSUPPORTED: R.UNSUPPORTED, UnplaceableReason.DEVICES: R.DEVICES,
             UnplaceableReason.DEVICE_CLAIMS: R.DEVICES}


#: A gang's shape, the reservations it could delay, and those it would still be running at.
Footing = tuple[Shape, tuple[Reservation, ...], tuple[Reservation, ...]]


def find_footing(gang: Gang, queue: Queue, draft: Draft) -> Footing:
    """What every turn past ``deferred`` reads first: the gang's shape, the reservations
    in its pools (``concern``) and, of those, the ones it would still be running at."""
    shape = draft.context.memo.recall.shape(gang, draft.snapshot)
    obstacles = draft.obstacles
    concern = obstacles.concerning(shape.pools) if obstacles.reservations else ()
    restricted = restricting(concern, queue.runtime_of(gang.runtime_estimate),
                             draft.context.now) if concern else ()
    return shape, concern, restricted


class Trial:
    """One gang's turn: what its steps read. What every turn past ``deferred`` needs (for
    ``remembered``) is worked out at once; the rest, which most turns never reach, when first
    asked for (``lazy``)."""

    def __init__(self, gang: Gang, queue: Queue, draft: Draft,
                 footing: Footing | None = None) -> None:
        """*footing*: ``footing(gang, queue, draft)`` if the caller worked it out already."""
        self.gang, self.queue, self.draft = gang, queue, draft
        context = self.context = draft.context
        self.policy = context.policies.scheduler
        self.key: FailureKey | None = None  # set by ``remembered``
        self._attempt: Fit | Misfit | None = None
        #: Its shape; the reservations in a pool the gang may use (only those can it delay)
        #: and, of those, the reservations it would still be running at: it keeps off them.
        self.shape, self.concern, self.restricted = footing or find_footing(gang, queue, draft)

    @lazy
    def base(self) -> PlacementParams:
        """The policy's placement knobs, nominated nodes excluded."""
        return base_params(self.context.memo.slots, self.policy.placement, self.draft.obstacles)

    @lazy
    def ledger(self) -> QuotaLedger:
        """The cycle's ledger with the quota of the reservations it keeps off set aside."""
        return held_ledger(self.context.memo.slots, self.draft.ledger, self.restricted)

    @lazy
    def applicant(self) -> Applicant:
        return Applicant(self.gang, self.queue, self.shape.bounds)

    @lazy
    def world(self) -> World:
        """Where it may start now: off the nodes of the reservations it keeps off."""
        context = self.context
        return World(self.draft.snapshot, self.ledger,
                     backfill_params_in(context.memo.slots, self.restricted, self.base),
                     context.solver)

    @property
    def attempt(self) -> Fit | Misfit:
        """The plain attempt: optional members too where quota allows; it asks why not
        (``Question.WHY``): its answer becomes the gang's reason."""
        if self._attempt is None:
            w = self.world
            self._attempt = fit(self.applicant, World(
                w.snapshot, w.ledger, w.params.asking(Question.WHY), w.solver, optional=True))
        return self._attempt

    @property
    def misfit(self) -> Misfit:
        attempt = self.attempt
        assert isinstance(attempt, Misfit)  # the later steps run only after a misfit
        return attempt

    @lazy
    def search(self) -> World:
        """The world of the searches: kept to the pools quota admitted it in, if any; a
        search asks only whether the gang fits (``Question.WHETHER``)."""
        world, pools = self.world, self.misfit.pools
        params = restrict(world.params, pools, world.snapshot) if pools else world.params
        return replace(world, params=params.asking(Question.WHETHER))

    @lazy
    def preemption(self) -> Preemption | None:
        """The cheapest proven victim set, if preemption is on and could help. A gang that
        may not preempt (preemptionPolicy Never) is searched for as if it could, only to say
        in its reason that preemption would have helped."""
        if not (self.policy.preemption and self.misfit.preemption_may_help):
            return None
        if self.misfit.quota and self.hopeless is not None:
            return None  # no victims make a gang that can never start start
        gang, draft, slots = self.gang, self.draft, self.context.memo.slots
        preemptor = gang if gang.may_preempt else replace(
            gang, preemption_policy=PreemptionPolicy.PREEMPT_LOWER_PRIORITY)
        applicant = replace(self.applicant, gang=preemptor)
        queues = self.context.policies.queues
        found = candidates_in(slots, applicant, draft.snapshot, self.ledger, queues,
                              self.context.now, untouchable(draft))
        if not found:
            return None
        world, room = self.search, room_of(slots, applicant, self.search)
        # Members above elastic gangs' minimum first: nobody loses a whole gang for it then.
        return (shrink_victims(applicant, world, found, room, queues, self.context.now)
                or select_victims(applicant, world, found, room, queues))

    @lazy
    def hopeless(self) -> Waiting | None:
        """``hopeless``: why it can never start, if so."""
        return hopeless(self.draft, self.gang, self.queue, self.shape)

    @lazy
    def final(self) -> Waiting | None:
        """Why it cannot start however long it waits for running gangs, if so."""
        misfit = self.misfit
        if misfit.quota:
            return self.hopeless
        if misfit.reason in _CAPACITY:
            return None
        if self.restricted and self._fits_without_reservations():
            return Waiting(R.QUEUED, f"waits for the nodes reserved for "
                           f"{reserved_for(self.restricted)}: every node it "
                           f"may use is reserved, and it would still run then ({misfit.message})")
        return Waiting(self.category, misfit.message)

    @property
    def category(self) -> ReasonCategory:
        misfit = self.misfit
        if misfit.reason is None:
            return R.QUOTA
        return _CATEGORY.get(misfit.reason, R.PLACEMENT)

    @property
    def message(self) -> str:
        return self.misfit.message or "quota"

    @property
    def blocks_queue(self) -> bool:
        """Its queue is StrictFIFO: the gangs behind it wait. Not behind an interactive
        gang: the tier stands outside the batch order (``policies.interactive``)."""
        return (self.queue.queueing.strategy is QueueingStrategy.STRICT_FIFO
                and not self.gang.interactive)

    @property
    def blocks_all(self) -> bool:
        """Backfill is off and no gang blocks the others yet: this one does (never an
        interactive one, as for ``blocks_queue``)."""
        return (not self.policy.backfill and self.draft.obstacles.blocker is None
                and not self.gang.interactive)

    @property
    def never(self) -> str:
        """Why preemption, which would let it start now, is not used ("" when not so)."""
        pre = self.preemption
        if pre is None or self.gang.may_preempt:
            return ""
        return (f"; preemption is disabled by its preemptionPolicy (Never): evicting "
                f"{len(pre.victims)} gang(s) would let it start now")

    def _fits_without_reservations(self) -> bool:
        """Did only the reservations' exclusion make its misfit final (no usable node, or
        none big enough)? Then it fits, or waits for capacity, without them.

        The one solve of a turn outside ``fit``, on purpose: it is a placement question
        over every pool the gang's pods may use, quota aside, while ``fit`` admits by quota
        first and keeps placement to the pools quota admits. Through ``fit`` (the plain
        attempt's world with the reservations lifted) the reason would change for a gang
        whose quota-admitted pools cannot take it even unreserved while a pool without its
        quota could: pool a of 4-GPU nodes, all reserved, with the queue's quota, and
        pool b of 8-GPU nodes without; a gang of 2 x 8 GPUs "waits for the nodes reserved"
        here, and "never fits" through ``fit``. It asks why (``Question.WHY``): whether
        preemption may help is read from the reason."""
        if self.misfit.reason not in (UnplaceableReason.NO_ELIGIBLE_NODES,
                                      UnplaceableReason.NEVER_FITS):
            return False
        result = self.context.solver(self.gang, self.draft.snapshot,
                                     self.base.asking(Question.WHY))
        return isinstance(result, Placement) or result.preemption_may_help


#: Not an answer: ``hopeless`` not asked yet for a key (None is an answer).
_UNKNOWN: Any = object()


def hopeless(draft: Draft, gang: Gang, queue: Queue, shape: Shape) -> Waiting | None:
    """Why *gang* can never start, whatever runs, waits or goes first: no node can take one
    of its pods (or its eligible nodes together cannot hold it, or it names a topology
    level no node has), else its queue's quota can never admit it. Asked before any reason
    that waits (quota, a reservation, queue order), since it says what helps: a smaller
    gang, other nodes or quota, not patience.

    A function of the trial's gang, not a ``Trial`` step, because every gang deferred behind
    a StrictFIFO head or a blocker is asked too (``cycle._Turn``): hundreds a cycle on a FIFO
    policy, where making a trial for each tripled the simulator's time. What the answer
    reads (the shape and topology constraint, the queue, the nodes, the quota tree) is the
    same for every gang alike in those and stays while the nodes, the queue set and the
    placement knobs do, so it is kept in the recall (``Recall.hopeless``) across cycles for
    them; a gang whose pod constraints read what runs (``context_key``) is asked on its own."""
    if context_key(gang, draft.snapshot):
        return _hopeless(draft, gang, queue, shape)
    return _by_shape(draft, gang, queue, shape)


def hopeless_of(draft: Draft, gang: Gang, queue: Queue,
                by_gang: dict[int, tuple[Gang, str, Waiting | None]],
                anti: bool) -> Waiting | None:
    """``hopeless`` of a gang deferred before its trial (its shape not looked up yet): most
    turns of a long FIFO backlog, the same gang objects cycle after cycle, so the answer is
    kept per gang object where its placement depends on its shape alone, in *by_gang* (the
    recall's table: ``Recall.hopeless``, looked up once a cycle). *anti*: the draft's
    snapshot has running pods with required anti-affinity (the caller reads it once per
    snapshot)."""
    if gang.constrained or anti:  # ``context_key`` may not be ()
        return hopeless(draft, gang, queue,
                        draft.context.memo.recall.shape(gang, draft.snapshot))
    hit = by_gang.get(id(gang))
    if hit is not None and hit[0] is gang and hit[1] == queue.name:
        return hit[2]
    found = _by_shape(draft, gang, queue,
                      draft.context.memo.recall.shape(gang, draft.snapshot))
    by_gang[id(gang)] = (gang, queue.name, found)  # keeps the gang alive: its id not reused
    return found


def _by_shape(draft: Draft, gang: Gang, queue: Queue, shape: Shape) -> Waiting | None:
    """``hopeless`` of a gang whose placement depends on its shape alone."""
    policies = draft.context.policies
    by_shape = draft.context.memo.recall.hopeless(policies.queues,
                                                  policies.scheduler.placement)[0]
    key = (shape.number, gang.topology, queue.name)
    hit = by_shape.get(key, _UNKNOWN)
    if hit is _UNKNOWN:
        hit = by_shape[key] = _hopeless(draft, gang, queue, shape)
    return cast(Waiting | None, hit)


def _hopeless(draft: Draft, gang: Gang, queue: Queue, shape: Shape) -> Waiting | None:
    context = draft.context
    slots, tree = context.memo.slots, draft.ledger.tree  # a trial's held ledger: the same tree
    found = never_placeable_in(slots, gang, shape.number, draft.snapshot,
                               context.policies.scheduler.placement)
    if found is not None:
        return Waiting(_CATEGORY.get(found.reason, R.PLACEMENT), found.message)
    if ever_admissible(slots, gang, queue, shape.bounds, tree, shape.key):
        return None
    empty = QuotaLedger.empty(tree)
    return Waiting(R.QUOTA, describe_never_admissible(queue.name, shape.bounds, empty))


def untouchable(draft: Draft) -> frozenset[str]:
    """Gangs being evicted or bound this cycle: not candidates for preemption."""
    return draft.obstacles.terminating | {b.gang_id for b in draft.binds}


def reserved_for(reservations: tuple[Reservation, ...]) -> str:
    """The reserved gangs, without their estimated starts (those are the reasons' fields)."""
    return " and for ".join(r.gang_id for r in reservations)
