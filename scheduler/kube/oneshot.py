"""Read the cluster once into a cache and the queue policies (no watch).

For commands that answer one question and exit (``explain``): they rebuild exactly the
scheduler's view from the apiserver, then ask the same pure ``decide``.

A tenant whose RBAC covers only their namespaces cannot list nodes or other namespaces' pods.
Then the namespaced kinds are read in the namespace asked about and the rest is reported as
``unseen``, so the caller can say what it could not see (and fall back to what the running
scheduler last wrote) instead of failing with a 403 or deciding on half a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from policies.queues import PolicySet
from policies.validation import PolicyStore
from scheduler.feed.cache import ClusterCache
from scheduler.feed.grouping import GroupingConfig
from scheduler.kube.client import ApiError, KubeClient
from scheduler.kube.read import feed, informer
from scheduler.kube.read.policy_feed import LivePolicies
from scheduler.model.workloads import ESTIMATED_START_ANNOTATION
from scheduler.run import kueue_mode
from scheduler.run.config import SchedulerConfig


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What one read of the cluster saw."""

    cache: ClusterCache
    policies: LivePolicies
    #: What this identity may not list, each as "nodes" or "pods outside team-a" with why.
    unseen: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Did it see everything the scheduler sees (so a fresh decision means something)?"""
        return not self.unseen


def read_cluster(client: KubeClient, config: SchedulerConfig,
                 namespace: str | None = None) -> ClusterView:
    """A cache and the policies in force, as a freshly started scheduler would see them.

    With *namespace*, a kind the identity may not list cluster-wide (HTTP 403) is listed in
    that namespace instead (namespaced kinds) or left out (cluster-scoped ones); either way it
    is named in ``unseen``. Without it, a 403 is an ``ApiError`` as before.
    """
    cache = ClusterCache(GroupingConfig(scheduler_name=config.scheduler_name,
                                        default_queue=config.default_queue))
    policies = LivePolicies(client, initial=PolicyStore(PolicySet(scheduler=config.policy())),
                            write_status=lambda _name, _status: None,
                            overlay=kueue_mode.overlay(config.kueue, config.default_queue))
    pairs: list[tuple[informer.ResourceKind, informer.Handler]] = [
        (inf.kind, inf.handler) for inf in feed.cache_informers(client, cache, config.node_labels)]
    pairs.append((informer.QUEUES, policies.handle))
    unseen: list[str] = []
    for kind, handler in pairs:
        try:
            items = _list(client, kind, namespace, unseen)
        except informer.ResourceAbsent:
            continue  # an optional CRD that is not installed: no objects of that kind
        for obj in items:
            handler(informer.EventType.ADDED, obj)
    return ClusterView(cache, policies, tuple(unseen))


def _list(client: KubeClient, kind: informer.ResourceKind, namespace: str | None,
          unseen: list[str]) -> list[dict[str, object]]:
    try:
        return informer.list_all(client, kind)[0]
    except ApiError as exc:
        if exc.status != 403 or namespace is None:
            raise
    if not kind.namespaced:
        unseen.append(f"{kind.name} (forbidden)")
        return []
    try:
        items = informer.list_all(client, kind.in_namespace(namespace))[0]
    except ApiError as exc:
        if exc.status != 403:
            raise
        unseen.append(f"{kind.name} (forbidden, even in namespace {namespace})")
        return []
    unseen.append(f"{kind.name} outside namespace {namespace} (forbidden)")
    return items


@dataclass(frozen=True, slots=True)
class Visible:
    """What the caller could read: the cache built from it, the Queue objects, each pending
    pod's ``PodScheduled=False`` message (uid -> message), whether nodes were readable, and
    each PodGroup's ``status.estimatedStart`` (gang id -> epoch seconds)."""

    cache: ClusterCache
    queues: tuple[dict[str, Any], ...]
    conditions: Mapping[str, str]
    nodes_readable: bool
    estimates: Mapping[str, float] = field(default_factory=dict)
    #: Pod uid -> its ``gangscheduler.io/estimated-start`` (gangs without a PodGroup).
    pod_estimates: Mapping[str, float] = field(default_factory=dict)
    #: Gang id -> its PodGroup's ``status.queuePosition``.
    positions: Mapping[str, int] = field(default_factory=dict)


