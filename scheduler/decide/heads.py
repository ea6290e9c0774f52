"""Who waits behind whom: the ordering rules that defer gangs before they are tried.

Two rules make later gangs wait behind one that cannot start: with backfill off, everyone
waits behind the first gang that does not fit for lack of capacity (the *blocker*); in a
``StrictFIFO`` queue, the queue waits behind its first gang that cannot start (its *head*).
``Obstacles`` records them as the cycle goes (``Draft.fold``); ``deferred`` reads them.
A gang they stop is *deferred*: it gets its reason and no trial this cycle.

A gang that can never start (``Trial.hopeless``: a pod larger than any node it may use, the
nodes it may use together too small, a topology level no node has, or more than any quota
its queue could ever be given, every queue idle) is no head: waiting for it would block its
queue forever (a 1 x 16-GPU gang on 8-GPU nodes kept 8 GPUs idle behind it). It is told why
it can never start, and the gangs behind it are tried. This is Kueue's rule widened: a
``StrictFIFO`` ClusterQueue keeps a workload that does not fit at its head, except one it
can never admit (a namespace it does not select), which it sets aside as inadmissible
(``pkg/cache/queue/cluster_queue.go``, ``RequeueIfNotPresent``); here every reason no wait
can cure sets the gang aside. It is decided afresh each cycle, so the gang heads its queue
again as soon as a node or a quota change would let it fit. A gang that cannot start *now*
(capacity, quota in use, a reservation, claims not yet bound) still blocks its queue.
"""

from __future__ import annotations

from policies.queues import Queue
from scheduler.decide.draft import Draft
from scheduler.decide.outcomes import Waiting
from scheduler.decide.plan import ReasonCategory
from scheduler.kit.memo import Slot

R = ReasonCategory
#: (queue or "", the gang it waits behind) -> the outcome of the gangs deferred behind it.
DEFERRED: Slot[tuple[str, str], Waiting] = Slot("heads.deferred")


def deferred(draft: Draft, queue: Queue) -> Waiting | None:
    """Strict ordering rules that stop a gang before it is even tried (before its trial is
    made: they read only the obstacles and its queue). A gang that could never start anyway
    is told that instead (``trial.hopeless``, which ``cycle`` asks of a deferred gang)."""
    obstacles = draft.obstacles
    if not obstacles.ordering_blocks:
        return None
    # Every gang behind one blocker (or one queue's head) gets the same outcome: made once.
    # Looked up before made: no closure for the many hits (hundreds a cycle in a backlog).
    slots = draft.context.memo.slots
    table = slots.table(DEFERRED)
    blocker = obstacles.blocker
    if blocker is not None:
        key = ("", blocker)
        hit = table.get(key)
        return hit if hit is not None else slots.put(DEFERRED, key, Waiting(
            R.QUEUED, f"waits behind {blocker}, which does not fit yet (backfill is off)"))
    head = obstacles.heads.get(queue.name)
    if head is not None:
        key = (queue.name, head)
        hit = table.get(key)
        return hit if hit is not None else slots.put(DEFERRED, key, Waiting(
            R.QUEUED, f"queue {queue.name} is StrictFIFO and its head {head} cannot start yet"))
    return None


def not_heading(queue: str) -> str:
    """What the reason of a StrictFIFO queue's gang that can never start adds."""
    return (f"; queue {queue} is StrictFIFO, but a gang that can never start does not hold "
            "it: the gangs behind it are tried, and it heads the queue again once nodes or "
            "quotas change so that it could fit")
