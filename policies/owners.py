"""Fairness among a queue's own owners: one search of 1,000 trials does not starve the rest.

Why: a queue's share is divided among queues by fair share, but inside a queue gangs go by
priority and then age, so a user who submits 1,000 hyper-parameter trials at 9:00 holds the
queue's whole share until the last one has started, and a colleague's one run at 9:05 waits
behind all of them. With ``spec.queueing.ownerFairness`` the queue picks, among its gangs of
the best tier and priority still waiting, the oldest gang of the owner who holds the fewest of
its GPUs, counting what each owner runs at the cycle's start and what the cycle gives them
(``OwnerLine``). Priority and the interactive tier still come first: owner fairness only
reorders gangs that are otherwise equal.

The owner is who the queue's interactive rules say a gang belongs to
(``policies.interactive.user_of``: the queue's user label, JupyterHub's, else the
namespace): one notion of "user" for every per-user rule of a queue.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from policies import interactive
from policies.fairshare import GangKey
from policies.queues import Queue
from scheduler.model import Gang


def owner_of(gang: Gang, queue: Queue) -> str:
    """Who *gang* belongs to in *queue* (see the module docstring)."""
    return interactive.user_of(gang, queue.interactive.user_label)


def held_by_owner(running: Iterable[Gang], queue: Queue) -> Counter[str]:
    """GPUs each owner's running gangs of *queue* hold."""
    held: Counter[str] = Counter()
    for g in running:
        held[owner_of(g, queue)] += g.gpus
    return held


class OwnerLine:
    """A queue's waiting gangs, handed out owner-fairly: ``head`` is the next gang, ``pop``
    takes it, ``took`` counts what a gang was given for its owner.

    Each owner's gangs are kept in the queue's own order (*key*: tier, priority, age); the
    head is, over the owners' first gangs, the least by (tier, priority, GPUs its owner
    holds, age, uid). A scan over owners per turn: a queue has far fewer owners than gangs.
    """

    def __init__(self, gangs: Sequence[Gang], queue: Queue, held: Mapping[str, int],
                 key: Callable[[Gang], GangKey]) -> None:
        self.queue, self.key = queue, key
        self.held: Counter[str] = Counter(held)
        self._of: dict[str, list[Gang]] = {}
        for g in sorted(gangs, key=key, reverse=True):  # each owner's best gang last
            self._of.setdefault(owner_of(g, queue), []).append(g)
        self._head: tuple[str, Gang] | None = None

    def __bool__(self) -> bool:
        return bool(self._of)

    def _rank(self, owner: str, gang: Gang) -> tuple[object, ...]:
        tier, priority, *after = self.key(gang)  # age, arrival, uid
        return (tier, priority, self.held[owner], *after)

    def head(self) -> Gang:
        if self._head is None:
            owner = min(self._of, key=lambda o: self._rank(o, self._of[o][-1]))
            self._head = (owner, self._of[owner][-1])
        return self._head[1]

    def pop(self) -> Gang:
        gang = self.head()
        assert self._head is not None
        owner = self._head[0]
        self._of[owner].pop()
        if not self._of[owner]:
            del self._of[owner]
        self._head = None
        return gang

    def took(self, gang: Gang) -> None:
        """*gang* was given capacity: its owner holds that much more from now on."""
        self.held[owner_of(gang, self.queue)] += gang.gpus
        self._head = None
