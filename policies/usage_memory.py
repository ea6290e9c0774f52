"""Fair share with memory: what queues borrowed in the past, decayed, counted in their rank.

Without memory the fair-share rank (``fairshare.queue_key``) looks only at what runs now, so
a team that borrowed 500 GPUs all week and a team that borrowed nothing are equal on Monday.
With a half-life *h* (``SchedulerPolicy.usage_half_life_seconds``; 0 turns it off) each
queue also carries its *remembered usage*: the GPU-seconds its subtree borrowed beyond its
own quota, each second weighted by ``2 ** (-age / h)`` (Slurm's decayed usage, in GPUs).

Why borrowed GPUs, not all GPUs: quota within a queue's nominal is guaranteed (admission and
reclaim never look at shares), and fairness only divides what queues borrow from their
parent. What a queue ran inside its own quota took nothing from its siblings, so it is not
held against it; what it borrowed is. GPUs are GPU-equivalents read through the demand seam
(``scheduler.model.demand.gpus_of`` of a charge), so a device claim counts like a GPU.

The rank a queue is compared by, when its head gang would borrow (its current share > 0), is

    current share + remembered share,
    remembered share = U / (tau * C) / weight,     tau = h / ln 2

where U is the remembered GPU-seconds, C the GPUs of its parent's subtree quota (over the
pools of its tree) and tau the mean age of a decayed second. A queue that borrowed b GPUs
for ever remembers ``U = b * tau``, so its remembered share is ``b / C / weight``: the same
scale as its current share (``fairshare.dominant_share``), an exponentially weighted
average of its past shares. A queue within its guarantee keeps a rank of 0, memory or not:
remembered usage never makes a queue wait for its own quota (which would only end in a
reclaim). Off (h = 0), or with nothing remembered, every rank is exactly today's.

The decision stays pure: the memory is a value (``UsageMemory``) passed to ``decide``, which
decays it to its own ``now`` (``shares``); the scheduler loop keeps the next one, fed by
each cycle's usage (``scheduler.run.usage``), live and simulated alike. Between two
observations the borrowed GPUs are taken as constant, and the integral of a constant rate
is exact, so the result does not depend on how often cycles run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from policies.quota import QuotaTree
from scheduler.model.demand import gpus_of
from scheduler.model.resources import GPU, Resources

_NOTHING: Mapping[str, float] = MappingProxyType({})


def decay(elapsed: float, half_life: float) -> float:
    """The weight left after *elapsed* seconds: 1/2 after one half-life, 1/4 after two."""
    if elapsed <= 0:
        return 1.0
    return 2.0 ** (-elapsed / half_life)


def mean_life(half_life: float) -> float:
    """tau = h / ln 2: the remembered GPU-seconds of one GPU borrowed for ever."""
    return half_life / math.log(2)


def decayed(remembered: float, rate: float, elapsed: float, half_life: float) -> float:
    """*remembered* GPU-seconds *elapsed* seconds later, with *rate* GPUs borrowed meanwhile:
    ``U * f + rate * tau * (1 - f)``, f = ``decay(elapsed)``, the exact integral of a
    constant rate (so two steps of t give what one step of 2t gives)."""
    if elapsed <= 0:
        return remembered
    f = decay(elapsed, half_life)
    return remembered * f + rate * mean_life(half_life) * (1.0 - f)


@dataclass(frozen=True, slots=True)
class UsageMemory:
    """Remembered GPU-seconds per queue (its whole subtree) as of ``as_of``, and the GPUs
    each borrowed from then on (``rates``, until the next observation)."""

    as_of: float | None = None  # None: nothing observed yet
    gpu_seconds: Mapping[str, float] = field(default_factory=lambda: _NOTHING)
    rates: Mapping[str, float] = field(default_factory=lambda: _NOTHING)

    def at(self, now: float, half_life: float) -> dict[str, float]:
        """Remembered GPU-seconds per queue at *now* (the rates held since ``as_of``)."""
        if self.as_of is None or half_life <= 0:
            return {}
        elapsed = now - self.as_of
        names = set(self.gpu_seconds) | set(self.rates)
        out = {q: decayed(self.gpu_seconds.get(q, 0.0), self.rates.get(q, 0.0), elapsed,
                          half_life) for q in sorted(names)}
        return {q: v for q, v in out.items() if v > 0}

    @classmethod
    def restored(cls, saved: Mapping[str, tuple[float, float]], now: float,
                 half_life: float) -> UsageMemory:
        """The memory at *now* from what was saved: queue -> (GPU-seconds, as of when),
        each decayed to *now* (nothing counted for the time between: what ran then is not
        known here; the next observation counts what runs from *now* on)."""
        if half_life <= 0:
            return cls()
        return cls(now, MappingProxyType({q: u * decay(now - at, half_life)
                                          for q, (u, at) in sorted(saved.items()) if u > 0}))

    def observed(self, now: float, half_life: float,
                 rates: Mapping[str, float]) -> UsageMemory:
        """The memory at *now*, with *rates* (borrowed GPUs per queue) from *now* on."""
        if half_life <= 0:
            return UsageMemory()
        if self.as_of is not None and now < self.as_of:
            now = self.as_of  # a clock that stepped back charges no negative time
        return UsageMemory(now, MappingProxyType(self.at(now, half_life)),
                           MappingProxyType({q: v for q, v in sorted(rates.items()) if v > 0}))


def borrowed_gpus(tree: QuotaTree, usage: Mapping[tuple[str, str], Resources]
                  ) -> dict[str, float]:
    """GPUs each queue's subtree uses beyond its subtree quota, summed over pools.

    *usage*: (queue, pool) -> what the queue's own gangs use (``Snapshot.queue_usage``, plus
    a plan's binds). Only pools where quota governs GPUs count (elsewhere nobody borrows);
    gangs of unknown queues count for nobody, like in the quota ledger, and a root borrows
    from nobody.
    """
    subtree: dict[tuple[str, str], int] = {}
    for (queue, pool), res in usage.items():
        gpus = gpus_of(res)
        path = tree.paths.get(queue)
        if not gpus or path is None or GPU not in tree.covered.get((path[0], pool), ()):
            continue
        for name in path:
            subtree[(name, pool)] = subtree.get((name, pool), 0) + gpus
    out: dict[str, float] = {}
    for (name, pool), gpus in sorted(subtree.items()):
        if len(tree.paths[name]) < 2:
            continue  # a root borrows from nobody (over its quota only by binds not ours)
        over = gpus - gpus_of(tree.subtree_quota[(name, pool)])
        if over > 0:
            out[name] = out.get(name, 0.0) + over
    return out


def shares(memory: UsageMemory | None, tree: QuotaTree, now: float,
           half_life: float) -> Mapping[str, float]:
    """Each queue's remembered share at *now* (see the module docstring); empty when off.

    A root shares with nobody (0); so does a queue whose parent has no GPU quota.
    """
    if memory is None or half_life <= 0:
        return _NOTHING
    remembered = memory.at(now, half_life)
    if not remembered:
        return _NOTHING
    tau = mean_life(half_life)
    out: dict[str, float] = {}
    for name, used in remembered.items():
        path = tree.paths.get(name)
        if path is None or len(path) < 2:
            continue
        capacity = sum(gpus_of(tree.subtree_quota[(path[-2], pool)])
                       for pool in tree.pools_of(name))
        if capacity > 0:
            out[name] = used / (tau * capacity) / tree.queues.queues[name].weight
    return MappingProxyType(out)
