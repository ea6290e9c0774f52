"""``decide``: the one pure function that makes every scheduling decision.

    plan = decide(snapshot, pending_gangs, policies, now, previous)

Phases: (1) gangs that cannot be considered get a reason at once (members missing, queue
unknown or not theirs); (2) capacity promised by the previous plan is honoured first:
nominated preemptors whose victims are gone, then the previously reserved gangs; (3) the rest
in fair-share order, one gang at a time (``CycleState.consider``), re-ranking queues after
every admission so one cycle already splits freed capacity by weight; (4) the plan, with
per-queue status. No I/O, no clock, no randomness: the same input gives the same plan.
"""

from __future__ import annotations

import heapq
import operator
from collections.abc import Iterable, Mapping

from policies import fairshare
from policies.admission import placement_charges
from policies.queues import OrderingMode, PolicySet, Queue
from policies.quota import QuotaLedger
from scheduler import placement
from scheduler.cycle_memo import CycleMemo
from scheduler.cycle_state import CycleState, awaiting_terminating
from scheduler.model import Gang
from scheduler.placement.types import Solver
from scheduler.plan import (
    Bind,
    CyclePlan,
    Nomination,
    PendingReason,
    QueueStatus,
    ReasonCategory,
)
from scheduler.recall import Admissible, Recall
from scheduler.resources import Resources
from scheduler.snapshot import Snapshot

#: What ``decide`` takes as policies (the name the scheduler loop uses).
Policies = PolicySet

#: A nomination whose victims have not gone after this long is dropped (stuck pods).
NOMINATION_TIMEOUT_SECONDS = 900.0

_ID_UID = operator.attrgetter("id", "uid")


def decide(snapshot: Snapshot, pending_gangs: Iterable[Gang], policies: PolicySet, now: float,
           previous: CyclePlan | None = None, *, solver: Solver | None = None,
           recall: Recall | None = None) -> CyclePlan:
    """Decide binds, evictions, nominations, reservations (at most one per node pool) and
    reasons for one cycle."""
    solve = solver or placement.solve
    if recall is None:
        recall = Recall(snapshot.index)
    elif recall.index is not snapshot.index:
        raise ValueError("decide: the recall belongs to another set of nodes")
    queues = policies.queues
    tree = recall.tree(queues)
    gangs = sorted(pending_gangs, key=_ID_UID)
    if not gangs:
        # Nothing to decide: the previous plan's nominations and reservation lapse (they are
        # carried over only for gangs still pending); what is left is the queues' status.
        ledger0 = recall.ledger(tree, snapshot)
        return CyclePlan(now=now, statuses=lambda: _statuses(
            snapshot, ledger0, policies, (), {}, []))
    state = CycleState(snapshot, recall.ledger(tree, snapshot), policies, now, solve,
                       memo=CycleMemo(recall))
    # Gangs whose pods are already being deleted (an eviction under way, maybe decided by a
    # previous leader whose plan is lost): never victims again; see ``CycleState.draining``.
    draining = sorted(gid for gid, rg in snapshot.running.items() if rg.terminating)
    state.terminating.update(draining)
    state.draining = draining
    admissible: dict[str, list[Gang]] = {}
    # (The recall lives with the snapshot's nodes: a node change starts a fresh one, so a
    # minResources answer, which depends on the nodes, is never stale.)
    for gang, verdict in recall.admissible(queues, gangs,
                                           lambda g: _admissible_queue(state, g)):
        if isinstance(verdict, Queue):
            admissible.setdefault(verdict.name, []).append(gang)
        else:
            category, message = verdict
            state.wait(gang, category, message, ordered=False)
    by_id = {g.id: g for gs in admissible.values() for g in gs}
    first = _carry_over(state, previous, by_id)
    for gang in first:
        state.consider(gang, queues.queues[gang.queue])
    done = {g.id for g in first} | {n.gang_id for n in state.nominations}
    _in_order(state, {q: [g for g in gs if g.id not in done] for q, gs in admissible.items()})
    binds = tuple(state.binds)
    pending = dict(sorted(state.pending.items()))
    snapshot, ledger = state.snapshot, state.ledger
    return CyclePlan(
        now=now, binds=binds, evictions=tuple(state.evictions),
        nominations=tuple(sorted(state.nominations, key=lambda n: n.gang_id)),
        reservations=state.reservations,
        pending=pending,
        statuses=lambda: _statuses(snapshot, ledger, policies, binds, pending, gangs),
        order=tuple(state.order),
    )


