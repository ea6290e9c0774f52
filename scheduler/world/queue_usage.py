"""What the running gangs of each queue use per pool, kept as snapshots are derived.

The quota ledger and the per-queue tallies read the usage per (queue, pool) and the number of
running gangs per queue. Summing every running gang for each would cost a cycle as much as
the cluster is large; instead a derived snapshot takes the charges of the gangs it adds or
removes (their own nodes only) off a copy of its parent's figures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduler.model import Node, RunningGang
from scheduler.model.resources import EMPTY, Resources


class QueueUsage:
    """(queue, pool) -> usage (zero usage absent) and queue -> running gangs (none absent).

    Not to be changed once built: ``moved`` gives a new one.
    """

    __slots__ = ("count", "usage")

    def __init__(self, usage: dict[tuple[str, str], Resources], count: dict[str, int]) -> None:
        self.usage = usage
        self.count = count

    @classmethod
    def of(cls, running: Iterable[RunningGang], nodes: Mapping[str, Node]) -> QueueUsage:
        """The figures of these running gangs on *nodes*."""
        usage: dict[tuple[str, str], Resources] = {}
        count: dict[str, int] = {}
        for rg in running:
            _charge(usage, count, rg, nodes, 1)
        return cls(usage, count)

    def moved(self, nodes: Mapping[str, Node], removed: Iterable[RunningGang] = (),
              added: Iterable[RunningGang] = ()) -> QueueUsage:
        """These figures with *removed* taken off, then *added* charged (in their order)."""
        usage, count = dict(self.usage), dict(self.count)
        for rg in removed:
            _charge(usage, count, rg, nodes, -1)
        for rg in added:
            _charge(usage, count, rg, nodes, 1)
        return QueueUsage(usage, count)


def _charge(usage: dict[tuple[str, str], Resources], count: dict[str, int], rg: RunningGang,
            nodes: Mapping[str, Node], sign: int) -> None:
    """Add (sign 1) or remove (-1) *rg* to the per-(queue, pool) usage and per-queue count."""
    queue = rg.gang.queue
    n = count.get(queue, 0) + sign
    if n:
        count[queue] = n
    else:
        count.pop(queue, None)
    for name, res in rg.charges:
        node = nodes.get(name)
        if node is None:
            continue
        key = (queue, node.pool)
        now = usage.get(key)
        new = (res if sign > 0 else EMPTY - res) if now is None else (
            now + res if sign > 0 else now - res)
        if new:
            usage[key] = new
        else:
            usage.pop(key, None)
