"""A fake kubelet for every fake node: the pod lifecycle a scheduler can observe, no containers.

Why: a scheduler is only proven when its binds have consequences. A bound pod on a fake node
becomes Running (phase, conditions, container statuses, IPs) and, with the annotation
``gangscheduler.io/simulated-runtime: "<seconds>"``, Succeeded that many seconds after it
started. Like the real kubelet, it refuses pods that do not fit next to the pods it already
runs (phase Failed, reason ``OutOf<resource>``), so an over-committing scheduler is caught.
Pods being deleted are force-deleted (grace 0), as a kubelet does once containers stop;
otherwise deletes of bound pods never complete.

It is driven by events handed to `handle_*` and does all writes from one worker thread, so its
bookkeeping (which pods each node runs) needs no locks.
"""

from __future__ import annotations

import datetime as dt
import heapq
import itertools
import logging
import queue
import time
from collections import defaultdict
from decimal import Decimal
from typing import Any

from kubernetes import client
from kubernetes.utils import parse_quantity

from scheduler.devcluster import rest
from scheduler.devcluster.nodes import FAKE_NODE_LABEL

SIMULATED_RUNTIME = "gangscheduler.io/simulated-runtime"
log = logging.getLogger("devcluster.kubelet")
Pod = dict[str, Any]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_requests(pod: Pod) -> dict[str, Decimal]:
    """Effective requests, as the kubelet computes them: max(sum of containers, any init
    container) per resource, plus overhead, plus one `pods` slot."""
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