def _min_resources_never(state: CycleState, gang: Gang) -> tuple[ReasonCategory, str] | None:
    """A gang still waiting for members whose PodGroup ``minResources`` exceed what the
    cluster has, or what its queue could ever hold in all its pools together: say so now,
    rather than after every member has been created (the coscheduling plugin's early check)."""
    want = gang.min_resources
    if want is None:
        return None
    capacity = state.snapshot.total_allocatable()
    over = [f"{want[r]} {r} asked, the cluster has {capacity.get(r)}"
            for r in sorted(want) if want[r] > capacity.get(r)]
    if over:
        return (ReasonCategory.PLACEMENT,
                f"PodGroup minResources can never be met: {', '.join(over)}; lower "
                "minResources or add nodes")
    queue = state.policies.queues.get(gang.queue)
    if queue is None or not _is_leaf(state, queue.name):
        return None  # the reason about the queue comes once the members exist
    idle = QuotaLedger.empty(state.ledger.tree)
    pools = state.ledger.tree.pools_of(queue.name)
    most: dict[str, int] = {}
    for pool in pools:
        for r, v in idle.available(queue.name, pool).items():
            most[r] = most.get(r, 0) + v
    over = [f"{want[r]} {r} asked, at most {most[r]} ever available"
            for r in sorted(want) if r in most and want[r] > most[r]]
    if not over:
        return None
    return (ReasonCategory.QUOTA,
            f"PodGroup minResources can never be admitted to queue {queue.name}, even with "
            f"every queue idle ({', '.join(over)} across pools {', '.join(pools)}): raise the "
            "queue's quota or borrowing limit, or lower minResources")


def _admissible_queue(state: CycleState, gang: Gang) -> Admissible:
    """The gang's queue, or why the gang cannot be considered (a reason, not ordered)."""
    queues = state.policies.queues
    present, needed = gang.members_present, gang.min_member
    if present < needed:
        never = _min_resources_never(state, gang)
        if never is not None:
            return never
        return (ReasonCategory.WAITING_FOR_MEMBERS,
                f"{present} of {needed} required members exist; the gang is considered "
                "once all of them do")
    queue = queues.get(gang.queue)
    if queue is None:
        known = ", ".join(queues.queues) or "none defined"
        return (ReasonCategory.NOT_ALLOWED,
                f"queue {gang.queue!r} does not exist; set label gangscheduler.io/queue to "
                f"one of: {known}")
    if not _is_leaf(state, queue.name):
        children = queues.children_of(queue.name)
        return (ReasonCategory.NOT_ALLOWED,
                f"queue {queue.name} is a parent queue and holds no gangs; submit to one of: "
                f"{', '.join(children)}")
    if not queue.admits_namespace(gang.namespace):
        allowed = ", ".join(queue.namespaces) or "none"
        return (ReasonCategory.NOT_ALLOWED,
                f"namespace {gang.namespace} may not submit to queue {queue.name} (allowed: "
                f"{allowed}); pick another queue or extend spec.namespaces")
    return queue


def _is_leaf(state: CycleState, name: str) -> bool:
    parents = state.memo.parents
    if parents is None:
        parents = state.memo.parents = frozenset(
            p[-2] for p in state.ledger.tree.paths.values() if len(p) > 1)
    return name not in parents


def _carry_over(state: CycleState, previous: CyclePlan | None,
                by_id: Mapping[str, Gang]) -> list[Gang]:
    """Honour the previous plan: hold nominated capacity; return gangs that go first."""
    if previous is None:
        return []
    first: list[Gang] = []
    for nom in previous.nominations:
        gang = by_id.get(nom.gang_id)
        if gang is None or state.now - nom.since > NOMINATION_TIMEOUT_SECONDS:
            continue
        alive = tuple(v for v in nom.victims if v in state.snapshot.running)
        if not alive:
            first.append(gang)  # the victims are gone: its turn comes before anyone else's
            continue
        _keep_nomination(state, gang, nom, alive)
    for res in previous.reservations:
        gang = by_id.get(res.gang_id)
        if gang is not None and gang not in first and gang.id not in state.pending:
            first.append(gang)
            # Its pools stay claimed until it is reconsidered: a gang considered before it
            # (a nominee that no longer fits, another reserved gang that may use several
            # pools) may not take its pool's reservation away meanwhile.
            state.claims[gang.id] = frozenset(res.pools)
    return first


