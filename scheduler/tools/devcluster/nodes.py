"""Fake GPU nodes: Node objects registered as a kubelet registers them, then run by kwok.

Why these steps: they are what a real node goes through, so the scheduler sees the same objects
and no admission plugin has to be disabled. A node is registered with its own taints (the
TaintNodesByCondition admission plugin adds ``node.kubernetes.io/not-ready``), its status gets
capacity, allocatable, addresses and node info. kwok runs it from its registration on (the
annotation ``kwok.x-k8s.io/node: fake`` must be there when kwok first sees the node: it starts
a node's Lease on that event only): it reports the node Ready and renews its Lease, and the real
node lifecycle controller then lifts the ``not-ready`` taint. ``fail_node`` makes it report
NotReady, as a kubelet whose container runtime died does (kwok-stages.yaml, ``node-failure``),
and ``recover_node`` makes it Ready again.

The ``gangscheduler.io/fake-node`` label marks the nodes the dev cluster made.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes import client

from scheduler.model import hami
from scheduler.tools.devcluster import rest
from scheduler.world import clusterspec

FAKE_NODE_LABEL = "gangscheduler.io/fake-node"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_VALUE = "fake"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
FAILURE_ANNOTATION = "gangscheduler.io/simulated-node-failure"  # kwok-stages.yaml
KUBELET_VERSION = "v1.36.3-kwok"
READY_TIMEOUT_S = 60.0


def node_ip(index: int) -> str:
    """A stable, unique-enough InternalIP for the index-th node (10.128.0.0/9)."""
    return f"10.{128 + (index >> 16) % 128}.{(index >> 8) % 256}.{index % 256}"


def taint_dicts(taints: Iterable[clusterspec.TaintSpec]) -> list[dict[str, str]]:
    return [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints]


def status_body(allocatable: Mapping[str, str], ip: str, name: str) -> dict[str, Any]:
    """What a kubelet reports about its machine (conditions are kwok's); every field the
    generated client models require is set."""
    return {"status": {
        "capacity": dict(allocatable),
        "allocatable": dict(allocatable),
        "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
        "nodeInfo": {
            "architecture": "amd64", "operatingSystem": "linux", "osImage": "kwok",
            "kernelVersion": "kwok", "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "", "containerRuntimeVersion": "kwok://0.8.0",
            "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, name).hex,
            "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
            "bootID": str(uuid.uuid5(uuid.NAMESPACE_OID, name)),
        },
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
    }}


def hami_registration(node: str, gpus: int, memory_mib: int = 16384, slots: int = 10,
                      product: str = "NVIDIA-A10") -> dict[str, str]:
    """The node annotation HAMi's device plugin writes for *gpus* GPUs of *memory_mib* MiB,
    each shared by at most *slots* tasks (``scheduler.model.hami``): a fake node carrying it
    offers its GPUs by share, as a real node running the plugin does. UUIDs are derived
    from the node's name, so a node registered again keeps its GPUs."""
    registered = [{"id": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}/{i}')}", "index": i,
                   "count": slots, "devmem": memory_mib, "devcore": 100, "type": product,
                   "numa": 0, "mode": "hami-core", "health": True} for i in range(gpus)]
    return {hami.HAMI_REGISTER_ANNOTATION: json.dumps(registered)}


def register(api: client.ApiClient, name: str, labels: Mapping[str, str],
             allocatable: Mapping[str, str], taints: list[dict[str, str]] | None = None,
             index: int = 0, annotations: Mapping[str, str] | None = None) -> None:
    """Register a fake node for kwok and write its machine status (not waiting for Ready)."""
    core = client.CoreV1Api(api)
    body = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {**labels, FAKE_NODE_LABEL: "true"},
                     "annotations": {**(annotations or {}), KWOK_ANNOTATION: KWOK_VALUE}},
        "spec": {"taints": taints or []},
    }
    try:
        rest.call(core.create_node, body)
    except client.ApiException as exc:
        if exc.status != 409:  # re-running `up` on the same store reuses the node
            raise
    rest.call(core.patch_node_status, name, status_body(allocatable, node_ip(index), name),
              _content_type=rest.MERGE_PATCH)


def fail_node(api: client.ApiClient, name: str, why: str = "node lost") -> None:
    """Make node `name` report Ready=False (*why* is in its condition's message): the node
    lifecycle controller taints it ``not-ready`` and the taint-eviction controller evicts the
    pods that do not tolerate that, as when a machine's kubelet or runtime dies."""
    _annotate(api, name, why)


def recover_node(api: client.ApiClient, name: str) -> None:
    """Undo ``fail_node``: the node reports Ready again and its ``not-ready`` taints go."""
    _annotate(api, name, None)


def cordon_node(api: client.ApiClient, name: str, on: bool = True) -> None:
    """Mark node `name` unschedulable (``kubectl cordon``; *on* False: uncordon), as a drain
    does before it evicts: no new pod goes there, the pods on it stay."""
    rest.call(client.CoreV1Api(api).patch_node, name, {"spec": {"unschedulable": on}})


def _annotate(api: client.ApiClient, name: str, value: str | None) -> None:
    rest.call(client.CoreV1Api(api).patch_node, name,
              {"metadata": {"annotations": {FAILURE_ANNOTATION: value}}},
              _content_type=rest.MERGE_PATCH)


def wait_ready(api: client.ApiClient, names: Iterable[str],
               timeout_s: float = READY_TIMEOUT_S) -> None:
    """Wait until every named node is Ready and the node lifecycle controller has lifted
    ``not-ready`` (their own taints stay)."""
    core = client.CoreV1Api(api)
    waiting = set(names)
    deadline = time.monotonic() + timeout_s
    while waiting:
        listed = rest.call(core.list_node, label_selector=f"{FAKE_NODE_LABEL}=true")["items"]
        waiting -= {n["metadata"]["name"] for n in listed if is_ready(n)}
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(waiting)} node(s) not Ready and schedulable after "
                               f"{timeout_s:.0f}s: {', '.join(sorted(waiting)[:5])}")
        time.sleep(0.1)


def create_node(api: client.ApiClient, name: str, labels: Mapping[str, str],
                allocatable: Mapping[str, str], taints: list[dict[str, str]] | None = None,
                index: int = 0, annotations: Mapping[str, str] | None = None) -> None:
    """Register a fake node and return once it is Ready with only its own `taints`."""
    register(api, name, labels, allocatable, taints, index, annotations)
    wait_ready(api, [name])


def create_from_spec(api: client.ApiClient, spec: clusterspec.ClusterSpec) -> list[str]:
    """Create every node a cluster description lists (all registered, then waited for);
    returns their names in order."""
    names = []
    for index, node in enumerate(spec.nodes()):
        register(api, node.name, node.labels, node.allocatable, taint_dicts(node.taints), index)
        names.append(node.name)
    wait_ready(api, names)
    return names


def _reports_ready(node: Mapping[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _taint_keys(node: Mapping[str, Any]) -> set[str]:
    return {t["key"] for t in node.get("spec", {}).get("taints") or []}


def is_ready(node: Mapping[str, Any]) -> bool:
    """Ready=True and without the ``not-ready`` taint (for a node as a JSON dict)."""
    return _reports_ready(node) and NOT_READY_TAINT not in _taint_keys(node)


def is_ready_and_untainted(node: Mapping[str, Any], allowed_taints: Iterable[str] = ()) -> bool:
    """For a node as a JSON dict: Ready=True and no taint beyond `allowed_taints` keys."""
    return _reports_ready(node) and not _taint_keys(node) - set(allowed_taints)
