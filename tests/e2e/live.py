"""Running the live scheduler in e2e tests: isolated tenants and an in-process scheduler.

Why tenants: the session control plane is shared, and nodes and Queues are cluster-scoped. A
``Tenant`` gives one test its own namespace, node pool (``gangscheduler.io/pool``), Queue (quota
only in that pool, only that namespace) and ``schedulerName``. Its pods carry all of them plus a
nodeSelector on the pool, so a test's scheduler neither takes another test's pods for its own nor
places on another test's nodes.

Here the scheduler runs in process (a thread), which lets a test wrap the binder to make a race
deterministic; ``live_process`` runs it as a child process, the only honest way to SIGKILL it
in the middle of a bind. ``PodWatch`` records every nodeName each pod was announced with, so a
pod bound twice cannot slip between two polling reads.

A watch runs behind the apiserver: a pod a test read bound may not have reached the watch yet.
A test that reads what the watch recorded about a pod it saw through the API first waits until
the watch saw it too (``PodWatch.seen_bound``, ``PodWatch.seen_deleted``); since one watch
stream delivers a namespace's changes in resourceVersion order, everything that happened before
that change has been recorded as well.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from scheduler.kube.client import KubeClient, connect
from scheduler.kube.read import informer
from scheduler.kube.runner import LiveScheduler
from scheduler.run.config import SchedulerConfig
from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import (
    PODGROUP_GROUP,
    PODGROUP_PLURAL,
    PODGROUP_VERSION,
    SIMULATED_RUNTIME,
    ControlPlane,
    wait_for,
)

POOL_LABEL = "gangscheduler.io/pool"
QUEUE_LABEL = "gangscheduler.io/queue"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
GPU = "nvidia.com/gpu"
QUEUES = ("gangscheduler.io", "v1alpha1", "queues")


@dataclass
class Tenant:
    """One test's namespace, node pool, Queue and schedulerName (see the module docstring)."""

    cp: ControlPlane
    namespace: str
    pool: str
    queue: str
    scheduler_name: str

    @classmethod
    def create(cls, cp: ControlPlane, gpu_quota: int = 1000) -> Tenant:
        tag = uuid.uuid4().hex[:8]
        tenant = cls(cp, cp.new_namespace("live"), f"pool-{tag}", f"q-{tag}", f"gs-{tag}")
        tenant.create_queue(gpu_quota)
        return tenant

    # Cluster-scoped objects --------------------------------------------------------------
    def create_queue(self, gpus: int) -> None:
        """A Queue admitting only this namespace, with quota only in this tenant's pool."""
        body = {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
                "metadata": {"name": self.queue},
                "spec": {"namespaces": [self.namespace],
                         "quotas": [{"pool": self.pool, "nominal": {GPU: gpus}}]}}
        rest.call(self.cp.custom.create_cluster_custom_object, *QUEUES, body)

    def create_nodes(self, count: int, gpus: int = 8) -> list[str]:
        return [self.cp.create_node(f"{self.pool}-n{i}", gpus=gpus, labels={POOL_LABEL: self.pool})
                for i in range(count)]

    # Workloads ---------------------------------------------------------------------------
    def create_pod(self, name: str, gpus: int = 1, group: str | None = None,
                   runtime_s: float | None = None, scheduler_name: str | None = None,
                   owner: Mapping[str, Any] | None = None,
                   labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        """A pod of this tenant (its scheduler, queue and pool unless told otherwise)."""
        meta: dict[str, Any] = {"name": name, "labels": {QUEUE_LABEL: self.queue, **(labels or {})},
                                "annotations": {}}
        if group:
            meta["labels"][GROUP_LABEL] = group
        if runtime_s is not None:
            meta["annotations"][SIMULATED_RUNTIME] = str(runtime_s)
        if owner:
            meta["ownerReferences"] = [dict(owner)]
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": self.pod_spec(gpus, scheduler_name)}
        return rest.call(self.cp.core.create_namespaced_pod, self.namespace, body)

    def pod_spec(self, gpus: int = 1, scheduler_name: str | None = None) -> dict[str, Any]:
        """A pod spec of this tenant: its scheduler and pool, `gpus` GPUs, nothing to wait for
        on deletion."""
        resources: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
        if gpus:
            resources["requests"][GPU] = str(gpus)
            resources["limits"] = {GPU: str(gpus)}
        return {"schedulerName": scheduler_name or self.scheduler_name, "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0, "nodeSelector": {POOL_LABEL: self.pool},
                "containers": [{"name": "main", "image": "registry.invalid/train:latest",
                                "resources": resources}]}

    def create_job(self, name: str, parallelism: int, completions: int | None = None,
                   gpus: int = 1, runtime_s: float | None = None,
                   **spec: Any) -> dict[str, Any]:
        """A batch/v1 Job of this tenant's pods, run by the real Job controller; `spec` adds
        Job spec fields (completionMode, backoffLimit, podFailurePolicy, ...)."""
        annotations = {SIMULATED_RUNTIME: str(runtime_s)} if runtime_s is not None else {}
        template = {"metadata": {"labels": {QUEUE_LABEL: self.queue}, "annotations": annotations},
                    "spec": self.pod_spec(gpus)}
        body = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "labels": {QUEUE_LABEL: self.queue}},
                "spec": {"parallelism": parallelism,
                         "completions": parallelism if completions is None else completions,
                         "template": template, **spec}}
        return rest.call(client.BatchV1Api(self.cp.api).create_namespaced_job, self.namespace,
                         body)

    def job_pods(self, job: str) -> dict[str, dict[str, Any]]:
        """The pods the Job controller made for `job`, by name."""
        return {n: p for n, p in self.pods().items()
                if p["metadata"].get("labels", {}).get(JOB_NAME_LABEL) == job}

    def create_group(self, name: str, min_member: int,
                     min_resources: dict[str, str] | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"minMember": min_member}
        if min_resources is not None:
            spec["minResources"] = min_resources
        body = {"apiVersion": f"{PODGROUP_GROUP}/{PODGROUP_VERSION}", "kind": "PodGroup",
                "metadata": {"name": name, "labels": {QUEUE_LABEL: self.queue}},
                "spec": spec}
        return rest.call(self.cp.custom.create_namespaced_custom_object, PODGROUP_GROUP,
                         PODGROUP_VERSION, self.namespace, PODGROUP_PLURAL, body)

    def create_gang(self, name: str, size: int, gpus: int = 1, min_member: int | None = None,
                    runtime_s: float | None = None) -> list[str]:
        """A PodGroup (minMember = size unless told) and its pods ``name-0`` ... ``name-N``."""
        self.create_group(name, min_member if min_member is not None else size)
        names = [f"{name}-{i}" for i in range(size)]
        for pod in names:
            self.create_pod(pod, gpus=gpus, group=name, runtime_s=runtime_s)
        return names

    def delete_pod(self, name: str) -> None:
        self.cp.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0,
                                           _preload_content=False)

    # Reading -----------------------------------------------------------------------------
    def pods(self) -> dict[str, dict[str, Any]]:
        """Every pod of the namespace by name."""
        items = rest.call(self.cp.core.list_namespaced_pod, self.namespace)["items"]
        return {p["metadata"]["name"]: p for p in items}

    def nodes_of(self, names: list[str]) -> dict[str, str]:
        """name -> nodeName ("" when pending) for the named pods that exist."""
        pods = self.pods()
        return {n: str(pods[n]["spec"].get("nodeName") or "") for n in names if n in pods}

    def bound(self, names: list[str]) -> list[str]:
        return sorted(n for n, node in self.nodes_of(names).items() if node)

    def all_bound(self, names: list[str]) -> bool:
        return len(self.bound(names)) == len(names)

    def phases(self, names: list[str]) -> dict[str, str]:
        pods = self.pods()
        return {n: str(pods[n].get("status", {}).get("phase")) for n in names if n in pods}

    def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        """``events.k8s.io/v1`` events of the namespace (optionally of one reason)."""
        items = rest.call(client.EventsV1Api(self.cp.api).list_namespaced_event,
                          self.namespace)["items"]
        return [e for e in items if reason is None or e.get("reason") == reason]

    def group_status(self, name: str) -> dict[str, Any]:
        return self.cp.get_pod_group(self.namespace, name).get("status") or {}


