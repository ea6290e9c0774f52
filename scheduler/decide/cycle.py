"""``decide``: the one pure function that makes every scheduling decision.

    plan = decide(snapshot, pending_gangs, policies, now, previous)

Phases: (1) gangs that cannot be considered get a reason at once (members missing, queue
unknown or not theirs: ``admissible``); (2) gangs left partly bound are repaired first
(``housekeeping``), then capacity promised by the previous plan is honoured: nominated
preemptors whose victims are gone, then the previously reserved gangs; (3) the rest in
fair-share order (``order``), one gang at a time: ``consider`` returns the gang's
``Outcome`` and ``Draft.fold`` takes it into the plan and the state the next gang meets;
(4) the plan. No I/O, no clock, no randomness, no state outside the arguments: the
same input gives the same plan. What it reuses from earlier cycles comes in the ``Recall``,
what it shares within the cycle sits in its ``Memo``.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from dataclasses import replace

from policies import fairshare, usage_memory
from policies.admission import placement_charges
from policies.guards import NO_USAGE, Usage
from policies.queues import Packing, PolicySet, Queue
from scheduler import placement
from scheduler.decide import guards, housekeeping
from scheduler.decide.admissible import admissible
from scheduler.decide.consider import awaiting_terminating, consider, recalled
from scheduler.decide.draft import Context, Draft
from scheduler.decide.due import next_due
from scheduler.decide.heads import deferred
from scheduler.decide.housekeeping import Housekeeping
from scheduler.decide.interactive import UserCaps
from scheduler.decide.memo import Memo
from scheduler.decide.obstacles import Obstacles
from scheduler.decide.order import in_order, owner_lines
from scheduler.decide.outcomes import Nominated, Waiting
from scheduler.decide.plan import (
    NOMINATION_TIMEOUT_SECONDS,
    Bind,
    CyclePlan,
    Members,
    Nomination,
    PendingReason,
    ReasonCategory,
    map_pods,
)
from scheduler.decide.recall import Recall
from scheduler.decide.scale_up import guard_from_scale_down, provision
from scheduler.decide.trial import Trial, find_footing, hopeless_of
from scheduler.model import Gang
from scheduler.model.node_groups import NodeGroup, ProvisioningState
from scheduler.placement.observed_mix import observed_mix
from scheduler.placement.types import Solver
from scheduler.world.snapshot import Snapshot

#: What ``decide`` takes as policies (the name the scheduler loop uses).
Policies = PolicySet

_ID_UID = operator.attrgetter("id", "uid")
_NO_HOUSEKEEPING = Housekeeping()
_NOTHING_ASKED: Mapping[str, ProvisioningState] = {}


def decide(snapshot: Snapshot, pending_gangs: Iterable[Gang], policies: PolicySet, now: float,
           previous: CyclePlan | None = None, *, solver: Solver | None = None,
           recall: Recall | None = None, house: Housekeeping = _NO_HOUSEKEEPING,
           usage: Usage = NO_USAGE,
           memory: usage_memory.UsageMemory | None = None,
           node_groups: tuple[NodeGroup, ...] = (),
           asked: Mapping[str, ProvisioningState] = _NOTHING_ASKED) -> CyclePlan:
    """Decide binds, evictions, nominations, reservations (at most one per node pool),
    reasons and rollbacks for one cycle.

    *solver*: ``placement.solve`` or a stand-in (a timing wrapper, a test double); its answer
    may depend on a gang's roles and topology, never on its name. *recall*: what earlier
    cycles on the same nodes worked out (the scheduler loop keeps it); without it the
    answers are worked out afresh, to the same plan. *house*: backoffs, gangs not formed,
    gangs partly bound (see ``housekeeping``). *usage*: GPU-hours of runs that ended, for
    the queues' budgets (``policies.guards``; the loop remembers them). *memory*: what
    queues borrowed in earlier cycles (fair share with memory, ``policies.usage_memory``; the
    scheduler loop keeps it), decayed here to *now*; it counts only when the scheduler
    policy sets a half-life. *node_groups*: what the cluster-autoscaler can add, and *asked*: its
    answers to the scale-ups asked for earlier, by gang; with the policy's ``scale_up_pools``
    they let a gang with no room ask for its nodes (``scale_up.provision``).
    """
    if recall is None:
        recall = Recall(snapshot.index)
    elif recall.index is not snapshot.index:
        raise ValueError("decide: the recall belongs to another set of nodes")
    given = sorted(pending_gangs, key=_ID_UID)
    gangs = housekeeping.ready(given, house, now)
    backing_off = housekeeping.backing_off(given, house, now)
    rolled_back = () if previous is None else (r.gang_id for r in previous.rollbacks)
    queues = policies.queues
    # Gangs a guard evicted in the previous plan are still leaving (the watch may lag).
    evicted = frozenset(() if previous is None else (
        e.victim for e in previous.evictions if not e.preemptor and e.victim in snapshot.running))
    overruns = guards.overruns(snapshot, queues, now, evicted)
    leaving = frozenset(e.victim for e in overruns) | evicted
    guarded = guards.Guarded.of(snapshot, gangs, queues, now, usage, leaving)
    wake = guards.wake(snapshot, queues, guarded, now)
    if not gangs:
        # Nothing to decide: the previous plan's nominations and reservations lapse (they
        # are carried over only for gangs still pending).
        held = {gid: r for gid, (r, _) in backing_off.items()}
        return CyclePlan(now=now, evictions=overruns, unformed=housekeeping.unformed(house),
                         pending=held, members={gid: m for gid, (_, m) in backing_off.items()},
                         rollbacks=housekeeping.rollbacks(house, (), held, now, rolled_back),
                         due=_sooner(next_due(snapshot, given, held, (), (), policies, house,
                                              now), wake), wake=wake)
    if policies.scheduler.packing is Packing.FRAGMENTATION:
        policies = recall.packing(policies, observed_mix(snapshot.running.values(), gangs))
    tree = recall.tree(queues)
    memo = Memo(recall)
    parents = recall.parents(queues)
    draft = Draft(Context(policies, now, solver or placement.solve, memo), snapshot,
                  recall.ledger(tree, snapshot),
                  # A gang evicted by a guard is terminating from now on, like one evicted
                  # before this cycle: never a victim again, and awaited by whoever needs
                  # its nodes.
                  Obstacles.at_start(snapshot.terminating | leaving) if leaving else None)
    by_queue: dict[str, list[Gang]] = {}
    members: dict[str, Members] = {}
    # (The recall lives with the snapshot's nodes: a node change starts a fresh one, so a
    # minResources answer, which depends on the nodes, is never stale.)
    beyond_cap = guarded.beyond_cap
    for gang, verdict, pods in recall.admissible(
            queues, gangs, lambda g: admissible(g, snapshot, queues, tree, parents)):
        members[gang.id] = pods
        if not isinstance(verdict, Queue):
            draft.set_aside(gang, *verdict)
        elif beyond_cap and gang.id in beyond_cap:
            draft.set_aside(gang, ReasonCategory.QUEUE_LIMIT, beyond_cap[gang.id])
        else:
            by_queue.setdefault(verdict.name, []).append(gang)
    by_id = {g.id: g for gs in by_queue.values() for g in gs}
    carried = _carry_over(draft, previous, by_id)
    repairs = [by_id[gid] for gid in housekeeping.repairs(house)
               if gid in by_id and gid not in draft.pending]
    first = repairs + [g for g in carried if g.id not in house.partly_bound]
    # Only the guards read it (hundreds of gangs a cycle in a backlog: not made for nothing).
    queue_of = {gid: g.queue for gid, g in by_id.items()} if guarded.guarded else {}
    turn = _Turn(draft, queues.queues, guarded, queue_of,
                 UserCaps.of(snapshot, queues, leaving), by_id)
    for gang in first:
        turn(gang, gang.queue)
    done = {g.id for g in first} | {n.gang_id for n in draft.nominations}
    remembered = usage_memory.shares(memory, tree, now,
                                     policies.scheduler.usage_half_life_seconds)
    in_order({q: [g for g in gs if g.id not in done] for q, gs in by_queue.items()},
             policies.scheduler.ordering, turn,
             lambda q, head: _rank(memo, draft, q, head, remembered),
             owner_lines(snapshot, queues, policies.scheduler.ordering, leaving))
    for gid, (_, pods) in backing_off.items():
        members[gid] = pods
    pending = _in_id_order(given, {**draft.pending,
                                   **{gid: r for gid, (r, _) in backing_off.items()}})
    scale_ups = provision(by_id.values(), pending, node_groups,
                          policies.scheduler.scale_up_pools, asked)
    if scale_ups.pending is not None:
        pending = dict(scale_ups.pending)
    nominations = tuple(sorted(draft.nominations, key=lambda n: n.gang_id))
    reservations = draft.obstacles.reservations
    # Sizes of the bound gangs only (every pending gang's, every cycle, cost a backlog dear).
    binds = guard_from_scale_down(draft.binds, {b.gang_id: by_id[b.gang_id].size
                                                for b in draft.binds if b.gang_id in by_id},
                                  lambda node: snapshot.nodes[node].pool,
                                  policies.scheduler.scale_up_pools)
    return CyclePlan(
        now=now, binds=binds, evictions=overruns + tuple(draft.evictions),
        nominations=nominations, reservations=reservations, provisions=tuple(draft.provisions),
        scale_ups=scale_ups.requests, scale_up_held=scale_ups.held, pending=pending,
        order=tuple(draft.order),
        members=_of_pending(members, draft.binds, pending),
        unformed=housekeeping.unformed(house),
        rollbacks=housekeeping.rollbacks(house, (b.gang_id for b in draft.binds), pending,
                                         now, rolled_back),
        due=_sooner(next_due(snapshot, given, pending, nominations,
                             (r.estimated_start for r in reservations), policies, house, now),
                    wake), wake=wake)


def _sooner(due: float | None, wake: float | None) -> float | None:
    return due if wake is None else wake if due is None else min(due, wake)


class _Turn:
    """Consider one gang of queue *name* and fold its outcome in; remember a failure for
    its lookalikes. True when the quota ledger changed.

    The memo keeps the outcome itself, not the reason the draft wrote for it: that reason
    carries this gang's own ``later_steps``, which a lookalike must not inherit. Only a
    ``Waiting`` can leave the epoch as it was (every other outcome changes the snapshot,
    the ledger or the obstacles), so only a ``Waiting`` is offered.

    A callable object rather than a function: millions of turns in a simulation of a long
    backlog, so what stays the same for the cycle (the queues, the guards, the recall's
    table of gangs that can never start) is looked up once, not on every turn."""

    __slots__ = ("anti", "by_gang", "by_id", "caps", "draft", "guarded", "obstacles",
                 "queue_of", "queues", "snapshot", "waits")

    def __init__(self, draft: Draft, queues: Mapping[str, Queue], guarded: guards.Guarded,
                 queue_of: Mapping[str, str], caps: UserCaps | None = None,
                 by_id: Mapping[str, Gang] | None = None) -> None:
        self.draft, self.queues, self.queue_of = draft, queues, queue_of
        self.guarded = guarded if guarded.holds else None
        self.caps, self.by_id = caps, by_id or {}
        policies = draft.context.policies
        self.by_gang = draft.context.memo.recall.hopeless(policies.queues,
                                                          policies.scheduler.placement)[1]
        #: ``deferred`` per queue name, for the obstacles it was read from (a new obstacles
        #: object is made whenever they change, so identity says they are the same).
        self.obstacles: Obstacles | None = None
        self.waits: dict[str, Waiting | None] = {}
        #: Whether the draft's snapshot (the one read last) has running pods with required
        #: anti-affinity: read again only when a bind makes a new snapshot.
        self.snapshot: Snapshot | None = None
        self.anti = False

    def __call__(self, gang: Gang, name: str) -> bool:
        draft = self.draft
        draft.begin_turn(gang)
        queue = self.queues[name]
        if self.guarded is not None:
            hold = self.guarded.held(gang, draft.binds, draft.nominations, self.queue_of)
            if hold is not None:  # a guard of its queue holds it: no trial (policies.guards)
                draft.fold(gang, queue, hold)
                return False
        if self.caps is not None:
            hold = self.caps.held(gang, draft.binds, draft.nominations, self.by_id)
            if hold is not None:  # its user's interactive cap in the queue (policies.interactive)
                draft.fold(gang, queue, hold)
                return False
        if gang.interactive:
            # Someone waits at it: the ordering rules that defer gangs (StrictFIFO heads,
            # the blocker with backfill off) are for the batch order, not for it.
            return self._trial(gang, queue)
        obstacles = draft.obstacles
        if obstacles is not self.obstacles:
            self.obstacles, self.waits = obstacles, {}
        if name in self.waits:
            waits = self.waits[name]
        else:
            waits = self.waits[name] = deferred(draft, queue)
        if waits is not None:  # waits behind another gang, blocking nobody: only its reason,
            # unless it can never start (asked without a trial: most of a FIFO backlog is here)
            snapshot = draft.snapshot
            if snapshot is not self.snapshot:
                self.snapshot, self.anti = snapshot, snapshot.pods.has_anti_affinity
            draft.fold(gang, queue,
                       hopeless_of(draft, gang, queue, self.by_gang, self.anti) or waits)
            return False
        return self._trial(gang, queue)

    def _trial(self, gang: Gang, queue: Queue) -> bool:
        draft = self.draft
        ledger = draft.ledger
        footing = find_footing(gang, queue, draft)
        known = recalled(draft, gang, queue, footing)
        if known is not None:  # a lookalike failed against this very state: no trial needed
            draft.fold(gang, queue, known)
            return False
        trial = Trial(gang, queue, draft, footing)
        outcome = consider(trial)
        draft.fold(gang, queue, outcome)
        if trial.key is not None and isinstance(outcome, Waiting):
            draft.context.memo.remember(trial.key, draft.epoch, outcome)
        return draft.ledger is not ledger


def _rank(memo: Memo, draft: Draft, queue: str, head: Gang,
          remembered: Mapping[str, float]) -> fairshare.QueueKey:
    """The fair-share rank of *queue* with *head* next, on the draft's ledger now (with
    the queues' remembered shares, ``usage_memory``)."""
    shape = memo.recall.shape(head, draft.snapshot)
    return fairshare.rank(memo.slots, draft.ledger, queue, shape.key, shape.bounds,
                          remembered)


