"""The over-commit invariant: no node ever has more allocated than its allocatable.

Why a watcher and not a kubelet check: kwok, which runs the fake nodes, admits every pod bound
to them (a real kubelet would refuse one that does not fit, with ``OutOf<resource>``). So the
tests watch every pod and node of each dev cluster they start, from a watch rather than by
polling (a pod bound and gone again between two reads is still seen), and the autouse fixture
in conftest.py fails any test during which a node had more allocated than its allocatable.

A pod occupies its node's resources from the moment it is bound until it is terminal (Succeeded or
Failed) or gone; a pod being deleted still occupies them for its grace period, as on a real node.
Requests are worked out here independently of the scheduler (max of the containers' sum and
each init container, plus overhead, plus one ``pods`` slot, as the kubelet does), so a bug in
the scheduler's own arithmetic cannot hide.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from kubernetes.utils import parse_quantity

from scheduler.kube.client import connect
from scheduler.kube.read import informer

Requests = dict[str, Decimal]
TERMINAL = ("Succeeded", "Failed")


def _extended(resource: str) -> bool:
    """An extended resource (``example.com/thing``): the kubelet's admission leaves out those
    its node does not advertise (``removeMissingExtendedResources``: a scheduler extender's,
    such as HAMi's ``nvidia.com/gpumem``), so they never over-commit it."""
    return "/" in resource and not resource.startswith(("kubernetes.io/", "requests."))


def pod_requests(pod: dict[str, Any]) -> Requests:
    """What a pod occupies on its node, as the kubelet's admission computes it."""
    spec = pod.get("spec", {})
    total: dict[str, Decimal] = defaultdict(Decimal)
    for container in spec.get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] += parse_quantity(value)
    for container in spec.get("initContainers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] = max(total[name], parse_quantity(value))
    for name, value in (spec.get("overhead") or {}).items():
        total[name] += parse_quantity(value)
    total["pods"] += 1
    return dict(total)


@dataclass(frozen=True, slots=True)
class Violation:
    node: str
    resource: str
    used: Decimal
    allocatable: Decimal
    pods: tuple[str, ...]  # namespace/name of the pods occupying the node at that moment

    def __str__(self) -> str:
        return (f"node {self.node} had {self.used} {self.resource} of {self.allocatable} "
                f"allocatable, by {', '.join(self.pods)}")


class CapacityWatch:
    """Watches the pods and nodes of one cluster and records every over-committed moment."""

    def __init__(self, kubeconfig: Path, name: str) -> None:
        self.name = name
        self.client = connect(str(kubeconfig))
        self._lock = threading.Lock()
        self.allocatable: dict[str, Requests] = {}
        self.occupying: dict[str, dict[str, tuple[str, Requests]]] = defaultdict(dict)
        self.node_of: dict[str, str] = {}  # pod uid -> node it occupies
        self.violations: list[Violation] = []
        self.expected = 0  # violations a test caused on purpose (see `expect`)
        self.informers = [informer.Informer(self.client, informer.NODES, self._node),
                          informer.Informer(self.client, informer.PODS, self._pod)]

    def start(self) -> CapacityWatch:
        for inf in self.informers:
            inf.start()
        for inf in self.informers:
            assert inf.wait_for_sync(60), f"capacity watch of {self.name} did not sync"
        return self

    def stop(self) -> None:
        for inf in self.informers:
            inf.stop()
        self.client.close()

    def _node(self, event: informer.EventType, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        with self._lock:
            if event is informer.EventType.DELETED:
                self.allocatable.pop(name, None)
                return
            raw = (node.get("status") or {}).get("allocatable") or {}
            self.allocatable[name] = {k: parse_quantity(v) for k, v in raw.items()}
            self._check(name)

    def _pod(self, event: informer.EventType, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid, node = meta["uid"], (pod.get("spec") or {}).get("nodeName") or ""
        phase = (pod.get("status") or {}).get("phase")
        occupies = event is not informer.EventType.DELETED and bool(node) and phase not in TERMINAL
        with self._lock:
            previous = self.node_of.pop(uid, None)
            if previous is not None:
                self.occupying[previous].pop(uid, None)
            if occupies:
                self.node_of[uid] = node
                self.occupying[node][uid] = (f"{meta['namespace']}/{meta['name']}",
                                           pod_requests(pod))
                self._check(node)

    def _excess(self, node: str) -> list[tuple[str, Decimal, Decimal]]:
        """(resource, used, allocatable) for each resource `node` has over its allocatable."""
        allocatable = self.allocatable.get(node)
        if allocatable is None:
            return []  # not a node (yet): nothing to compare with
        used: dict[str, Decimal] = defaultdict(Decimal)
        for _, requests in self.occupying.get(node, {}).values():
            for resource, amount in requests.items():
                used[resource] += amount
        return [(r, amount, allocatable.get(r, Decimal(0))) for r, amount in sorted(used.items())
                if amount > allocatable.get(r, Decimal(0))
                and (r in allocatable or not _extended(r))]

    def _check(self, node: str) -> None:
        pods = tuple(sorted(n for n, _ in self.occupying.get(node, {}).values()))
        for resource, used, allocatable in self._excess(node):
            self.violations.append(Violation(node, resource, used, allocatable, pods))

    def unexpected(self, since: int) -> list[Violation]:
        """Violations recorded after the first `since` ones that no test asked for."""
        with self._lock:
            return self.violations[max(since, self.expected):]

    @contextlib.contextmanager
    def expect(self, node: str, timeout_s: float = 30.0) -> Iterator[None]:
        """For a test that over-commits `node` on purpose and then undoes it: on leaving the
        block, waits until a violation on `node` was seen and the node is back within its
        allocatable, and marks everything recorded so far as expected."""
        with self._lock:
            before = len(self.violations)
        yield
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                seen = any(v.node == node for v in self.violations[before:])
                if seen and not self._excess(node):
                    self.expected = len(self.violations)
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: over-commit of {node} seen: {seen}; "
                                     f"still over-committed: {self._excess(node)}")
            time.sleep(0.05)


#: The watches of every dev cluster the test session runs now (conftest.py checks them).
ACTIVE: list[CapacityWatch] = []


@contextlib.contextmanager
def watching(kubeconfig: Path, name: str) -> Iterator[CapacityWatch]:
    """A started watch of one cluster, registered in `ACTIVE` while the block runs."""
    watch = CapacityWatch(kubeconfig, name).start()
    ACTIVE.append(watch)
    try:
        yield watch
    finally:
        ACTIVE.remove(watch)
        watch.stop()
