"""Feeding HAMi's GPU-share convention into the device inventory, beside nodes and pods.

A node's registered GPUs become a slice and a pod's share ask its own claim
(``hami_convert``), kept in the cache's facts as the watched DRA objects are, so placement,
quota and accounting read them as they read DRA shares. They ride on the node and pod
informers: the slice is set before the node is upserted and the claim before the pod, so a
gang is never seen asking for devices its claim does not hold yet. A pod that is gone or has
finished gives its shares back (its claim is dropped).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import structlog

from scheduler.feed.facts import ClusterFacts
from scheduler.kube.read import hami_convert, informer
from scheduler.kube.read.fields import FieldError
from scheduler.model import hami

log = structlog.get_logger()

_FINISHED = ("Succeeded", "Failed")


def _name(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def with_shares(change_facts: Callable[[Callable[[ClusterFacts], bool]], None],
                nodes: informer.Handler, pods: informer.Handler,
                ) -> tuple[informer.Handler, informer.Handler]:
    """The node and pod handlers, each first keeping the slice or claim of its object."""
    lock = threading.Lock()
    slices: set[str] = set()  # slice names set: a node without GPUs costs nothing
    claims: set[str] = set()

    def on_node(event: informer.EventType, obj: dict[str, Any]) -> None:
        _, node = _name(obj)
        name = f"{node}~{hami.DRIVER}"
        found = None
        if event is not informer.EventType.DELETED:
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            try:
                found = hami_convert.node_gpus(node, annotations)
            except FieldError as e:
                log.warning("gpu_shares_unreadable", node=node, field=e.path, reason=e.reason)
        with lock:
            if found is not None or name in slices:
                (slices.add if found is not None else slices.discard)(name)
                change_facts(lambda f: f.set_device_class(hami.CLASS.name, hami.CLASS)
                             | f.set_slice(name, found))
        nodes(event, obj)

    def on_pod(event: informer.EventType, obj: dict[str, Any]) -> None:
        namespace, pod = _name(obj)
        key = f"{namespace}/{hami_convert.claim_name(pod)}"
        claim = None
        phase = (obj.get("status") or {}).get("phase")
        if event is not informer.EventType.DELETED and phase not in _FINISHED:
            try:
                claim = hami_convert.share_claim(obj)
            except FieldError as e:
                # A bad ask: the pod's conversion names the field and skips the pod. A bad
                # record of the GPUs a bound pod holds: they cannot be counted; said here.
                if e.path.startswith("metadata."):
                    log.warning("gpu_shares_unreadable", pod=f"{namespace}/{pod}",
                                field=e.path, reason=e.reason)
        with lock:
            if claim is not None or key in claims:
                (claims.add if claim is not None else claims.discard)(key)
                change_facts(lambda f: f.set_resource_claim(key, claim))
        pods(event, obj)

    return on_node, on_pod
