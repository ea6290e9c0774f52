"""The policies a simulation compares, side by side, through the same ``decide``.

- ``per-pod``: what kube-scheduler does: every pod is scheduled on its own, in arrival order,
  with no gang semantics. Jobs start only when all their pods happen to be placed, so
  partly placed jobs keep GPUs allocated doing nothing, and can deadlock each other.
- ``fifo-gang``: gangs placed all-or-nothing in strict arrival order; no backfill, no
  reservation, no preemption (the coscheduling plugin's behaviour, roughly).
- ``gang-scheduler``: the full policy: fair share, quotas with borrowing, preemption,
  reservations and backfill.

Queues are the same for every policy so the comparison isolates the mechanism. The
``gang-scheduler`` run takes the ``SchedulerPolicy`` of the policy file when it has one (its
thresholds, e.g. ``reservation.afterSeconds``); the baselines are always their presets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from policies.queues import (
    OrderingMode,
    PolicySet,
    PoolQuota,
    Queue,
    QueueSet,
    SchedulerPolicy,
)
from scheduler.model import Node
from scheduler.model.demand import gpus_of
from scheduler.model.resources import GPU, Resources

POLICY_NAMES = ("per-pod", "fifo-gang", "gang-scheduler")


@dataclass(frozen=True, slots=True)
class PolicyPreset:
    """A named policy: whether gangs exist at all, and the switches ``decide`` gets."""

    name: str
    per_pod: bool
    policies: PolicySet

    def current(self) -> PolicySet:
        """``PolicySource`` for the scheduler loop: a simulation's policies never change."""
        return self.policies


def make_preset(name: str, queues: QueueSet,
                scheduler: SchedulerPolicy | None = None) -> PolicyPreset:
    """*scheduler*: the policy file's ``SchedulerPolicy``, for the ``gang-scheduler`` run."""
    if name == "per-pod":
        policy = SchedulerPolicy(ordering=OrderingMode.FIFO, preemption=False,
                                 reservation=False, backfill=True)
        return PolicyPreset(name, True, PolicySet(queues, policy))
    if name == "gang-scheduler" and scheduler is not None:
        return PolicyPreset(name, False, PolicySet(queues, scheduler))
    if name in ("fifo-gang", "gang-scheduler", "greedy-gang"):
        return PolicyPreset(name, False, PolicySet(queues, SchedulerPolicy.preset(name)))
    raise ValueError(f"--policy: unknown policy {name!r} (known: {', '.join(POLICY_NAMES)}, "
                     "greedy-gang)")


ROOT_QUEUE = "cluster"


def default_queues(names: Iterable[str], nodes: Iterable[Node],
                   device_gpus: Mapping[str, int] | None = None) -> QueueSet:
    """One queue per trace team under a common parent, equal weights, and an equal split of
    every pool's GPUs as nominal quota; idle quota is borrowable by the others.

    A pool's GPUs are its nodes' ``nvidia.com/gpu`` and the GPUs they offer as DRA devices
    (*device_gpus*, by node): quota charges a device claim as GPUs too.
    Each queue admits the namespace of its own name (the simulator puts a team's pods there).
    """
    teams = sorted(set(names))
    devices = device_gpus or {}
    pool_gpus: dict[str, int] = {}
    for node in nodes:
        pool_gpus[node.pool] = (pool_gpus.get(node.pool, 0) + gpus_of(node.allocatable)
                                + devices.get(node.name, 0))
    queues = [Queue(name=ROOT_QUEUE)]
    for i, team in enumerate(teams):
        quotas = []
        for pool, gpus in sorted(pool_gpus.items()):
            share = gpus // len(teams) + (1 if i < gpus % len(teams) else 0)
            quotas.append(PoolQuota(pool=pool, nominal=Resources({GPU: share}),
                                    covered=frozenset({GPU})))
        queues.append(Queue(name=team, parent=ROOT_QUEUE, namespaces=(team,),
                            quotas=tuple(quotas)))
    return QueueSet.of(queues)
