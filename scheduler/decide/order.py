"""The order in which ``decide`` considers gangs: lowest fair share first, re-ranked after
every admission, so one cycle already splits freed capacity by weight.

Within a queue: interactive gangs first, then priority, then age, then uid
(``fairshare.gang_key``). Across queues: the
queues' fair-share keys with their head gang (``fairshare.queue_key``), worked out again
whenever the ledger changes. Under FIFO ordering the queues play no part.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from policies import fairshare
from policies.queues import OrderingMode
from scheduler.model import Gang

#: Considers one gang of the named queue; True when that changed the quota ledger (the
#: queues' ranks are then worked out again).
Turn = Callable[[Gang, str], bool]
#: The fair-share key of a queue with this gang next.
Rank = Callable[[str, Gang], fairshare.QueueKey]


def in_order(by_queue: dict[str, list[Gang]], mode: OrderingMode, turn: Turn,
             rank: Rank) -> None:
    """Give every gang of *by_queue* its turn, in order."""
    if mode is OrderingMode.FIFO:
        # Queue keys play no part: the heap below would merge the queues by (gang key,
        # queue), each queue in the order of its list (equal gang keys last-in first); one
        # sort gives that merge at once.
        merged = sorted((fairshare.gang_key(g, mode), q, -i, g)
                        for q, gs in by_queue.items() for i, g in enumerate(gs))
        for _, name, _, gang in merged:
            turn(gang, name)
        return
    lists = {q: sorted(gs, key=lambda g: fairshare.gang_key(g, mode), reverse=True)
             for q, gs in by_queue.items() if gs}

    def entry(q: str, alone: bool) -> tuple[object, ...]:
        # A queue alone in the heap is compared with nothing: its rank is not worked out.
        head = lists[q][-1]
        key = () if alone else rank(q, head)
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
        if turn(gang, q):
            heap = ranked()
        elif lists[q]:
            heapq.heappush(heap, entry(q, not heap))