def _in_id_order(given: list[Gang], reasons: dict[str, PendingReason]
                 ) -> dict[str, PendingReason]:
    """*reasons* sorted by gang id. Each is a reason of one of *given* (sorted by id), so a
    pass over those puts them in order without a sort of hundreds of gangs each cycle of a
    backlog (checked by the count: else sorted)."""
    out = {g.id: reasons[g.id] for g in given if g.id in reasons}
    return out if len(out) == len(reasons) else dict(sorted(reasons.items()))


def _of_pending(members: dict[str, Members], binds: Iterable[Bind],
                pending: Mapping[str, object]) -> dict[str, Members]:
    """*members* (of every gang this cycle judged) of the pending gangs only: all but the
    bound ones, so dropping those is enough (checked by the count)."""
    for b in binds:
        members.pop(b.gang_id, None)
    return members if len(members) == len(pending) else {g: members[g] for g in pending}


def _carry_over(draft: Draft, previous: CyclePlan | None,
                by_id: Mapping[str, Gang]) -> list[Gang]:
    """Honour the previous plan: keep nominated capacity; return gangs that go first."""
    if previous is None:
        return []
    first: list[Gang] = []
    now, snapshot = draft.context.now, draft.snapshot
    for nom in previous.nominations:
        gang = by_id.get(nom.gang_id)
        if gang is None or now - nom.since > NOMINATION_TIMEOUT_SECONDS:
            continue
        alive = tuple(v for v in nom.victims if not nom.victim_gone(v, snapshot.running))
        if not alive:
            first.append(gang)  # the victims are gone: its turn comes before anyone else's
            continue
        draft.begin_turn(gang)
        draft.fold(gang, draft.context.policies.queues.queues[gang.queue],
                   _kept(draft, gang, nom, alive))
    for res in previous.reservations:
        gang = by_id.get(res.gang_id)
        if gang is not None and gang not in first and gang.id not in draft.pending:
            first.append(gang)
            # Its pools stay claimed until it is reconsidered: a gang considered before it
            # (a nominee that no longer fits, another reserved gang that may use several
            # pools) may not take its pool's reservation away meanwhile.
            draft.keep_claim(gang.id, res.pools)
    return first


def _kept(draft: Draft, gang: Gang, nom: Nomination, alive: tuple[str, ...]) -> Nominated:
    """Victims are still terminating: keep their nodes and the gang's quota."""
    charges = (None if nom.placement is None
               else placement_charges(gang, nom.placement, draft.snapshot))
    message = (awaiting_terminating(gang.id, alive, nom.nodes) if nom.inherited else
               f"waiting for {len(alive)} preempted gang(s) to terminate ({', '.join(alive)}); "
               f"nodes held: {', '.join(nom.nodes)}")
    if nom.placement is not None:  # its pods now (they may have been recreated)
        nom = replace(nom, pod_nodes=map_pods(gang, nom.placement))
    return Nominated(nom, message, charges=charges, evicting=alive, awaiting=alive)


__all__ = ["NOMINATION_TIMEOUT_SECONDS", "Policies", "Solver", "decide"]
