"""This cycle's shortcuts, in one place: answers shared by gangs asking the same question of
the same state.

Within a cycle most gangs are tried against the same quota ledger (it changes only when a
gang is admitted or nominated), and many share a queue and a shape. So:

- a gang no easier than one that already failed against the very same state (same snapshot,
  ledger and ``Obstacles``: the *epoch*) gets that gang's reason without being tried
  (``failure_key``): every step depends on the gang only through its queue, priority,
  preemption policy, topology, shape, the reservations it must keep off, whether it may
  reserve and, where pod constraints can read them, its namespace and members' labels
  (``placement.terms.context_key``; KAI-Scheduler's minimal job representatives);
- fair-share ranks, preemption candidates and the nodes a preemptor may use are kept by
  the ledger (or snapshot) they were worked out against, and the placement knobs by the
  nominated nodes and reservations they exclude.

Each is a memo of a pure function of what it is keyed by, so the plan is the one the long
way gives (``tests/unit/test_shortcuts_change_no_plan.py`` checks the failure memo). A
``Memo`` lives for one ``decide`` call; what outlives it is the ``Recall``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from policies import fairshare
from policies.admission import admissible_pools
from policies.fit import Applicant, World
from policies.preemption import Candidate, running_by_queue, scan, without
from policies.queues import QueueSet
from policies.quota import Key, QuotaLedger, QuotaTree
from policies.reservation import Reservation, backfill_params
from policies.victims import Room, free_gpus, usable_nodes
from scheduler.decide.obstacles import Obstacles
from scheduler.decide.outcomes import Waiting
from scheduler.decide.plan import PendingReason
from scheduler.decide.recall import Recall, Shape
from scheduler.kit.memo import Last
from scheduler.model import Gang, RunningGang
from scheduler.model.demand import gpus_of
from scheduler.placement.never import never_placeable
from scheduler.placement.terms import context_key
from scheduler.placement.types import PlacementParams, Unplaceable
from scheduler.world.snapshot import Snapshot

FailureKey = tuple[object, ...]
Epoch = tuple[Snapshot, QuotaLedger, Obstacles]


class Memo:
    """See the module docstring; each cache says what it is keyed by."""

    __slots__ = ("_base", "_by_queue", "_candidates", "_epoch", "_ever", "_failures",
                 "_held", "_last_room", "_never", "_ranks", "_reserved", "_restricted",
                 "_rooms", "recall")

    def __init__(self, recall: Recall) -> None:
        self.recall = recall
        self._epoch: Epoch | None = None
        self._failures: dict[FailureKey, Waiting] = {}  # in the epoch
        self._held: dict[tuple[str, str], Waiting] = {}  # (queue or "", the gang it waits behind)
        #: (queue, bounds) -> the rank and the ledger entries it was worked out from (a
        #: ledger's unchanged entries stay the same objects when it is charged).
        self._ranks: dict[tuple[object, ...], tuple[QuotaTree, tuple[Key, ...],
                                                    tuple[object, ...], fairshare.QueueKey]] = {}
        self._ever: dict[tuple[object, ...], bool] = {}  # queue, bounds
        self._never: dict[tuple[object, ...], Unplaceable | None] = {}  # shape, topology
        self._candidates: dict[tuple[object, ...], list[Candidate]] = {}  # ledger, queue, ...
        self._by_queue: dict[str, list[RunningGang]] | None = None  # at the first search
        self._rooms: dict[tuple[object, ...], tuple[Snapshot, Room]] = {}  # shape, params
        #: (shape, pools, allowed nodes) -> the key of the room last made for them.
        self._last_room: dict[tuple[object, ...], tuple[tuple[object, ...], frozenset[str]]] = {}
        self._reserved: dict[tuple[object, ...], QuotaLedger] = {}  # ledger, reservations
        self._base: Last[frozenset[str], PlacementParams] = Last()  # nominated nodes
        #: base -> reservations -> params.
        self._restricted: Last[PlacementParams, dict[tuple[Reservation, ...],
                                                     PlacementParams]] = Last()

    # Failures -----------------------------------------------------------------------------
    def failure_key(self, epoch: Epoch, gang: Gang, queue: str,
                    restricting: tuple[Reservation, ...], may_reserve: bool,
                    shape: Shape) -> FailureKey | None:
        """The failure memo's key for *gang* (starting a new epoch if the state changed), or
        None when the gang's outcome may depend on more than its shape: a gang with members
        already running is not a candidate victim of itself, unlike one of the same shape.
        The reservations it must keep off are part of the key: gangs of one shape may differ
        in runtime (so in which reservations they end before) and in age (so in whether they
        may reserve, *may_reserve*)."""
        if gang.id in epoch[0].running:
            return None
        if not self._same(epoch):
            self._failures.clear()
            self._epoch = epoch
        return (queue, gang.priority, gang.preemption_policy, gang.topology,
                tuple(r.gang_id for r in restricting), may_reserve, shape.number,
                context_key(gang, epoch[0]))

    def failed(self, key: FailureKey | None) -> Waiting | None:
        """The outcome of a gang of this key that failed in the current epoch: its reason,
        blocking nobody (the gang it was decided for blocked whom it had to)."""
        return self._failures.get(key) if key is not None else None

    def remember(self, key: FailureKey | None, epoch: Epoch, reason: PendingReason) -> None:
        """Keep *reason* for *key* if deciding it left the state as it was."""
        if key is not None and self._same(epoch):
            self._failures[key] = Waiting(reason.category, reason.message)

    def held(self, key: tuple[str, str], make: Callable[[], Waiting]) -> Waiting:
        """The outcome of gangs held back behind one gang (in a queue, or "" for all): the
        same for each of them, so made once (an outcome is immutable)."""
        hit = self._held.get(key)
        if hit is None:
            hit = self._held[key] = make()
        return hit

    def _same(self, epoch: Epoch) -> bool:
        now = self._epoch
        return (now is not None and now[0] is epoch[0] and now[1] is epoch[1]
                and now[2] is epoch[2])

    # Quota and fair share -----------------------------------------------------------------
    def rank(self, ledger: QuotaLedger, queue: str, head: Gang,
             snapshot: Snapshot) -> fairshare.QueueKey:
        """The fair-share rank of *queue* with *head* next."""
        shape = self.recall.shape(head, snapshot)
        key = (queue, shape.key)
        tree, totals = ledger.tree, ledger.total
        hit = self._ranks.get(key)
        if hit is not None and hit[0] is tree:
            _, reads, seen, rank = hit
            for k, v in zip(reads, seen, strict=True):
                if totals.get(k) is not v:
                    break
            else:
                return rank
        reads = fairshare.reads(tree, queue)
        rank = fairshare.queue_key(ledger, queue, shape.bounds)
        self._ranks[key] = (tree, reads, tuple(totals.get(k) for k in reads), rank)
        return rank

    def ever_admissible(self, applicant: Applicant, tree: QuotaTree, key: object) -> bool:
        """Would quota admit the applicant with every queue idle? (*key*: its bounds.)"""
        memo_key = (applicant.queue.name, key)
        hit = self._ever.get(memo_key)
        if hit is None:
            hit = self._ever[memo_key] = admissible_pools(
                applicant.gang, applicant.queue, QuotaLedger.empty(tree), applicant.bounds,
                explain=False).admitted
        return hit

    def never_placeable(self, gang: Gang, shape: Shape, snapshot: Snapshot,
                        params: PlacementParams) -> Unplaceable | None:
        """``placement.never.never_placeable``, once per shape and topology (it reads the
        nodes only, the same all cycle); worked out each time for a gang whose pod
        constraints read what runs."""
        if context_key(gang, snapshot):
            return never_placeable(gang, snapshot, params)
        key = (shape.number, gang.topology)
        if key not in self._never:
            found = never_placeable(gang, snapshot, params)
            self._never[key] = found
        return self._never[key]

    def reserved_ledger(self, ledger: QuotaLedger,
                        restricting: tuple[Reservation, ...]) -> QuotaLedger:
        """*ledger* with the reservations' quota held (one object while unchanged)."""
        if not restricting:
            return ledger
        key = (ledger, *restricting)
        hit = self._reserved.get(key)
        if hit is None:
            if len(self._reserved) > 64:
                self._reserved.clear()  # the ledger changes with every admission
            hit = ledger
            for r in restricting:
                hit = r.hold(hit)
            self._reserved[key] = hit
        return hit

    # Placement knobs ----------------------------------------------------------------------
    def base_params(self, policy: PlacementParams, obstacles: Obstacles) -> PlacementParams:
        """The policy's placement knobs with the nominated nodes excluded."""
        return self._base.get(obstacles.nominated, lambda nominated: replace(
            policy, excluded_nodes=policy.excluded_nodes | nominated))

    def backfill_params(self, restricting: tuple[Reservation, ...],
                        base: PlacementParams) -> PlacementParams:
        """``reservation.backfill_params``, once per set of reservations (and base)."""
        if not restricting:
            return base
        known = self._restricted.get(base, lambda _: {})
        hit = known.get(restricting)
        if hit is None:
            hit = known[restricting] = backfill_params(restricting, base)
        return hit

    # Preemption ---------------------------------------------------------------------------
    def candidates(self, applicant: Applicant, snapshot: Snapshot, ledger: QuotaLedger,
                   queues: QueueSet, now: float,
                   untouchable: frozenset[str]) -> list[Candidate]:
        """``preemption.candidates``, scanned once per ledger, queue, priority and bounds
        while the untouchable gangs stay the same."""
        if not applicant.gang.may_preempt:
            return []
        gang = applicant.gang
        key = (ledger, applicant.queue.name, gang.priority, tuple(applicant.bounds.items()),
               len(untouchable))
        found = self._candidates.get(key)
        if found is None:
            if self._by_queue is None:
                self._by_queue = running_by_queue(snapshot)
            found = self._candidates[key] = scan(applicant, snapshot, ledger, queues, now,
                                                 untouchable, self._by_queue)
        return without(found, gang)

    def room(self, applicant: Applicant, world: World) -> Room:
        """``victims.Room``: the usable nodes once per shape, queue pools and params (from
        the last room of the same shape, pools and allowed nodes when its excluded nodes are
        among these); their free GPUs once per snapshot, from the last count where the
        snapshots are related."""
        params = world.params
        base = (tuple(r.requirements for r in applicant.gang.roles),
                world.ledger.tree.pools_of(applicant.queue.name), params.allowed_nodes)
        excluded = params.excluded_nodes
        key = (*base, excluded)
        hit = self._rooms.get(key)
        snapshot = world.snapshot
        if hit is not None:
            if hit[0] is snapshot:
                return hit[1]
            before, known = hit
            room = Room(known.nodes, _free_gpus_now(before, known, snapshot), known.gains,
                        known.domains)
        else:
            # Nominations only add excluded nodes: the room of the same shape with fewer
            # excluded gives this one by taking the newly excluded away.
            last = self._last_room.get(base)
            near = self._rooms.get(last[0]) if last is not None and last[1] <= excluded else None
            if near is not None:
                before, known = near
                count = _free_gpus_now(before, known, snapshot)
                gone = known.nodes & excluded
                free = snapshot.free
                room = Room(known.nodes - gone,
                            count - sum(max(0, gpus_of(free(n))) for n in gone))
            else:
                nodes = usable_nodes(applicant, world)
                room = Room(nodes, free_gpus(snapshot, nodes))
            self._last_room[base] = (key, excluded)
        self._rooms[key] = (snapshot, room)
        return room


def _free_gpus_now(before: Snapshot, room: Room, snapshot: Snapshot) -> int:
    """``free_gpus(snapshot, room.nodes)``, from the count on *before*: when the two
    snapshots are related, only the nodes whose free resources differ are looked at."""
    changed = snapshot.changed_since(before)
    if changed is None:
        return free_gpus(snapshot, room.nodes)
    count, nodes = room.free_gpus, room.nodes
    old, new = before.free, snapshot.free
    for n in changed:
        if n in nodes:
            count += max(0, gpus_of(new(n))) - max(0, gpus_of(old(n)))
    return count