def read_visible(client: KubeClient, config: SchedulerConfig,
                 namespaces: Sequence[str] | None) -> Visible:
    """The cluster as the caller's RBAC shows it: pods, PodGroups and Jobs of *namespaces*
    (None: of all), Queues, and nodes and PriorityClasses when the caller may list them
    (a 403 there is not an error: a tenant sees no nodes)."""
    cache = ClusterCache(GroupingConfig(scheduler_name=config.scheduler_name,
                                        default_queue=config.default_queue))
    conditions: dict[str, str] = {}
    estimates: dict[str, float] = {}
    pod_estimates: dict[str, float] = {}
    positions: dict[str, int] = {}
    queues: list[dict[str, Any]] = []
    nodes_readable = True
    for inf in feed.cache_informers(client, cache, config.node_labels):
        namespaced = inf.kind.namespaced
        kinds = ([inf.kind] if not namespaced or namespaces is None else
                 [inf.kind.in_namespace(ns) for ns in namespaces])
        for kind in kinds:
            try:
                items, _ = informer.list_all(client, kind)
            except informer.ResourceAbsent:
                continue
            except ApiError as exc:
                if exc.status == 403 and not namespaced:
                    nodes_readable = nodes_readable and inf.kind.name != "nodes"
                    continue
                if exc.status == 403 and inf.kind in informer.DEVICE_KINDS:
                    continue  # a tenant's Role need not grant DRA: explain does without
                if exc.status == 403 and inf.kind in informer.OPERATOR_OBJECTS.values():
                    # A tenant Role from before these kinds were read: their pods' gangs
                    # show as waiting for their object; the scheduler's own message says more.
                    continue
                raise
            for obj in items:
                inf.handler(informer.EventType.ADDED, obj)
                if inf.kind.name == "pods":
                    message = unschedulable_message(obj)
                    uid = str(obj["metadata"].get("uid", ""))
                    if message:
                        conditions[uid] = message
                    estimate = annotation_time(obj)
                    if estimate is not None:
                        pod_estimates[uid] = estimate
                elif inf.kind.name == informer.PODGROUPS.name:
                    meta = obj["metadata"]
                    gang = f"{meta.get('namespace', '')}/{meta['name']}"
                    estimate = status_time(obj)
                    if estimate is not None:
                        estimates[gang] = estimate
                    position = (obj.get("status") or {}).get("queuePosition")
                    if isinstance(position, int) and position > 0:
                        positions[gang] = position
    try:
        queues, _ = informer.list_all(client, informer.QUEUES)
    except informer.ResourceAbsent:
        queues = []
    return Visible(cache, tuple(queues), conditions, nodes_readable, estimates, pod_estimates,
                   positions)


def status_time(podgroup: Mapping[str, Any], key: str = "estimatedStart") -> float | None:
    """A time in a PodGroup's status (``estimatedStart``: what the running scheduler
    estimated; ``estimateTime``: when), in epoch seconds; None when absent or unreadable."""
    return _time((podgroup.get("status") or {}).get(key))


def annotation_time(obj: Mapping[str, Any], key: str = ESTIMATED_START_ANNOTATION
                    ) -> float | None:
    """A time the scheduler wrote in an object's annotations (the estimated start on a
    pending gang's pods, or ``ESTIMATE_TIME_ANNOTATION``), None when absent or unreadable."""
    return _time(((obj.get("metadata") or {}).get("annotations") or {}).get(key))


def _time(value: Any) -> float | None:
    """RFC 3339 as written by ``durations.format_time`` -> epoch seconds (None: not one)."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def unschedulable_message(pod: Mapping[str, Any]) -> str:
    """The ``PodScheduled=False`` message the scheduler wrote on a pending pod, or ""."""
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("message") or "")
    return ""
