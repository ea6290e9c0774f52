"""Fake GPU nodes: Node objects that look Ready and schedulable to any client.

Why three writes per node: that is what a real node goes through. The kubelet registers the
Node (and the TaintNodesByCondition admission plugin adds the ``not-ready`` taint), the kubelet
then reports status (capacity, allocatable, Ready condition, node info), and the node lifecycle
controller lifts the ``not-ready`` taint. We do the three steps ourselves, so the scheduler sees
the same objects as on a real cluster and no admission plugin has to be disabled. Nothing here
marks nodes NotReady later (there is no node lifecycle controller), so no heartbeat is needed.

The ``gangscheduler.io/fake-node`` label tells the agent's fake kubelet which nodes it runs.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes import client

from scheduler import clusterspec
from scheduler.devcluster import rest

FAKE_NODE_LABEL = "gangscheduler.io/fake-node"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
KUBELET_VERSION = "v1.36.3-fake"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_ip(index: int) -> str:
    """A stable, unique-enough InternalIP for the index-th node (10.128.0.0/9)."""
    return f"10.{128 + (index >> 16) % 128}.{(index >> 8) % 256}.{index % 256}"


def taint_dicts(taints: Iterable[clusterspec.TaintSpec]) -> list[dict[str, str]]:
    return [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints]


def status_body(allocatable: Mapping[str, str], ip: str, name: str) -> dict[str, Any]:
    """Node status as a kubelet reports it; every field the client models require is set."""
    now = _now()

    def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        return {"type": kind, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": now, "lastTransitionTime": now}

    return {"status": {
        "capacity": dict(allocatable),
        "allocatable": dict(allocatable),
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "fake"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "fake"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "fake"),
            condition("Ready", "True", "KubeletReady", "fake kubelet is posting ready status"),
        ],
        "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
        "nodeInfo": {
            "architecture": "amd64", "operatingSystem": "linux", "osImage": "fake",
            "kernelVersion": "fake", "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "", "containerRuntimeVersion": "fake://1.0",
            "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, name).hex,
            "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
            "bootID": str(uuid.uuid5(uuid.NAMESPACE_OID, name)),
        },
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
    }}


def create_node(api: client.ApiClient, name: str, labels: Mapping[str, str],
                allocatable: Mapping[str, str], taints: list[dict[str, str]] | None = None,
                index: int = 0) -> None:
    """Register a fake node, report it Ready, and leave only its own `taints` on it."""
    core = client.CoreV1Api(api)
    body = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {**labels, FAKE_NODE_LABEL: "true"}},
        "spec": {"taints": taints or []},
    }
    try:
        rest.call(core.create_node, body)
    except client.ApiException as exc:
        if exc.status != 409:  # re-running `up` on the same store reuses the node
            raise
    rest.call(core.patch_node_status, name, status_body(allocatable, node_ip(index), name),
              _content_type=rest.MERGE_PATCH)
    # What the node lifecycle controller does once Ready: the not-ready taint goes away.
    rest.call(core.patch_node, name, {"spec": {"taints": taints or None}},
              _content_type=rest.MERGE_PATCH)


def create_from_spec(api: client.ApiClient, spec: clusterspec.ClusterSpec) -> list[str]:
    """Create every node a cluster description lists; returns their names in order."""
    names = []
    for index, node in enumerate(spec.nodes()):
        create_node(api, node.name, node.labels, node.allocatable,
                    taint_dicts(node.taints), index)
        names.append(node.name)
    return names


def is_ready_and_untainted(node: Mapping[str, Any], allowed_taints: Iterable[str] = ()) -> bool:
    """For a node as a JSON dict: Ready=True and no taint beyond `allowed_taints` keys."""
    conditions = node.get("status", {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    extra = {t["key"] for t in node.get("spec", {}).get("taints") or []} - set(allowed_taints)
    return ready and not extra
