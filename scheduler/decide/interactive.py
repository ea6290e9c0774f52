"""The per-user caps on interactive gangs in the cycle (the rules are
``policies.interactive``).

Why a step before the trial, like the guards: a cap is not about fitting. An interactive
gang whose user already holds their queue's ``maxGPUsPerUser`` or ``maxGangsPerUser`` waits
with a ``QueueLimit`` reason naming the user, what they hold and the cap, whatever room
there is; it blocks nobody. What a user holds is their running interactive gangs in the
queue (not those terminating or evicted this cycle) plus the interactive gangs of theirs
this cycle already bound or nominated.

``UserCaps.of`` works out once per cycle what each user holds at its start, and only when
some queue sets a cap: a cycle without caps pays one check per turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from policies import interactive as rules
from policies.interactive import NO_CAPS, Held, InteractivePolicy
from policies.queues import QueueSet
from scheduler.decide.outcomes import Waiting
from scheduler.decide.plan import Bind, Nomination, ReasonCategory
from scheduler.model import Gang
from scheduler.world.snapshot import Snapshot


def _capped(policy: InteractivePolicy) -> bool:
    return policy.max_gpus_per_user is not None or policy.max_gangs_per_user is not None


@dataclass(frozen=True, slots=True)
class UserCaps:
    """What holds interactive gangs this cycle (see the module docstring)."""

    #: Queue -> its caps, for the queues that set one.
    capped: Mapping[str, InteractivePolicy] = field(default_factory=dict)
    #: (queue, user) -> what the user's running interactive gangs hold at the cycle's start.
    running: Mapping[tuple[str, str], Held] = field(default_factory=dict)
    #: Gangs with members bound already: being completed, not started (as for the guards).
    started: frozenset[str] = frozenset()

    @classmethod
    def of(cls, snapshot: Snapshot, queues: QueueSet,
           leaving: frozenset[str] = frozenset()) -> UserCaps | None:
        """None when no queue caps its users (nothing to check on any turn)."""
        capped = {q.name: q.interactive for q in queues if _capped(q.interactive)}
        if not capped:
            return None
        running: dict[tuple[str, str], Held] = {}
        for gid, rg in snapshot.running.items():
            gang = rg.gang
            policy = capped.get(gang.queue)
            if policy is None or not gang.interactive or rg.terminating or gid in leaving:
                continue
            key = (gang.queue, rules.user_of(gang, policy.user_label))
            running[key] = running.get(key, Held()).plus(gang)
        return cls(capped, running, frozenset(snapshot.running))

    def held(self, gang: Gang, binds: Sequence[Bind], nominations: Sequence[Nomination],
             pending: Mapping[str, Gang]) -> Waiting | None:
        """Why interactive *gang* may not start now, by its user's cap in its queue; None: no
        cap holds it. *binds* and *nominations*: this cycle's so far; *pending*: the gangs
        considered this cycle, by id (what those binds and nominations are of)."""
        policy = self.capped.get(gang.queue, NO_CAPS)
        if not gang.interactive or policy is NO_CAPS or gang.id in self.started:
            return None
        user = rules.user_of(gang, policy.user_label)
        held = self.running.get((gang.queue, user), Held())
        for gid in [b.gang_id for b in binds if b.gang_id not in self.started] + [
                n.gang_id for n in nominations]:
            other = pending.get(gid)
            if (other is not None and other.interactive and other.queue == gang.queue
                    and rules.user_of(other, policy.user_label) == user):
                held = held.plus(other)
        why = rules.over_cap(gang, gang.queue, policy, user, held)
        return None if why is None else Waiting(ReasonCategory.QUEUE_LIMIT, why)
