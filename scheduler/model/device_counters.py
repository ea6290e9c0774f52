"""Partitionable devices (DRA ``DRAPartitionableDevices``, beta and on by default in 1.36):
devices that take counters from a counter set their pool shares, such as a GPU's MIG devices.

A driver publishes each physical GPU as a counter set (``sharedCounters``: its memory and
compute slices) in a slice of its own, and each way of using it as a device that consumes
some of those counters (``consumesCounters``): the whole GPU takes all of them, a MIG
device its part. Allocating a device consumes its counters from its pool's sets, and the
counters taken by every allocated device (any claim's, kube-scheduler's too) never exceed
a set's values: that is how a whole GPU and the MIG devices of the same GPU exclude each
other without either naming the other.

The rules follow the upstream allocator (``dynamic-resource-allocation/structured``,
``internal/incubating`` at v0.36.3): a pool whose counter set names repeat, or whose device
consumes a set or a counter that does not exist, is invalid; a device allocated once
(whole, or by any share of a shareable device) takes its counters once; a device fits when,
with its counters added to those the search took so far, every counter of every set of the
pool is still within what the cluster's allocated devices leave.

One place for the rule: the search's bookkeeping (``scheduler.placement.device_counting``)
asks ``left`` once per pool and ``shortfall`` per device, whose reason names the set (the
GPU), the device and the counter; the GPU-equivalents a claim counts for ask
``partition_fraction``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from scheduler.model.device_capacity import amount_text
from scheduler.model.devices import Counters, CounterSet, Device

#: Counter set name -> counter name -> amount: what a pool's sets hold, or what some
#: devices take of them.
Usage = dict[str, dict[str, Fraction]]


def capacities(sets: Iterable[CounterSet]) -> Usage:
    """The values of a pool's counter sets, by set and counter."""
    return {s.name: dict(s.counters) for s in sets}


def pool_problem(sets: Iterable[CounterSet], devices: Iterable[Device]) -> str:
    """Why a pool's counters make it invalid ("" when they do not): a counter set name
    given twice, or a device consuming from a set or a counter the pool does not have."""
    known: dict[str, frozenset[str]] = {}
    for s in sets:
        if s.name in known:
            return f"duplicate counter set name {s.name}"
        known[s.name] = frozenset(name for name, _ in s.counters)
    for device in devices:
        for set_name, counters in device.consumes:
            if set_name not in known:
                return f"device {device.name}: counter set {set_name} not found"
            for name, _ in counters:
                if name not in known[set_name]:
                    return (f"device {device.name}: counter {name} not found in counter set "
                            f"{set_name}")
    return ""


def add(usage: Usage, consumes: Iterable[tuple[str, Counters]], sign: int = 1) -> None:
    """Add (``sign`` 1) or take back (-1) what a device consumes to *usage*, in place."""
    for set_name, counters in consumes:
        into = usage.setdefault(set_name, {})
        for name, amount in counters:
            into[name] = into.get(name, Fraction(0)) + sign * amount


def left(sets: Mapping[str, Mapping[str, Fraction]],
         allocated: Mapping[str, Mapping[str, Fraction]]) -> tuple[Usage, str]:
    """What the cluster's *allocated* devices leave of a pool's counter *sets*, and why no
    device of the pool can be had at all ("" when one can): upstream checks every counter
    of every set of the pool for each device, so a set already over-consumed (a driver that
    shrank it) blocks the whole pool. Worked out once, so that each device after it only
    needs its own sets checked (``shortfall``)."""
    free: Usage = {}
    for set_name, counters in sorted(sets.items()):
        used = allocated.get(set_name, {})
        free[set_name] = {name: value - used.get(name, Fraction(0))
                          for name, value in counters.items()}
        for name, amount in sorted(free[set_name].items()):
            if amount < 0:
                return free, (f"{set_name}: {name} is over-consumed ("
                              f"{amount_text(counters[name] - amount)} of "
                              f"{amount_text(counters[name])} taken)")
    return free, ""


def shortfall(device: Device, sets: Mapping[str, Mapping[str, Fraction]],
              free: Mapping[str, Mapping[str, Fraction]],
              chosen: Mapping[str, Mapping[str, Fraction]]) -> str | None:
    """Why *device* does not fit beside the counters this search has *chosen*, in what the
    cluster leaves *free* of its pool's counter *sets* (``left``); None: it fits. The
    reason names the set (the GPU), the device, the counter and the amounts."""
    for set_name, wanted in device.consumes:
        mine = chosen.get(set_name, {})
        for name, want in wanted:
            room = free[set_name][name] - mine.get(name, Fraction(0))
            if want > room:
                return (f"{set_name}: device {device.name} needs {amount_text(want)} {name}, "
                        f"{amount_text(max(room, Fraction(0)))} of "
                        f"{amount_text(sets[set_name][name])} free")
    return None


def partition_fraction(device: Device,
                       sets: Mapping[str, Mapping[str, Fraction]]) -> Fraction | None:
    """The largest fraction of a counter of its sets that *device* consumes: what one
    allocated partition counts for of its whole GPU (a 3g.40gb MIG device on a GPU of 7
    compute and 8 memory slices takes 3/7 of one and 4/8 of the other: it counts for half a
    GPU, since the rest of the GPU cannot give a whole half any more). None when it consumes
    nothing countable (then it counts whole)."""
    fractions = [amount / sets[set_name][name]
                 for set_name, counters in device.consumes
                 for name, amount in counters
                 if sets.get(set_name, {}).get(name)]
    return max(fractions, default=None)