def unschedulable_message(pod: Mapping[str, Any]) -> str:
    """The ``PodScheduled=False`` message of a pod ("" when it has none)."""
    for c in pod.get("status", {}).get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message") or c.get("reason") or "?")
    return ""


# The scheduler, in process ----------------------------------------------------------------
def tenant_config(tenant: Tenant, **overrides: Any) -> SchedulerConfig:
    """A config serving only *tenant*: its schedulerName, its queue as default, no Lease, fast
    retries (a test waits seconds, not the production minutes)."""
    base = SchedulerConfig(scheduler_name=tenant.scheduler_name, default_queue=tenant.queue,
                           cycle_interval_seconds=0.5, bind_backoff_initial_seconds=1.0,
                           bind_backoff_max_seconds=5.0, event_min_interval_seconds=1.0)
    base = dataclasses.replace(base, leader_election=dataclasses.replace(
        base.leader_election, enabled=False))
    return dataclasses.replace(base, **overrides)


@dataclass
class InProcessScheduler:
    """``LiveScheduler`` running in a background thread; ``stop()`` joins it."""

    live: LiveScheduler
    thread: threading.Thread | None = None
    errors: list[BaseException] = field(default_factory=list)
    stopped: bool = False

    @classmethod
    def start(cls, cp: ControlPlane, config: SchedulerConfig) -> InProcessScheduler:
        client = connect(str(cp.kubeconfig), pool_maxsize=max(64, config.bind_concurrency * 2))
        runner = cls(LiveScheduler(config, client, poll_interval=0.02))
        runner.live.start(sync_timeout=60)
        runner.thread = threading.Thread(target=runner._run, name="live-scheduler", daemon=True)
        runner.thread.start()
        return runner

    def during_cycles(self, n: int, timeout_s: float = 120.0,
                      interval_s: float = 0.2) -> Iterator[None]:
        """Yield every *interval_s* until the loop has begun *n* more passes (and their status
        writes are out): for a test that checks, throughout, that something does *not*
        happen. Each pass runs a cycle if anything changed or came due, and otherwise
        confirms that a cycle would only repeat the last plan (``LiveScheduler.passes``), so
        it gives the test *n* chances however loaded the machine, where a fixed sleep may
        cover no pass at all."""
        first = self.live.passes + 1  # one under way now may predate the caller
        deadline = time.monotonic() + timeout_s
        while self.live.passes < first + n:
            assert time.monotonic() < deadline, f"fewer than {n} passes in {timeout_s:.0f} s"
            yield
            time.sleep(interval_s)
        assert self.live.actuator.writer.flush(timeout_s), "the status writer did not drain"
        yield

    def run_cycles(self, n: int = 4) -> None:
        """Wait out *n* more passes of the loop (``during_cycles``)."""
        for _ in self.during_cycles(n):
            pass

    def _run(self) -> None:
        try:
            self.live.run()
        except BaseException as exc:  # surfaced by stop(): a dead loop must fail the test
            self.errors.append(exc)

    def stop(self) -> None:
        """Stop and join the loop; again is a no-op (a test that restarts the scheduler
        stops one its fixture stops too)."""
        if self.stopped:
            return
        self.stopped = True
        self.live.stop()
        if self.thread is not None:
            self.thread.join(timeout=30)
        client = self.live.client
        if isinstance(client, KubeClient):
            client.close()
        assert not self.errors, f"the scheduling loop died: {self.errors[0]!r}"


