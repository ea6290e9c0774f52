"""The Kueue mode: Kueue admits workloads by its quota, gang-scheduler only places them.

Why a mode and not a Queue with a large quota: under Kueue, quota is Kueue's (its
ClusterQueues, LocalQueues, cohorts and preemption); a second quota check here could only
disagree with it, and a gang Kueue admitted would then wait for a reason no Kueue user looks
for. So in this mode the policies in force hold one built-in queue, named as the scheduler's
``defaultQueue`` (which gangs without a ``gangscheduler.io/queue`` label join), that admits
every namespace and covers no resource in its pools: the quota step finds nothing to limit,
and gangs are held back only by what the cluster has room for. Kueue's own decisions reach
the pods as ordinary pod fields (its flavor's nodeSelector, injected when it unsuspends a
Job), which placement already honours; a Job Kueue has not admitted yet has no pods, so
nothing of it is placed (``explain`` says that Kueue holds it: ``cli.explain_kueue``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from policies.queues import (
    PolicySet,
    PoolQuota,
    PreemptionPolicy,
    Queue,
    QueueSet,
    ReclaimPolicy,
    WithinQueuePreemption,
)
from scheduler.model.resources import Resources

#: Kueue's label naming a workload's LocalQueue.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"


@dataclass(frozen=True, slots=True)
class KueueConfig:
    """``kueue:`` in the scheduler config. *pools*: the node pools (values of ``poolLabel``)
    Kueue's workloads may be placed in (Kueue's ResourceFlavors narrow that further through
    the node selectors they inject); nodes without the label are in pool ``default``."""

    enabled: bool = False
    pools: tuple[str, ...] = ("default",)


def admission_queue(name: str, pools: tuple[str, ...]) -> Queue:
    """The built-in queue of the Kueue mode: every namespace, no resource limited by quota,
    and no preemption: evicting a Job Kueue admitted is Kueue's decision (its ClusterQueue's
    ``preemption``), and one made here behind its back would leave the Job admitted, its
    quota held, and its pods waiting."""
    return Queue(name=name, namespaces=("*",),
                 quotas=tuple(PoolQuota(pool=p, nominal=Resources(), covered=frozenset())
                              for p in pools),
                 preemption=PreemptionPolicy(within_queue=WithinQueuePreemption.NEVER,
                                             reclaim_from_others=ReclaimPolicy.NEVER))


def with_admission_queue(policies: PolicySet, queue: Queue) -> PolicySet:
    """*policies* with *queue* in force in place of any Queue object of the same name (one
    such object cannot bring quota back in this mode)."""
    queues = {q.name: q for q in policies.queues if q.name != queue.name}
    queues[queue.name] = queue
    terminating = policies.queues.terminating - {queue.name}
    return PolicySet(queues=QueueSet.of(queues.values(), terminating),
                     scheduler=policies.scheduler)


def overlay(config: KueueConfig, default_queue: str) -> Callable[[PolicySet], PolicySet] | None:
    """What the policy feed applies to the policies in force (None: the mode is off)."""
    if not config.enabled:
        return None
    queue = admission_queue(default_queue, config.pools)
    return lambda policies: with_admission_queue(policies, queue)