class FakeKubelet:
    """Pod lifecycle for all nodes labelled `gangscheduler.io/fake-node=true`."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.events: queue.Queue[tuple[str, str, dict[str, Any]]] = queue.Queue()
        self.nodes: dict[str, tuple[dict[str, Decimal], str]] = {}  # name -> (allocatable, ip)
        self.running: dict[str, dict[str, dict[str, Decimal]]] = defaultdict(dict)
        self.waiting: dict[str, dict[str, Pod]] = defaultdict(dict)  # pods on unknown nodes
        self.timers: list[tuple[float, int, str, str, str]] = []  # (due, seq, ns, name, uid)
        self.timed: set[str] = set()
        self._seq = itertools.count()
        self._ips = itertools.count(1)

    # Event intake (any thread) -------------------------------------------------------------
    def handle_node(self, kind: str, node: dict[str, Any]) -> None:
        self.events.put(("node", kind, node))

    def handle_pod(self, kind: str, pod: Pod) -> None:
        self.events.put(("pod", kind, pod))

    # Worker ------------------------------------------------------------------------------
    def run_once(self, max_wait_s: float = 1.0) -> None:
        """Process one event or wait for the next timer, whichever comes first."""
        wait = max_wait_s
        if self.timers:
            wait = max(0.0, min(wait, self.timers[0][0] - time.time()))
        try:
            what, kind, obj = self.events.get(timeout=wait)
        except queue.Empty:
            pass
        else:
            try:
                (self._node if what == "node" else self._pod)(kind, obj)
            except client.ApiException as exc:
                log.warning("%s %s: API error %s %s", what, kind, exc.status, exc.reason)
        while self.timers and self.timers[0][0] <= time.time():
            _, _, namespace, name, uid = heapq.heappop(self.timers)
            self._finish(namespace, name, uid)

    def _node(self, kind: str, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        if kind == "DELETED" or labels.get(FAKE_NODE_LABEL) != "true":
            self.nodes.pop(name, None)
            return
        status = node.get("status") or {}
        allocatable = {k: parse_quantity(v) for k, v in (status.get("allocatable") or {}).items()}
        ip = next((a["address"] for a in status.get("addresses") or []
                   if a.get("type") == "InternalIP"), "")
        if not allocatable:
            return  # registered but no status yet: wait for the status update
        self.nodes[name] = (allocatable, ip)
        for pod in self.waiting.pop(name, {}).values():
            self._pod("ADDED", pod)

    def _pod(self, kind: str, pod: Pod) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        node, uid = spec.get("nodeName"), meta["uid"]
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if not node:
            return
        if kind == "DELETED":
            self.running[node].pop(uid, None)
            self.waiting[node].pop(uid, None)
            return
        if node not in self.nodes:
            self.waiting[node][uid] = pod
            return
        if meta.get("deletionTimestamp"):
            self.running[node].pop(uid, None)  # its resources are free from now on
            self._force_delete(meta["namespace"], meta["name"], uid)
            return
        if phase in ("Succeeded", "Failed"):
            self.running[node].pop(uid, None)
            return
        if phase == "Running":
            self.running[node][uid] = pod_requests(pod)
            self._arm_timer(pod)
            return
        if uid in self.running[node]:
            return  # already admitted and started; this event predates our Running status
        misfit = self._misfit(node, pod_requests(pod))
        if misfit:
            self._reject(pod, *misfit)
            return
        self._start(pod, node)
        self.running[node][uid] = pod_requests(pod)
        self._arm_timer(pod, time.time())

    def _misfit(self, node: str, wanted: dict[str, Decimal]) -> tuple[str, str] | None:
        allocatable, _ = self.nodes[node]
        for resource, amount in sorted(wanted.items()):
            if amount <= 0:
                continue
            used = sum((r.get(resource, Decimal(0)) for r in self.running[node].values()),
                       Decimal(0))
            capacity = allocatable.get(resource, Decimal(0))
            if used + amount > capacity:
                return (f"OutOf{resource}",
                        f"Pod was rejected: Node didn't have enough resource: {resource}, "
                        f"requested: {amount}, used: {used}, capacity: {capacity}")
        return None

    def _patch_status(self, pod: Pod, status: dict[str, Any]) -> None:
        meta = pod["metadata"]
        body = {"metadata": {"uid": meta["uid"]}, "status": status}
        rest.call(self.core.patch_namespaced_pod_status, meta["name"], meta["namespace"], body,
                  _content_type=rest.STRATEGIC_MERGE_PATCH)

    def _reject(self, pod: Pod, reason: str, message: str) -> None:
        log.info("reject %s/%s: %s", pod["metadata"]["namespace"], pod["metadata"]["name"],
                 message)
        self._patch_status(pod, {"phase": "Failed", "reason": reason, "message": message})

    def _start(self, pod: Pod, node: str) -> None:
        now = _now()
        ip = f"10.64.{(n := next(self._ips)) // 250 % 250}.{n % 250 + 1}"
        host_ip = self.nodes[node][1]
        ready = [{"type": t, "status": "True", "lastTransitionTime": now}
                 for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")]
        statuses = [_container_status(pod, c, {"running": {"startedAt": now}}, True)
                    for c in pod["spec"].get("containers") or []]
        self._patch_status(pod, {
            "phase": "Running", "startTime": now, "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
            "podIP": ip, "podIPs": [{"ip": ip}], "conditions": ready,
            "containerStatuses": statuses,
        })

    def _arm_timer(self, pod: Pod, started: float | None = None) -> None:
        """Schedule Succeeded `simulated-runtime` seconds after the start (ours, or the one
        recorded in status.startTime when the agent restarted while the pod ran)."""
        meta = pod["metadata"]
        raw = (meta.get("annotations") or {}).get(SIMULATED_RUNTIME)
        if raw is None or meta["uid"] in self.timed:
            return
        try:
            seconds = float(raw)
        except ValueError:
            log.warning("%s/%s: ignoring %s=%r (not a number of seconds)",
                        meta["namespace"], meta["name"], SIMULATED_RUNTIME, raw)
            return
        if started is None:
            recorded = (pod.get("status") or {}).get("startTime") or _now()
            begin = dt.datetime.strptime(recorded, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
            started = begin.timestamp()
        due = started + max(0.0, seconds)
        self.timed.add(meta["uid"])
        heapq.heappush(self.timers, (due, next(self._seq), meta["namespace"], meta["name"],
                                     meta["uid"]))

    def _finish(self, namespace: str, name: str, uid: str) -> None:
        self.timed.discard(uid)
        if not any(uid in pods for pods in self.running.values()):
            return  # deleted or already terminal
        try:
            live = rest.call(self.core.read_namespaced_pod, name, namespace)
        except client.ApiException:
            return
        if live["metadata"]["uid"] != uid or live["metadata"].get("deletionTimestamp"):
            return
        now = _now()
        done = {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": now,
                               "startedAt": live.get("status", {}).get("startTime", now)}}
        statuses = [_container_status(live, c, done, False)
                    for c in live["spec"].get("containers") or []]
        conditions = [{"type": t, "status": "False", "reason": "PodCompleted",
                       "lastTransitionTime": now} for t in ("ContainersReady", "Ready")]
        self._patch_status(live, {"phase": "Succeeded", "conditions": conditions,
                                  "containerStatuses": statuses})

    def _force_delete(self, namespace: str, name: str, uid: str) -> None:
        try:
            rest.call(self.core.delete_namespaced_pod, name, namespace, grace_period_seconds=0,
                      body={"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
        except client.ApiException as exc:
            if exc.status not in (404, 409):
                raise


def _container_status(pod: Pod, container: dict[str, Any], state: dict[str, Any],
                      ready: bool) -> dict[str, Any]:
    image = container.get("image") or "fake"
    return {
        "name": container["name"], "image": image, "imageID": f"fake://{image}",
        "containerID": f"fake://{pod['metadata']['uid']}/{container['name']}",
        "ready": ready, "started": ready, "restartCount": 0, "state": state,
    }
