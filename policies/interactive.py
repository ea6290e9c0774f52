"""Interactive work: notebooks and debugging sessions beside batch, in the same queues.

A gang is interactive when its pods carry ``gangscheduler.io/tier: interactive``
(``scheduler.model.Tier``, read by the feed). Someone waits at it, so:

- it is considered before the batch gangs of its queue (``order_key``): no batch backlog,
  reservation queue or backfill rule makes it wait its turn;
- it outranks every batch gang in the victim rules its queue already has (``outranks``):
  where ``withinQueue: LowerPriority`` or ``reclaimFromOthers: LowerPriority`` would let a
  gang of higher priority preempt, an interactive gang may preempt batch work whatever the
  priorities;
- no batch gang ever preempts it (``shielded``), whatever its priority and whatever the
  reclaim policy (``Any`` included). Another interactive gang may, under the usual rules,
  and the runaway guards (``maxRuntimeSeconds``) still evict it: they are no preemptor.

A queue's ``spec.interactive`` caps what one user may hold at once in that queue
(``maxGPUsPerUser``, ``maxGangsPerUser``); a gang over its user's cap waits with a
``QueueLimit`` reason (``over_cap``). Without it, interactive gangs are not capped per user
(quota still bounds the queue). The user is a label on the gang's pods (``user_of``).

The rule that a batch preemptor may not take an interactive gang is ``shielded``, asked
in one place of the candidate rules (``policies.preemption.victim_reason``) and in their
mirror (``could_preempt_back``). With no interactive gang every rule here answers as if
the tier did not exist: ``outranks`` is the priority comparison, ``order_key`` a constant.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.model import Gang
from scheduler.model.workloads import JUPYTERHUB_USER_LABEL, USER_LABEL


@dataclass(frozen=True, slots=True)
class InteractivePolicy:
    """A queue's ``spec.interactive``: per-user caps on its interactive gangs (None: no cap)
    and the label that names the user."""

    max_gpus_per_user: int | None = None
    max_gangs_per_user: int | None = None
    user_label: str = USER_LABEL


#: No ``spec.interactive``: interactive gangs are allowed, without a per-user cap.
NO_CAPS = InteractivePolicy()


#: The order of a gang's tier, by ``Gang.interactive``: interactive gangs (0) before batch
#: ones (1). A lookup rather than a call, for ``fairshare.gang_key`` (asked on every turn).
ORDER: dict[bool, int] = {True: 0, False: 1}


def order_key(gang: Gang) -> int:
    """Sorts a queue's interactive gangs before its batch gangs (0 before 1)."""
    return ORDER[gang.interactive]


def outranks(gang: Gang, other: Gang) -> bool:
    """Does *gang* rank above *other* for the victim rules that ask for a lower priority?
    Interactive above batch, then priority."""
    return (gang.interactive, gang.priority) > (other.interactive, other.priority)


def shielded(victim: Gang, preemptor: Gang) -> bool:
    """May *preemptor* never take *victim*, whatever the queue's rules? An interactive gang
    is never a batch gang's victim."""
    return victim.interactive and not preemptor.interactive


def victim_why(victim: Gang, preemptor: Gang, queue: str) -> str:
    """Why *victim* yields to *preemptor* within *queue* (the eviction's and event's words)."""
    if preemptor.interactive and not victim.interactive:
        return f"batch gang preempted for interactive gang {preemptor.id} in queue {queue}"
    return f"lower priority ({victim.priority} < {preemptor.priority}) in queue {queue}"


def user_of(gang: Gang, label: str = USER_LABEL) -> str:
    """Who *gang* belongs to: its pods' *label*, else JupyterHub's user label, else its
    namespace (one user per namespace is the common case without either label). Read from
    the labels every member of a role carries alike (``Role.labels``)."""
    for key in (label, JUPYTERHUB_USER_LABEL):
        for role in gang.roles:
            value = role.labels.get(key)
            if value:
                return value
    return gang.namespace


@dataclass(frozen=True, slots=True)
class Held:
    """What one user holds in one queue: interactive GPUs and gangs (running or starting)."""

    gpus: int = 0
    gangs: int = 0

    def plus(self, gang: Gang) -> Held:
        return Held(self.gpus + gang.gpus, self.gangs + 1)


def held_of(gangs: Iterable[Gang]) -> Held:
    held = Held()
    for g in gangs:
        held = held.plus(g)
    return held


def over_cap(gang: Gang, queue: str, policy: InteractivePolicy, user: str,
             held: Held) -> str | None:
    """Why interactive *gang* of *user* may not start in *queue*, which holds *held* for that
    user already (None: it may). A gang larger than the GPU cap alone is told it can never
    start, rather than to wait for its user's other gangs."""
    cap = policy.max_gpus_per_user
    if cap is not None and gang.gpus > cap:
        return (f"interactive gang of user {user} asks for {gang.gpus} GPU(s), more than the "
                f"{cap} each user may hold in queue {queue} (spec.interactive.maxGPUsPerUser): "
                "it can never start there")
    if cap is not None and held.gpus + gang.gpus > cap:
        return (f"user {user} already runs {held.gpus} interactive GPU(s) of {cap} allowed in "
                f"queue {queue} (spec.interactive.maxGPUsPerUser); this gang asks for "
                f"{gang.gpus} more and starts when one of theirs ends")
    most = policy.max_gangs_per_user
    if most is not None and held.gangs + 1 > most:
        return (f"user {user} already runs {held.gangs} interactive gang(s) of {most} allowed "
                f"in queue {queue} (spec.interactive.maxGangsPerUser); this gang starts when "
                "one of theirs ends")
    return None
