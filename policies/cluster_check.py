"""A queue's quota checked against its cluster: pools no node carries, quotas no pool has.

Why not at validation: a Queue is valid on its own (its fields parse, its parent exists), and
the pools it names are a fact of the cluster, which changes. A quota for a pool whose nodes are
not there yet is legitimate (nodes join later; a pool is being drained), so these findings are
warnings that the leader writes as a Queue condition and logs, not refusals: the queue stays
in force. But an admin who mistyped a pool or added a zero deserves to be told, because such a
quota guarantees nothing while it still counts in the queue tree's arithmetic.

Pure: the caller hands the per-pool allocatable totals of the cycle's nodes.
"""

from __future__ import annotations

from collections.abc import Mapping

from policies.queues import Queue
from scheduler.model.resources import Resources, format_amount


def quota_warnings(queue: Queue, capacity: Mapping[str, Resources]) -> tuple[str, ...]:
    """Why *queue*'s quotas cannot be honoured on nodes whose pools have *capacity*.

    Each message names the field (``spec.quotas[pool=NAME]...``) and the reason; empty when
    every quota fits. *capacity* maps every pool that has nodes to their total allocatable.
    """
    known = ", ".join(sorted(capacity)) or "none"
    warnings: list[str] = []
    for quota in queue.quotas:
        field = f"spec.quotas[pool={quota.pool}]"
        pool = capacity.get(quota.pool)
        if pool is None:
            warnings.append(f"{field}.pool: no node carries pool {quota.pool!r} (pools with "
                            f"nodes: {known}); this quota guarantees nothing until it does")
            continue
        for resource in sorted(quota.covered):
            wanted, has = quota.nominal[resource], pool[resource]
            if wanted > has:
                warnings.append(
                    f"{field}.nominal.{resource}: {format_amount(resource, wanted)} is more "
                    f"than pool {quota.pool!r} has ({format_amount(resource, has)}); at most "
                    "that is guaranteed")
    return tuple(warnings)

