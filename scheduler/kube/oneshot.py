"""Read the whole cluster once into a cache and the queue policies (no watch).

For commands that answer one question and exit (``explain``): they rebuild exactly the
scheduler's view from the apiserver, then ask the same pure ``decide``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies.queues import PolicySet
from policies.validation import PolicyStore
from scheduler.cache import ClusterCache
from scheduler.config import SchedulerConfig
from scheduler.grouping import GroupingConfig
from scheduler.kube import feed, informer
from scheduler.kube.client import ApiError, KubeClient
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


@dataclass(frozen=True, slots=True)
class Visible:
    """What the caller could read: the cache built from it, the Queue objects, each pending
    pod's ``PodScheduled=False`` message (uid -> message) and whether nodes were readable."""

    cache: ClusterCache
    queues: tuple[dict[str, Any], ...]
    conditions: Mapping[str, str]
    nodes_readable: bool


def read_visible(client: KubeClient, config: SchedulerConfig,
                 namespaces: Sequence[str] | None) -> Visible:
    """The cluster as the caller's RBAC shows it: pods, PodGroups and Jobs of *namespaces*
    (None: of all), Queues, and nodes and PriorityClasses when the caller may list them
    (a 403 there is not an error: a tenant sees no nodes)."""
    cache = ClusterCache(GroupingConfig(scheduler_name=config.scheduler_name,
                                        default_queue=config.default_queue))
    conditions: dict[str, str] = {}
    queues: list[dict[str, Any]] = []
    nodes_readable = True
    for inf in feed.cache_informers(client, cache, config.node_labels):
        namespaced = inf.kind.name in ("pods", "podgroups", "jobs")
        paths = ([inf.kind.path] if not namespaced or namespaces is None else
                 [_in_namespace(inf.kind.path, ns) for ns in namespaces])
        for path in paths:
            try:
                items, _ = informer.list_all(client, dataclasses.replace(inf.kind, path=path))
            except informer.ResourceAbsent:
                continue
            except ApiError as exc:
                if exc.status == 403 and not namespaced:
                    nodes_readable = nodes_readable and inf.kind.name != "nodes"
                    continue
                raise
            for obj in items:
                inf.handler(informer.EventType.ADDED, obj)
                if inf.kind.name == "pods":
                    message = _unschedulable(obj)
                    if message:
                        conditions[str(obj["metadata"].get("uid", ""))] = message
    try:
        queues, _ = informer.list_all(client, informer.QUEUES)
    except informer.ResourceAbsent:
        queues = []
    return Visible(cache, tuple(queues), conditions, nodes_readable)


def _in_namespace(path: str, namespace: str) -> str:
    """``/api/v1/pods`` -> ``/api/v1/namespaces/NS/pods`` (any group's collection path)."""
    head, _, plural = path.rpartition("/")
    return f"{head}/namespaces/{namespace}/{plural}"


def _unschedulable(pod: Mapping[str, Any]) -> str:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("message") or "")
    return ""
