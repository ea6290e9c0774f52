"""The order in which ``decide`` considers gangs: lowest fair share first, re-ranked after
every admission, so one cycle already splits freed capacity by weight.

Within a queue: interactive gangs first, then priority, then age, then uid
(``fairshare.gang_key``); in a queue with owner fairness, among equals, the owner who holds
the least goes first (``policies.owners``). Across queues: the
queues' fair-share keys with their head gang (``fairshare.queue_key``), worked out again
whenever the ledger changes. Under FIFO ordering the queues play no part.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from functools import partial

from policies import fairshare, owners
from policies.owners import OwnerLine
from policies.queues import OrderingMode, QueueSet
from scheduler.model import Gang
from scheduler.world.snapshot import Snapshot

#: Considers one gang of the named queue; True when that changed the quota ledger (the
#: queues' ranks are then worked out again).
Turn = Callable[[Gang, str], bool]
#: The fair-share key of a queue with this gang next.
Rank = Callable[[str, Gang], fairshare.QueueKey]


def in_order(by_queue: dict[str, list[Gang]], mode: OrderingMode, turn: Turn,
             rank: Rank, owner_fair: Mapping[str, Callable[[list[Gang]], OwnerLine]]
             | None = None) -> None:
    """Give every gang of *by_queue* its turn, in order. *owner_fair*: for each queue with
    owner fairness, what makes its ``OwnerLine`` of gangs (fair-share ordering only)."""
    owner_fair = owner_fair or {}
    if mode is OrderingMode.FIFO:
        # Queue keys play no part: the heap below would merge the queues by (gang key,
        # queue), each queue in the order of its list (equal gang keys last-in first); one
        # stable sort by gang key gives that merge at once, of the queues by name, each list
        # reversed (every cycle of a long backlog: only the gang keys are compared).
        merged = [(g, q) for q in sorted(by_queue) for g in reversed(by_queue[q])]
        merged.sort(key=lambda entry: fairshare.gang_key(entry[0], mode))
        for gang, name in merged:
            turn(gang, name)
        return
    lists = {q: sorted(gs, key=lambda g: fairshare.gang_key(g, mode), reverse=True)
             for q, gs in by_queue.items() if gs and q not in owner_fair}
    # Queues with owner fairness hand their gangs out through an OwnerLine; the others pop
    # a sorted list (the hot path of a long simulation: no wrapper around it).
    lines = {q: owner_fair[q](gs) for q, gs in by_queue.items() if gs and q in owner_fair}

    def head_of(q: str) -> Gang:
        return lines[q].head() if q in lines else lists[q][-1]

    def left(q: str) -> bool:
        return bool(lines[q]) if q in lines else bool(lists[q])

    def entry(q: str, alone: bool) -> tuple[object, ...]:
        # A queue alone in the heap is compared with nothing: its rank is not worked out.
        head = head_of(q)
        key = () if alone else rank(q, head)
        return (key, fairshare.gang_key(head, mode), q)

    def ranked() -> list[tuple[object, ...]]:
        names = [name for name in sorted((*lists, *lines)) if left(name)]
        heap = [entry(name, len(names) == 1) for name in names]
        heapq.heapify(heap)
        return heap

    heap = ranked()
    while heap:
        q = heapq.heappop(heap)[-1]
        assert isinstance(q, str)
        line = lines.get(q)
        gang = line.pop() if line is not None else lists[q].pop()
        if turn(gang, q):
            if line is not None:
                line.took(gang)
            heap = ranked()
        elif left(q):
            heapq.heappush(heap, entry(q, not heap))


def owner_lines(snapshot: Snapshot, queues: QueueSet, mode: OrderingMode,
                leaving: frozenset[str]) -> dict[str, Callable[[list[Gang]], OwnerLine]]:
    """For each queue with owner fairness, what makes its ``OwnerLine``: each owner starts
    with the GPUs its running gangs of the queue hold (not those already leaving). Empty
    when no queue asks for it, or under FIFO, which is arrival order by definition."""
    fair = [q for q in queues if q.queueing.owner_fairness]
    if not fair or mode is OrderingMode.FIFO:
        return {}

    def key(g: Gang) -> fairshare.GangKey:
        return fairshare.gang_key(g, mode)

    out: dict[str, Callable[[list[Gang]], OwnerLine]] = {}
    for q in fair:
        running = [rg.gang for gid, rg in snapshot.running.items()
                   if rg.gang.queue == q.name and not rg.terminating and gid not in leaving]
        held = owners.held_by_owner(running, q)
        out[q.name] = partial(OwnerLine, queue=q, held=held, key=key)
    return out