# Watching pods --------------------------------------------------------------------------------
class PodWatch:
    """Every nodeName each pod of a namespace was seen with, from a watch (not polling), so a
    re-bind cannot slip between two reads."""

    def __init__(self, cp: ControlPlane, namespace: str) -> None:
        self.client = connect(str(cp.kubeconfig))
        self._lock = threading.Lock()
        self.nodes: dict[str, list[str]] = {}  # uid -> distinct non-empty nodeNames, in order
        self.names: dict[str, str] = {}  # uid -> name
        self.first_bound: dict[str, float] = {}  # name -> monotonic time first seen bound
        self.finished: dict[str, float] = {}  # name -> monotonic time first seen finished
        self.deleted: dict[str, float] = {}  # name -> monotonic time its deletion was seen
        self.seen: dict[str, list[dict[str, Any]]] = {}  # name -> every version, in order
        #: Every change in the order the watch delivered it (the namespace's resourceVersion
        #: order): (event, name, uid, nodeName, phase); for pods recreated under one name.
        self.history: list[tuple[informer.EventType, str, str, str, str]] = []
        kind = informer.ResourceKind("pods", f"/api/v1/namespaces/{namespace}/pods")
        self.informer = informer.Informer(self.client, kind, self._handle)

    def __enter__(self) -> PodWatch:
        self.informer.start()
        assert self.informer.wait_for_sync(30), "pod watch did not sync"
        return self

    def __exit__(self, *exc: object) -> None:
        self.informer.stop()
        self.client.close()

    def _handle(self, event: informer.EventType, obj: dict[str, Any]) -> None:
        meta, node = obj["metadata"], str(obj.get("spec", {}).get("nodeName") or "")
        with self._lock:
            self.seen.setdefault(meta["name"], []).append(obj)
            self.history.append((event, meta["name"], meta["uid"], node,
                                 str(obj.get("status", {}).get("phase") or "")))
            seen = self.nodes.setdefault(meta["uid"], [])
            self.names[meta["uid"]] = meta["name"]
            if node and (not seen or seen[-1] != node):
                seen.append(node)
                self.first_bound.setdefault(meta["name"], time.monotonic())
            if obj.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                self.finished.setdefault(meta["name"], time.monotonic())
            if event is informer.EventType.DELETED:
                self.deleted.setdefault(meta["name"], time.monotonic())

    def bound_names(self) -> set[str]:
        with self._lock:
            return {self.names[u] for u, nodes in self.nodes.items() if nodes}

    def seen_bound(self, names: Iterable[str], timeout_s: float = 60.0) -> None:
        """Wait until the watch has seen every named pod bound (a test read them bound
        through the API, which the watch may not have delivered yet)."""
        wanted = set(names)
        wait_for(lambda: wanted <= self.bound_names(), timeout_s,
                 what=f"the watch to see {sorted(wanted)} bound")

    def seen_deleted(self, names: Iterable[str], timeout_s: float = 60.0) -> None:
        """Wait until the watch has seen every named pod deleted."""
        wanted = set(names)

        def seen() -> bool:
            with self._lock:
                return wanted <= set(self.deleted)

        wait_for(seen, timeout_s, what=f"the watch to see {sorted(wanted)} deleted")

    def phases(self, name: str) -> list[str]:
        """The distinct phases pod `name` went through, in order."""
        with self._lock:
            phases = [str((o.get("status") or {}).get("phase")) for o in self.seen.get(name, [])]
        return [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p]

    def last(self, name: str) -> dict[str, Any]:
        """The last version of pod `name` seen (the deleted object once it is gone)."""
        with self._lock:
            return self.seen[name][-1]

    def rebinds(self) -> dict[str, list[str]]:
        """Pods (by name) whose nodeName changed once set: must always be empty."""
        with self._lock:
            return {self.names[u]: list(n) for u, n in self.nodes.items() if len(n) > 1}
