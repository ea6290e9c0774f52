"""One gang at a time: an ordered list of small steps, the first that decides gives the
``Outcome``.

    deferred -> behind a reservation -> remembered -> place -> await draining -> preempt
    -> reserve -> explain

- *deferred*: an ordering rule stops it before it is tried (backfill off and an earlier
  gang cannot start; its StrictFIFO queue's head cannot start: ``heads``); it reads only
  the obstacles, so it is taken before a ``Trial`` is made (most turns of a long queue end
  here);
- *behind a reservation*: its queue does not backfill past a reservation it concerns;
- *remembered*: a gang of its shape already failed against this very state (``Memo``);
- *place*: ``fit`` in the cycle's world, kept off nominated nodes and (EASY backfill) off
  reservations it would still be running at, with their quota set aside;
- *await draining*: it fits once gangs already terminating are gone: it waits for them;
- *preempt*: the cheapest proven set of victims lets it start: it evicts them and waits;
- *reserve*: it is starving and could start once running gangs end: nodes and an estimated
  start are kept for it;
- *explain*: why it waits.

A ``Trial`` (``trial``) keeps what the other steps read, each part worked out once when first asked
for; the steps only read it and the ``Draft``. The order in which gangs come here is
``cycle``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from policies.fit import Fit, World, fit
from policies.preemption import ledger_without, protected_until
from policies.queues import Queue
from policies.reservation import Reservation, reserve, starving
from scheduler.decide.draft import Draft
from scheduler.decide.heads import not_heading
from scheduler.decide.memo import FailureKey
from scheduler.decide.outcomes import (
    Bound,
    Nominated,
    Outcome,
    Provisioned,
    Reserved,
    Waiting,
)
from scheduler.decide.plan import (
    Eviction,
    Nomination,
    map_pods,
)
from scheduler.decide.recall import Shape
from scheduler.decide.trial import Footing, R, Trial, reserved_for, untouchable
from scheduler.model import Gang
from scheduler.model.elastic import draining, rank_key
from scheduler.model.release import Release
from scheduler.placement.types import PlacementParams


# The steps, in order ---------------------------------------------------------------------
def behind_reservation(t: Trial) -> Waiting | None:
    """Its queue does not backfill, and a reservation it could delay is in the way; a gang
    that could never start anyway is told that instead (as ``deferred``'s are)."""
    if not _held_behind(t.gang, t.queue, t.concern):
        return None
    return t.hopeless or Waiting(
        R.QUEUED, f"queue {t.queue.name} does not backfill; waits behind the reservation of "
        f"{' and '.join(r.gang_id for r in t.concern)}")


def remembered(t: Trial) -> Waiting | None:
    """A gang shaped exactly like one that already failed against this very state fails the
    same way, with the same reason."""
    key = _failure_key(t.draft, t.gang, t.queue, t.restricted, t.shape)
    hit = t.context.memo.failed(key)
    if hit is None:
        t.key = key  # not known yet: its outcome is remembered for the lookalikes after it
    return hit


def recalled(draft: Draft, gang: Gang, queue: Queue, footing: Footing) -> Waiting | None:
    """The outcome ``consider`` would give from ``remembered``, asked before a ``Trial`` is
    made (most turns of a backlog end there: lookalikes of a gang that already failed);
    None when an earlier step (``behind_reservation``) decides or nothing is remembered."""
    shape, concern, restricted = footing
    if concern and _held_behind(gang, queue, concern):
        return None  # ``behind_reservation`` decides: the trial's way
    return draft.context.memo.failed(_failure_key(draft, gang, queue, restricted, shape))


def _held_behind(gang: Gang, queue: Queue, concern: tuple[Reservation, ...]) -> bool:
    """Does ``behind_reservation`` hold the gang: a reservation it could delay, and a queue
    that does not backfill past one? Never an interactive gang (``policies.interactive``):
    it does not wait its turn behind the queue's batch work; it still keeps off the
    reserved nodes (``place``), so the reservation is not delayed by it."""
    return bool(concern) and not queue.queueing.backfill and not gang.interactive


def _failure_key(draft: Draft, gang: Gang, queue: Queue, restricted: tuple[Reservation, ...],
                 shape: Shape) -> FailureKey | None:
    context = draft.context
    return context.memo.failure_key(
        draft.epoch, gang, queue.name, restricted,
        starving(gang, queue, context.policies.scheduler, context.now), shape)


def place(t: Trial) -> Bound | Provisioned | None:
    """It fits: it binds, or (a claim shared across nodes) its claims are bound first."""
    attempt = t.attempt
    if not isinstance(attempt, Fit):
        return None
    return Provisioned(attempt) if attempt.placement.volumes_first else Bound(attempt)


def await_draining(t: Trial) -> Nominated | None:
    """Would the gang fit once the terminating gangs are gone? Then it waits for them like a
    preemptor for its victims and evicts nobody: after a failover the new leader has no
    plan saying whom they were for."""
    draft, gang = t.draft, t.gang
    if not (draft.obstacles.draining and gang.may_preempt and t.misfit.preemption_may_help):
        return None
    snapshot = draft.snapshot
    gone = [snapshot.running[g] for g in draft.obstacles.draining if g in snapshot.running]
    if not gone:
        return None
    # An elastic gang giving members back drains of those only (``elastic.draining``).
    releases = [Release.whole(rg) if (part := draining(rg)) is None
                else Release.of_pods(rg, part) for rg in gone]
    world = replace(t.search, ledger=ledger_without(t.ledger, releases, snapshot),
                    gone=tuple(releases))
    trial = fit(t.applicant, world)
    if not isinstance(trial, Fit):
        return None
    placement = trial.placement
    nodes = set(placement.nodes)
    waits = tuple(rg.id for rg in gone if nodes.intersection(rg.nodes)) or tuple(
        rg.id for rg in gone)
    nomination = Nomination(gang.id, placement.nodes, waits, t.context.now, placement,
                            inherited=True, pod_nodes=map_pods(gang, placement),
                            partial=tuple((r.id, r.pods) for r in releases
                                          if not r.is_whole and r.id in waits))
    return Nominated(nomination, awaiting_terminating(gang.id, waits, placement.nodes),
                     charges=trial.charges, awaiting=waits)


def preempt(t: Trial) -> Nominated | None:
    pre, gang = t.preemption, t.gang
    if pre is None or not gang.may_preempt:
        return None
    victims = tuple(v.id for v in pre.victims)
    who = f"interactive gang {gang.id}" if gang.interactive else gang.id
    evictions = tuple(Eviction(v.release, gang.id, f"{taken(v.release, who)} (priority "
                               f"{gang.priority}): {v.why}") for v in pre.victims)
    nodes = pre.placement.nodes
    nomination = Nomination(gang.id, nodes, victims, t.context.now, pre.placement,
                            pod_nodes=map_pods(gang, pre.placement),
                            partial=tuple((v.id, v.release.pods) for v in pre.victims
                                          if not v.release.is_whole))
    return Nominated(nomination, f"evicting {len(victims)} gang(s) ({', '.join(victims)}) to "
                     f"start on {', '.join(nodes)}; it binds once they are gone",
                     evictions, pre.charges, evicting=victims)


def taken(release: Release, who: str) -> str:
    """What an eviction says it takes: "preempted by ns/x" for a whole gang; for members
    above an elastic gang's minimum, which ones ("members e-2, e-3 above the gang's minimum
    2 are released for ns/x")."""
    if release.is_whole:
        return f"preempted by {who}"
    names = ", ".join(p.name for p in sorted(release.pods, key=rank_key))
    return (f"members {names} above the gang's minimum {release.running.min_member} are "
            f"released for {who}")


def reserve_nodes(t: Trial) -> Reserved | None:
    """A starving gang that could start once running gangs end gets a reservation: only in
    pools it may use with no reservation yet (nor claimed by a previously reserved gang,
    which counts against the cap too, so it keeps its turn), so the cycle's reservations stay
    one per pool, and a gang that may use several pools is not starved by single-pool gangs
    reserving in turn."""
    policy, obstacles, now = t.policy, t.draft.obstacles, t.context.now
    if (t.final is not None or not policy.reservation or not starving(t.gang, t.queue, policy, now)
            or obstacles.reservation_count >= policy.max_reservations):
        return None
    params = _unreserved(t)
    if params is None:
        return None
    draft, queues = t.draft, t.context.policies.queues
    world = World(draft.snapshot, draft.ledger, params, t.context.solver)
    early, leaving = _released_early(t)
    found = reserve(t.applicant, world, queues, now, early, leaving)
    if found is None:
        return None
    # The estimated start is the reason's own field, never in the message: a message that
    # counts down changes every cycle (a status write and an event each time).
    return Reserved(found, f"{t.message}; reserved {len(found.nodes)} node(s) and its quota "
                    f"until running gangs are expected to end or be reclaimed{t.never}",
                    blocks_queue=t.blocks_queue, blocks_all=t.blocks_all)


def explain(t: Trial) -> Waiting:
    final = t.final
    if final is not None:
        if t.blocks_queue and t.hopeless is not None:  # never fits: it blocks nobody
            return replace(final, message=final.message + t.never + not_heading(t.queue.name))
        return replace(final, message=final.message + t.never, blocks_queue=t.blocks_queue)
    message, policy = t.message, t.policy
    if policy.reservation and not starving(t.gang, t.queue, policy, t.context.now):
        message = (f"{message}; no reservation before it has been pending "
                   f"{t.queue.reserve_after(policy):.0f}s (reserveAfterSeconds)")
    category = t.category
    if t.restricted:
        category = R.QUEUED
        message = (f"{message}; the nodes and quota reserved for "
                   f"{reserved_for(t.restricted)} are not usable by a gang "
                   "that would still run then")
    return Waiting(category, message + t.never, blocks_queue=t.blocks_queue,
                   blocks_all=t.blocks_all)


#: The steps after ``deferred``, which is taken before the trial is made.
STEPS: tuple[Callable[[Trial], Outcome | None], ...] = (
    behind_reservation, remembered, place, await_draining, preempt, reserve_nodes, explain)


def consider(t: Trial) -> Outcome:
    """The outcome of the first step that decides."""
    for step in STEPS:
        outcome = step(t)
        if outcome is not None:
            return outcome
    raise AssertionError("explain decides every gang")  # pragma: no cover


def _unreserved(t: Trial) -> PlacementParams | None:
    """The base params without the nodes of pools with a reservation or are claimed by
    a previously reserved gang; None when that leaves none of the gang's pools."""
    taken = t.draft.obstacles.taken_pools()
    if not taken:
        return t.base
    if t.shape.pools <= taken:
        return None
    nodes = t.draft.snapshot.nodes_in(taken)
    return replace(t.base, excluded_nodes=t.base.excluded_nodes | nodes)


def _released_early(t: Trial) -> tuple[dict[str, float], dict[str, Release]]:
    """Running gangs that release their nodes and quota before their expected end, with
    when: gangs being evicted (by this plan or before it) at once, since the nodes their
    preemptors take are nominated and off limits anyway; and, when the gang may preempt,
    the gangs it could reclaim once their ``minRuntimeSeconds`` are over. Without the first,
    a gang estimated in the cycle that evicts what it waits for was promised the victims'
    expected ends (``benchmarks/bench_eta.py`` names that cause).

    An elastic gang losing only some members (a shrink under way, ``elastic.draining``, or
    decided by this plan) is the second mapping: those members go now, the rest runs on."""
    draft, now = t.draft, t.context.now
    released = (protected_until(t.applicant, draft.snapshot, t.ledger, t.context.policies.queues,
                                now, untouchable(draft)) if t.policy.preemption else {})
    shrinking = {e.release.id: e.release for e in draft.evictions if not e.release.is_whole}
    leaving: dict[str, Release] = {}
    for gid in draft.obstacles.terminating:
        rg = draft.snapshot.running.get(gid)
        if rg is None:
            continue
        part = shrinking.get(gid)
        if part is None and (pods := draining(rg)) is not None:
            part = Release.of_pods(rg, pods)
        if part is None:
            released[gid] = now
        else:
            leaving[gid] = part
    return released, leaving


def awaiting_terminating(gang_id: str, gangs: tuple[str, ...], nodes: tuple[str, ...]) -> str:
    """The reason of gang *gang_id* waiting for gangs evicted before this scheduler's plan
    (the same words on every cycle, whichever leader decided the evictions). One of them may
    be its own earlier members: a controller that recreates evicted pods while the old ones
    still terminate (a Job without ``podFailurePolicy``) makes its new pods the same gang as
    those leaving, which is no other gang to wait for."""
    others = tuple(g for g in gangs if g != gang_id)
    waits = [f"{len(others)} terminating gang(s) ({', '.join(others)}) to go"] if others else []
    if gang_id in gangs:
        waits.insert(0, "its own evicted members to finish terminating (its controller "
                        "recreated its pods while they leave; the new ones start whole once "
                        "the old ones are gone)")
    return (f"waiting for {' and '.join(waits)}, without evicting more; "
            f"nodes held: {', '.join(nodes)}")
