"""A small world for one gang's turn: a ``Trial`` made without running a cycle.

``trial(gang, ...)`` builds the snapshot, the policies, the recall and memo, a ``Draft``
with its ledger (the running gangs charged), optional obstacles, and the gang's ``Trial``,
so a step of ``consider`` can be called on it directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from policies.queues import Queue
from policies.reservation import Reservation
from scheduler.decide.draft import Context, Draft
from scheduler.decide.memo import Memo
from scheduler.decide.obstacles import Obstacles
from scheduler.decide.recall import Recall
from scheduler.decide.trial import Trial
from scheduler.model import Gang, Node, RunningGang
from scheduler.world.snapshot import Snapshot
from tests.unit.policies import builders as b

#: Two nodes of 8 GPUs in pool "a" (one rack).
NODES = b.nodes("a", 2)
NOW = 1000.0


def draft(*, nodes: Sequence[Node] = NODES, running: Sequence[RunningGang] = (),
          queues: Sequence[Queue] = (), now: float = NOW,
          obstacles: Callable[[Obstacles], Obstacles] | None = None,
          **policy: Any) -> Draft:
    """The state at the start of a cycle (queue "q" with 16 GPUs of pool "a" unless
    *queues*), with *obstacles* applied to the obstacles at its start; *policy*: overrides
    of the scheduler policy."""
    policies = b.policies(*(queues or (b.queue("q", quota={"a": 16}),)), **policy)
    snapshot = Snapshot(nodes, running)
    recall = Recall(snapshot.index)
    tree = recall.tree(policies.queues)
    at_start = Obstacles.at_start(snapshot.terminating)
    return Draft(Context(policies, now, b.SOLVE, Memo(recall)), snapshot,
                 recall.ledger(tree, snapshot),
                 at_start if obstacles is None else obstacles(at_start))


def trial(gang: Gang, on: Draft | None = None, **world: Any) -> Trial:
    """*gang*'s turn on *on* (else a ``draft(**world)``)."""
    d = on if on is not None else draft(**world)
    return Trial(gang, d.context.policies.queues.queues[gang.queue], d)


def reservation(gang_id: str = "ns/starving", nodes: Sequence[str] = ("a-0000",),
                pool: str = "a", start: float = NOW + 600) -> Reservation:
    """A reservation of *nodes* in *pool* (no quota held)."""
    return Reservation(gang_id, tuple(nodes), start, pools=(pool,))


def reserved(r: Reservation) -> Callable[[Obstacles], Obstacles]:
    return lambda o: o.reserve(r)


def draining(*gang_ids: str) -> Callable[[Obstacles], Obstacles]:
    """Obstacles with *gang_ids* being evicted already (by an earlier plan)."""
    return lambda _: Obstacles.at_start(gang_ids)
