"""One node search's counter bookkeeping for partitionable devices (``device_counters``).

What the cluster's allocated devices take of each pool's counter sets is worked out once
per pool and search, from the pool's consuming devices that are allocated: held whole by
some claim (``taken``, which in a gang's search also holds what its members on earlier
nodes took) or shared by some claim (``consumed``), each once, as upstream's
``IsDeviceAllocated`` counts them. What this search chooses is added and taken back as it
walks and backtracks.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from scheduler.model.device_counters import Usage, add, capacities, left, shortfall
from scheduler.model.devices import DeviceId
from scheduler.placement.device_pools import NodeDevices, Offered, PoolView

#: (driver, pool): counters are a pool's.
PoolKey = tuple[str, str]


@dataclass(slots=True)
class CounterBook:
    """Counters of one node's pools: their values, the cluster's use, this search's use."""

    node: NodeDevices
    taken: Container[DeviceId]
    consumed: Mapping[DeviceId, Mapping[str, Fraction]]
    sets: dict[PoolKey, Usage] = field(default_factory=dict)
    #: What the cluster's allocated devices leave of each set, and why nothing of the pool
    #: can be had ("" when something can).
    free: dict[PoolKey, Usage] = field(default_factory=dict)
    blocked: dict[PoolKey, str] = field(default_factory=dict)
    chosen: dict[PoolKey, Usage] = field(default_factory=dict)

    def _pool(self, key: PoolKey) -> PoolView | None:
        for pool in self.node.pools:
            if (pool.driver, pool.pool) == key:
                return pool
        return None

    def _load(self, key: PoolKey) -> None:
        pool = self._pool(key)
        self.sets[key] = capacities(pool.counter_sets) if pool is not None else {}
        used: Usage = {}
        for did, device in pool.consumers if pool is not None else ():
            if did in self.taken or did in self.consumed:
                add(used, device.consumes)
        self.free[key], self.blocked[key] = left(self.sets[key], used)
        self.chosen[key] = {}

    def shortfall(self, o: Offered) -> str | None:
        """Why *o*'s counters do not fit beside the cluster's and this search's (None: they
        do, or it consumes none)."""
        if not o.device.consumes:
            return None
        key = (o.id.driver, o.id.pool)
        if key not in self.sets:
            self._load(key)
        if self.blocked[key]:
            return self.blocked[key]
        return shortfall(o.device, self.sets[key], self.free[key], self.chosen[key])

    def reserve(self, o: Offered, sign: int = 1) -> None:
        """Take *o*'s counters for this search (``sign`` -1: give them back)."""
        add(self.chosen[(o.id.driver, o.id.pool)], o.device.consumes, sign)
