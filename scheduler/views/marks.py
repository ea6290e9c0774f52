"""How each node's GPUs are marked in the views: allocated to which queue (and on borrowed quota),
other pods', reserved, stranded, free. One rule for both sources, so the scheduler's own view
and the one read through the apiserver mark the same cluster the same way.

What is free, reserved or stranded is ``scheduler.report.accounting``'s (the rule the metrics use);
which allocated GPUs are borrowed comes from the queue rows: a leaf queue's GPUs above its quota in
a pool (``QueuePool.borrowed``) are marked on its nodes of that pool, in node name order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from scheduler.report.accounting import NodeGpus
from scheduler.views.state import NodeRow, QueueRow


def node_rows(nodes: Iterable[NodeGpus], queues: Sequence[QueueRow]) -> tuple[NodeRow, ...]:
    """The grid's rows, by pool then name: *nodes* as accounted after a cycle (or a read),
    borrowed GPUs marked from *queues*."""
    parents = {q.parent for q in queues}
    left = {(q.name, p.pool): p.borrowed for q in queues if q.name not in parents
            for p in q.pools if p.borrowed > 0}
    rows = []
    for n in sorted(nodes, key=lambda n: n.name):
        borrowed = 0
        for queue, gpus in n.allocated:
            take = min(gpus, left.get((queue, n.pool), 0))
            if take:
                left[(queue, n.pool)] -= take
                borrowed += take
        rows.append(NodeRow(
            name=n.name, pool=n.pool, gpus=n.total, used=n.allocated,
            other=max(0, n.total - n.free - sum(v for _, v in n.allocated)), free=n.free,
            reserved=n.reserved, stranded=n.stranded, borrowed=borrowed))
    return tuple(sorted(rows, key=lambda r: (r.pool, r.name)))
