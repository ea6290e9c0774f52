"""The runaway guards in the cycle: evictions of gangs past their runtime, and gangs held by
a queue's budget or caps (the rules are ``policies.guards``).

Why a step of its own: guards are not about fitting. A gang past its ``maxRuntimeSeconds``
(counting its workload's earlier runs, ``Gang.ran_before``) is evicted whether or not
anyone waits for its nodes, through the plan's evictions like a preemption victim (the
same actuators, live and simulated), with a message that names the limit; it is then
terminating, so no preemptor picks it again and a gang that needs its
nodes waits for it to go. A queue over its GPU-hour budget or at its running cap starts
nothing; gangs beyond its pending cap are not considered at all. Each hold is a
``QueueLimit`` pending reason naming the guard; so is a gang whose workload used up its
runtime limit in earlier runs (``policies.guards.runtime_spent`` says why it is held rather
than started and evicted at once). Guards act under every scheduler policy
(``fifo-gang`` too): they are the queue's, not the ordering's.

``Guarded.of`` works out, once per cycle, what does not change while gangs are considered
(budget use, the pending caps, the gangs running per capped queue); ``held`` asks it on
each turn with the cycle's binds and nominations so far. Nothing is worked out without a
guard: a cycle without guards pays one check per turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from policies import guards as rules
from policies.guards import NO_USAGE, Guards, Run, Usage
from policies.queues import QueueSet
from scheduler.decide.outcomes import Waiting
from scheduler.decide.plan import Bind, Eviction, Nomination, ReasonCategory
from scheduler.kit.memo import Last
from scheduler.model import Gang, RunningGang
from scheduler.model.release import Release
from scheduler.world.snapshot import Snapshot

#: The ``preemptor`` of an eviction a guard decides: no gang asked for it (its message
#: names the guard; ``Eviction.headline``).
NO_PREEMPTOR = ""


def _guarded(queues: QueueSet) -> dict[str, Guards]:
    """The queues with guards (asked twice a cycle: worked out once per queue set)."""
    return _GUARDED.get(queues, lambda qs: {q.name: q.guards for q in qs if q.guards})


#: The last queue set and its guarded queues (a queue set is one object until the policies
#: change: ``scheduler.kit.memo.Last``).
_GUARDED: Last[QueueSet, dict[str, Guards]] = Last()


def _limited(snapshot: Snapshot, guarded: Mapping[str, Guards]) -> list[RunningGang]:
    """The running gangs a runtime limit may apply to, by id: all of them when a queue has
    ``maxRuntimeSeconds``, else only those with an annotation of their own (most cycles of
    most clusters: none, and nothing to look at)."""
    running = snapshot.running
    if any(g.max_runtime_seconds is not None for g in guarded.values()):
        return [rg for _, rg in sorted(running.items())]
    return [running[gid] for gid in sorted(snapshot.timed)]


def _path(queues: QueueSet, guarded: Mapping[str, Guards], name: str
          ) -> list[tuple[str, Guards]]:
    """The guarded queues from the root down to *name*."""
    return [(q, guarded[q]) for q in queues.path_of(name) if q in guarded]


def overruns(snapshot: Snapshot, queues: QueueSet, now: float,
             evicted: frozenset[str] = frozenset()) -> tuple[Eviction, ...]:
    """Running gangs past their runtime limit, to evict: not those already terminating, nor
    those the previous plan evicted (*evicted*: the watch may not show their pods leaving
    yet; one the apiserver refused is evicted again the cycle after)."""
    guarded = _guarded(queues)
    out = []
    for rg in _limited(snapshot, guarded):
        if rg.terminating or rg.id in evicted:
            continue
        limit = rules.runtime_limit(_path(queues, guarded, rg.gang.queue), rg.gang.max_runtime)
        ran = rg.gang.ran_before + now - rg.start_time
        if limit is not None and ran >= limit[0]:
            out.append(Eviction(Release.whole(rg), NO_PREEMPTOR,
                                rules.overrun_message(limit, ran, rg.gang.ran_before)))
    return tuple(out)


def limit_of(queues: QueueSet, gang: Gang) -> tuple[float, str] | None:
    """*gang*'s runtime limit and who sets it (its queues' ``maxRuntimeSeconds`` and its own
    annotation); None: it has none, and the runtime of its runs need not be kept."""
    return rules.runtime_limit(_path(queues, _guarded(queues), gang.queue), gang.max_runtime)


def runs(running: Iterable[RunningGang]) -> tuple[Run, ...]:
    """The running gangs as budget runs (their GPUs read through the demand seam)."""
    return tuple(Run(rg.gang.queue, rg.gang.gpus, rg.start_time) for rg in running)


@dataclass(frozen=True, slots=True)
class Guarded:
    """What holds gangs this cycle (see the module docstring)."""

    queues: QueueSet
    guarded: Mapping[str, Guards] = field(default_factory=dict)
    #: Queue -> why it starts nothing (its budget, or an ancestor's, is used up).
    over_budget: Mapping[str, str] = field(default_factory=dict)
    #: Gang id -> why it is not considered (a pending cap).
    beyond_cap: Mapping[str, str] = field(default_factory=dict)
    #: Capped queue -> gangs of its subtree running at the cycle's start (not terminating).
    running: Mapping[str, int] = field(default_factory=dict)
    #: Gangs with members bound already (a partly bound gang being completed): guards gate
    #: starts, and these have started; holding their rest would only roll them back.
    started: frozenset[str] = frozenset()
    #: Gang id -> why it is not started again: its workload used up its runtime limit in
    #: earlier runs (a queue's, or its own annotation's: held without queue guards too).
    spent: Mapping[str, Waiting] = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        """Something may hold a gang this cycle (else the cycle does not ask ``held``)."""
        return bool(self.guarded or self.spent)

    @classmethod
    def of(cls, snapshot: Snapshot, gangs: Sequence[Gang], queues: QueueSet, now: float,
           usage: Usage = NO_USAGE, leaving: frozenset[str] = frozenset()) -> Guarded:
        """*gangs*: the pending gangs about to be considered; *leaving*: running gangs
        evicted this cycle (they no longer count as running)."""
        guarded = _guarded(queues)
        ran_before = [g for g in gangs if g.ran_before]  # (most cycles: none)
        if not guarded and not ran_before:
            return cls(queues)
        started = frozenset(snapshot.running)
        spent = {g.id: hold for g in ran_before if g.id not in started
                 and (hold := _spent(g, _path(queues, guarded, g.queue))) is not None}
        if not guarded:
            return cls(queues, spent=spent, started=started) if spent else cls(queues)
        live = [rg for gid, rg in snapshot.running.items()
                if not rg.terminating and gid not in leaving]
        over: dict[str, str] = {}
        for name, use in budgets(snapshot, queues, usage, now, guarded).items():
            why = rules.over_budget(name, guarded[name], use.used_gpu_hours, now)
            if why is not None:
                over[name] = why
        capped = [q for q, g in guarded.items() if g.max_running_gangs is not None]
        counts = {q: sum(1 for rg in live if q in queues.path_of(rg.gang.queue))
                  for q in capped}
        return cls(queues, guarded, over,
                   _beyond_pending_caps([g for g in gangs if g.id not in started], queues,
                                        guarded), counts, started, spent)

    def held(self, gang: Gang, binds: Sequence[Bind], nominations: Sequence[Nomination],
             queue_of: Mapping[str, str]) -> Waiting | None:
        """Why *gang* may not start now, by a guard of its queue or an ancestor; None: no
        guard holds it. *binds* and *nominations*: this cycle's so far (they run, or will;
        the completion of a gang already running is no new one); *queue_of*: the queue of
        each gang considered."""
        if gang.id in self.started:
            return None
        spent = self.spent.get(gang.id)
        if spent is not None or not self.guarded:
            return spent
        path = self.queues.path_of(gang.queue)
        why = self.beyond_cap.get(gang.id)
        if why is None:
            why = next((self.over_budget[q] for q in path if q in self.over_budget), None)
        if why is None:
            for q in path:
                if q not in self.running:
                    continue
                started = sum(1 for b in binds if b.gang_id not in self.started
                              and q in self.queues.path_of(b.queue)) + sum(
                    1 for n in nominations
                    if n.gang_id in queue_of and q in self.queues.path_of(queue_of[n.gang_id]))
                why = rules.running_cap(q, self.guarded[q], self.running[q] + started)
                if why is not None:
                    break
        return None if why is None else Waiting(ReasonCategory.QUEUE_LIMIT, why)


def _spent(gang: Gang, path_guards: list[tuple[str, Guards]]) -> Waiting | None:
    """*gang* held: its workload ran its whole runtime limit in earlier runs (only a gang
    that ran before, ``Gang.ran_before``, is asked)."""
    if not gang.ran_before:
        return None
    why = rules.runtime_spent(gang.id, rules.runtime_limit(path_guards, gang.max_runtime),
                              gang.ran_before)
    return None if why is None else Waiting(ReasonCategory.QUEUE_LIMIT, why)


def budgets(snapshot: Snapshot, queues: QueueSet, usage: Usage, now: float,
            guarded: Mapping[str, Guards] | None = None) -> dict[str, rules.BudgetUse]:
    """Each budgeted queue's use of its budget this period (its subtree's ended runs and
    running gangs); empty without budgets. *guarded*: ``_guarded(queues)``, if at hand."""
    guarded = _guarded(queues) if guarded is None else guarded
    budgeted = {q: g.budget for q, g in guarded.items() if g.budget is not None}
    if not budgeted:
        return {}
    going = runs(snapshot.running.values())
    return {name: rules.budget_use(b, usage, going, _subtree(queues, name), now)
            for name, b in budgeted.items()}


def _subtree(queues: QueueSet, name: str) -> frozenset[str]:
    return frozenset(q.name for q in queues if name in queues.path_of(q.name))


def _beyond_pending_caps(gangs: Sequence[Gang], queues: QueueSet,
                         guarded: Mapping[str, Guards]) -> dict[str, str]:
    """Gangs past a pending cap of their queue or an ancestor, in arrival order (creation
    time, then the order the scheduler saw them in, then uid): the first
    ``maxPendingGangs`` are considered, the rest held. A held gang takes no place under the
    other caps of its path."""
    capped = {q for q, g in guarded.items() if g.max_pending_gangs is not None}
    if not capped:
        return {}
    taken = dict.fromkeys(capped, 0)
    out: dict[str, str] = {}
    # (A gang still waiting for members takes no place: it is not considered either way.)
    for gang in sorted((g for g in gangs if g.is_complete),
                       key=lambda g: (g.creation_time, g.arrival, g.uid)):
        path = [q for q in queues.path_of(gang.queue) if q in capped]
        why = next((w for q in path
                    if (w := rules.pending_cap(q, guarded[q], taken[q] + 1)) is not None), None)
        if why is not None:
            out[gang.id] = why
            continue
        for q in path:
            taken[q] += 1
    return out


def wake(snapshot: Snapshot, queues: QueueSet, guarded: Guarded, now: float) -> float | None:
    """The next time a guard acts with nothing else changing: a running gang reaches its
    runtime limit, or the budget period of a queue that holds gangs ends."""
    g = guarded.guarded
    times = []
    for rg in _limited(snapshot, g):
        if rg.terminating:
            continue
        limit = rules.runtime_limit(_path(queues, g, rg.gang.queue), rg.gang.max_runtime)
        at = rules.overrun_deadline(limit, rg.start_time - rg.gang.ran_before)
        if at is not None and at > now:
            times.append(at)
    if guarded.over_budget:
        end = rules.period_end({q: g[q] for q in guarded.over_budget}, now)
        if end is not None:
            times.append(end)
    return min(times, default=None)