def _keep_nomination(state: CycleState, gang: Gang, nom: Nomination,
                     alive: tuple[str, ...]) -> None:
    """Victims are still terminating: keep holding the nodes and the quota."""
    state.order.append(gang.id)
    state.draining = [g for g in state.draining if g not in alive]  # awaited already
    charges = (None if nom.placement is None
               else placement_charges(gang, nom.placement, state.snapshot))
    message = (awaiting_terminating(alive, nom.nodes) if nom.inherited else
               f"waiting for {len(alive)} preempted gang(s) to terminate ({', '.join(alive)}); "
               f"nodes held: {', '.join(nom.nodes)}")
    state.hold(gang, gang.queue, nom, alive, charges, message)


def _in_order(state: CycleState, by_queue: dict[str, list[Gang]]) -> None:
    """Consider gangs lowest fair-share queue first; re-rank queues after each admission."""
    mode = state.policies.scheduler.ordering
    if mode is OrderingMode.FIFO:
        # Queue keys play no part: the heap below would merge the queues by (gang key,
        # queue), each queue in the order of its list (equal gang keys last-in first); one
        # sort gives that merge at once.
        merged = sorted((fairshare.gang_key(g, mode), q, -i, g)
                        for q, gs in by_queue.items() for i, g in enumerate(gs))
        queues = state.policies.queues.queues
        for _, name, _, gang in merged:
            state.consider(gang, queues[name])
        return
    lists = {q: sorted(gs, key=lambda g: fairshare.gang_key(g, mode), reverse=True)
             for q, gs in by_queue.items() if gs}

    def entry(q: str, alone: bool) -> tuple[object, ...]:
        # A queue alone in the heap is compared with nothing: its rank is not worked out.
        head = lists[q][-1]
        key = () if alone else state.queue_key(q, head)
        return (key, fairshare.gang_key(head, mode), q)

    def ranked() -> list[tuple[object, ...]]:
        names = [name for name in sorted(lists) if lists[name]]
        heap = [entry(name, len(names) == 1) for name in names]
        heapq.heapify(heap)
        return heap

    heap = ranked()
    while heap:
        q = heapq.heappop(heap)[-1]
        assert isinstance(q, str)
        gang = lists[q].pop()
        before = state.ledger
        state.consider(gang, state.policies.queues.queues[q])
        if state.ledger is not before:
            heap = ranked()
        elif lists[q]:
            heapq.heappush(heap, entry(q, not heap))


def _statuses(snapshot: Snapshot, ledger: QuotaLedger, policies: PolicySet,
              binds: tuple[Bind, ...], pending: Mapping[str, PendingReason],
              gangs: list[Gang]) -> tuple[QueueStatus, ...]:
    """Per-queue status at the end of the cycle (*snapshot* and *ledger* after its binds)."""
    usage: dict[str, list[tuple[str, Resources]]] = {}
    for (queue, pool), res in sorted(snapshot.queue_usage.items()):
        usage.setdefault(queue, []).append((pool, res))
    running = snapshot.running_per_queue
    admitted: dict[str, int] = {}
    for b in binds:
        admitted[b.queue] = admitted.get(b.queue, 0) + 1
    waiting: dict[str, int] = {}
    for g in gangs:
        if g.id in pending:
            waiting[g.queue] = waiting.get(g.queue, 0) + 1
    out = []
    for name in policies.queues.queues:
        out.append(QueueStatus(
            name=name,
            usage=tuple(usage.get(name, ())),
            running=running.get(name, 0), admitted=admitted.get(name, 0),
            pending=waiting.get(name, 0),
            fair_share=fairshare.dominant_share(ledger, name),
        ))
    return tuple(out)


__all__ = ["NOMINATION_TIMEOUT_SECONDS", "Policies", "Solver", "decide"]
