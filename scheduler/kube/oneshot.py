"""Read the whole cluster once into a cache and the queue policies (no watch).

For commands that answer one question and exit (``explain``): they rebuild exactly the
scheduler's view from the apiserver, then ask the same pure ``decide``.
"""

from __future__ import annotations

from policies.queues import PolicySet
from policies.validation import PolicyStore
from scheduler.cache import ClusterCache
from scheduler.config import SchedulerConfig
from scheduler.grouping import GroupingConfig
from scheduler.kube import feed, informer
from scheduler.kube.client import KubeClient
from scheduler.kube.policy_feed import LivePolicies


def read_cluster(client: KubeClient, config: SchedulerConfig) -> tuple[ClusterCache, LivePolicies]:
    """A cache and the policies in force, as a freshly started scheduler would see them."""
    cache = ClusterCache(GroupingConfig(scheduler_name=config.scheduler_name,
                                        default_queue=config.default_queue))
    policies = LivePolicies(client, initial=PolicyStore(PolicySet(scheduler=config.policy())),
                            write_status=lambda _name, _status: None)
    pairs: list[tuple[informer.ResourceKind, informer.Handler]] = [
        (inf.kind, inf.handler) for inf in feed.cache_informers(client, cache, config.node_labels)]
    pairs.append((informer.QUEUES, policies.handle))
    for kind, handler in pairs:
        try:
            items, _ = informer.list_all(client, kind)
        except informer.ResourceAbsent:
            continue  # an optional CRD that is not installed: no objects of that kind
        for obj in items:
            handler(informer.EventType.ADDED, obj)
    return cache, policies
