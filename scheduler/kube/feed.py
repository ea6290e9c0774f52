"""Wiring informers to the cluster cache: convert, skip the malformed, upsert or delete.

Why here: conversion errors are an edge concern. A malformed object is logged once per event
with its field path and skipped; the cache keeps that object's last good state and every other
object keeps flowing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import structlog

from scheduler.kube import convert, informer
from scheduler.kube.client import KubeClient
from scheduler.model import Node, NodeLabelConfig
from scheduler.model.workloads import JobInfo, PodGroupInfo, PodInfo

log = structlog.get_logger()


class Cache(Protocol):
    """The part of ``scheduler.cache.ClusterCache`` the informers feed."""

    def upsert_node(self, node: Node) -> None: ...
    def delete_node(self, name: str) -> None: ...
    def upsert_pod(self, pod: PodInfo) -> None: ...
    def delete_pod(self, uid: str) -> None: ...
    def upsert_group(self, group: PodGroupInfo) -> None: ...
    def delete_group(self, key: str) -> None: ...
    def upsert_job(self, job: JobInfo) -> None: ...
    def delete_job(self, key: str) -> None: ...


def converting_handler(to_model: Callable[[dict[str, Any]], Any],
                       upsert: Callable[[Any], None],
                       delete: Callable[[dict[str, Any]], None]) -> informer.Handler:
    """A handler that converts each object before *upsert*; DELETED objects go to *delete* raw."""

    def handle(event: informer.EventType, obj: dict[str, Any]) -> None:
        if event is informer.EventType.DELETED:
            delete(obj)
            return
        try:
            value = to_model(obj)
        except convert.ConversionError as exc:
            log.warning("object_skipped", kind=exc.kind, object=exc.key, field=exc.path,
                        reason=exc.reason)
            return
        upsert(value)

    return handle


def _meta(obj: dict[str, Any], key: str) -> str:
    return str((obj.get("metadata") or {}).get(key) or "")


def cache_informers(client: KubeClient, cache: Cache,
                    label_config: NodeLabelConfig | None = None) -> list[informer.Informer]:
    """Informers for nodes, pods, PodGroups and Jobs feeding *cache* (not started)."""
    handlers: list[tuple[informer.ResourceKind, informer.Handler]] = [
        (informer.NODES, converting_handler(
            lambda o: convert.node_from_json(o, label_config), cache.upsert_node,
            lambda o: cache.delete_node(_meta(o, "name")))),
        (informer.PODS, converting_handler(
            convert.pod_from_json, cache.upsert_pod, lambda o: cache.delete_pod(_meta(o, "uid")))),
        (informer.PODGROUPS, converting_handler(
            convert.podgroup_from_json, cache.upsert_group,
            lambda o: cache.delete_group(informer.object_id(o)))),
        (informer.JOBS, converting_handler(
            convert.job_from_json, cache.upsert_job,
            lambda o: cache.delete_job(informer.object_id(o)))),
    ]
    return [informer.Informer(client, kind, handler) for kind, handler in handlers]


def wait_for_sync(informers: list[informer.Informer], timeout: float) -> bool:
    """Wait until every informer has delivered its first list (False on timeout)."""
    deadline = time.monotonic() + timeout
    return all(i.wait_for_sync(max(0.0, deadline - time.monotonic())) for i in informers)
