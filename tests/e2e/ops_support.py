"""What the operations e2e tests (``test_ops_*``) add to ``tests/e2e/live.py``: Queue trees,
PriorityClasses, pods that linger while terminating, a scheduler with its metrics served, and
a pod watch that also records how each pod was deleted.

Isolation is live.py's: every test has its own namespace, pool, schedulerName and here its own
Queues (named after the test's tag), since Queues and PriorityClasses are cluster-scoped.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from scheduler.kube.client import connect
from scheduler.kube.read import informer
from scheduler.kube.runner import LiveScheduler
from scheduler.model.workloads import LAST_CHECKPOINT_ANNOTATION
from scheduler.run.serve import serve
from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import (
    PODGROUP_GROUP,
    PODGROUP_PLURAL,
    PODGROUP_VERSION,
    SIMULATED_SHUTDOWN,
    ControlPlane,
)
from tests.e2e.live import (
    GPU,
    POOL_LABEL,
    QUEUE_LABEL,
    QUEUES,
    InProcessScheduler,
    PodWatch,
    Tenant,
    tenant_config,
)

# A finalizer: the pod lingers while terminating. Its container also runs on for its whole
# grace period (kwok, no simulated-shutdown annotation) until `release` lets it exit.
LINGER = "e2e.gangscheduler.io/linger"
# What a lingering pod asks for: more than any test's eviction cap, so the cap (the scheduler's
# evictionGracePeriodSeconds) is the grace it is evicted with.
LINGER_GRACE_S = 3600


@dataclass
class Ops:
    """A test's tenant plus helpers for cluster-scoped objects named after its tag."""

    cp: ControlPlane
    tenant: Tenant
    tag: str
    cleanup: list[Any] = field(default_factory=list)

    @property
    def ns(self) -> str:
        return self.tenant.namespace

    def name(self, suffix: str) -> str:
        return f"{self.tag}-{suffix}"

    # Queues ----------------------------------------------------------------------------------
    def queue(self, suffix: str, gpus: int | None = None, parent: str | None = None,
              **spec: Any) -> str:
        """A Queue admitting this namespace; ``gpus`` of nominal quota in this pool."""
        body: dict[str, Any] = {"namespaces": [self.ns], **spec}
        if gpus is not None:
            body["quotas"] = [{"pool": self.tenant.pool, "nominal": {GPU: gpus}}]
        if parent:
            body["parent"] = self.name(parent)
        name = self.name(suffix)
        rest.call(self.cp.custom.create_cluster_custom_object, *QUEUES, {
            "apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": name}, "spec": body})
        return name

    def patch_queue(self, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        return rest.call(self.cp.custom.patch_cluster_custom_object, *QUEUES, name,
                         {"spec": dict(spec)})

    def get_queue(self, name: str) -> dict[str, Any]:
        return rest.call(self.cp.custom.get_cluster_custom_object, *QUEUES, name)

    def queue_status(self, name: str) -> dict[str, Any]:
        return self.get_queue(name).get("status") or {}

    def valid_condition(self, name: str) -> dict[str, Any]:
        conditions = self.queue_status(name).get("conditions") or []
        return next((c for c in conditions if c.get("type") == "Valid"), {})

    def queue_table(self) -> dict[str, dict[str, Any]]:
        """``kubectl get queues``: the server-side Table (printer columns) by queue name."""
        resp = self.cp.api.rest_client.request(  # the admin authenticates by client cert
            "GET", f"{self.cp.server}/apis/gangscheduler.io/v1alpha1/queues",
            headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        resp.read()
        table = json.loads(resp.data)
        names = [c["name"] for c in table["columnDefinitions"]]
        return {row["cells"][0]: dict(zip(names, row["cells"], strict=True))
                for row in table["rows"]}

    # Priorities and pods ---------------------------------------------------------------------
    def priority_class(self, suffix: str, value: int,
                       preemption_policy: str | None = None) -> str:
        """A PriorityClass; *preemption_policy* (``"Never"``) is copied by the apiserver's
        Priority admission plugin into ``spec.preemptionPolicy`` of the pods that use it."""
        name = self.name(suffix)
        body: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                "metadata": {"name": name}, "value": value}
        if preemption_policy is not None:
            body["preemptionPolicy"] = preemption_policy
        rest.call(client.SchedulingV1Api(self.cp.api).create_priority_class, body)
        return name

    def pod(self, name: str, gpus: int, queue: str, group: str | None = None,
            priority_class: str | None = None, linger: bool = False,
            labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "labels": {QUEUE_LABEL: queue, **(labels or {})}}
        if group:
            meta["labels"]["scheduling.x-k8s.io/pod-group"] = group
        if linger:
            meta["finalizers"] = [LINGER]
        else:  # a trainer that checkpoints and exits a second after SIGTERM, as kwok plays it
            meta["annotations"] = {SIMULATED_SHUTDOWN: "1"}
        spec: dict[str, Any] = {
            "schedulerName": self.tenant.scheduler_name, "restartPolicy": "Never",
            "terminationGracePeriodSeconds": LINGER_GRACE_S if linger else 30,
            "nodeSelector": {POOL_LABEL: self.tenant.pool},
            "containers": [{"name": "main", "image": "registry.invalid/train:latest",
                            "resources": {"requests": {"cpu": "100m", GPU: str(gpus)},
                                          "limits": {GPU: str(gpus)}}}]}
        if priority_class:
            spec["priorityClassName"] = priority_class
        return rest.call(self.cp.core.create_namespaced_pod, self.ns,
                         {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})

    def gang(self, name: str, size: int, gpus: int, queue: str,
             priority_class: str | None = None, linger: bool = False,
             present: int | None = None) -> list[str]:
        """A PodGroup (minMember = size) in *queue* and its pods ``name-0`` ... (only
        *present* of them when given)."""
        rest.call(self.cp.custom.create_namespaced_custom_object, PODGROUP_GROUP,
                  PODGROUP_VERSION, self.ns, PODGROUP_PLURAL,
                  {"apiVersion": f"{PODGROUP_GROUP}/{PODGROUP_VERSION}", "kind": "PodGroup",
                   "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
                   "spec": {"minMember": size}})
        names = [f"{name}-{i}" for i in range(size if present is None else present)]
        for pod in names:
            self.pod(pod, gpus, queue, group=name, priority_class=priority_class, linger=linger,
                     labels={"gang": name})
        return names

    def budget(self, name: str, gang: str, **spec: Any) -> None:
        """A PodDisruptionBudget over the pods of *gang* (``minAvailable``, ``maxUnavailable``)."""
        rest.call(client.PolicyV1Api(self.cp.api).create_namespaced_pod_disruption_budget,
                  self.ns, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                            "metadata": {"name": name},
                            "spec": {**spec, "selector": {"matchLabels": {"gang": gang}}}})

    def checkpoint(self, group: str, at: float) -> None:
        """Record on PodGroup *group* that its gang last checkpointed at *at* (epoch seconds):
        what a victim loses if evicted is counted from then (the cheapest victim goes first)."""
        stamp = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        rest.call(self.cp.custom.patch_namespaced_custom_object, PODGROUP_GROUP,
                  PODGROUP_VERSION, self.ns, PODGROUP_PLURAL, group,
                  {"metadata": {"annotations": {LAST_CHECKPOINT_ANNOTATION: stamp}}})

    def release(self, pod: str) -> None:
        """The victim's checkpoint is done: its container exits now (kwok makes the pod
        Failed) and the linger finalizer goes, so a terminating pod is then really gone. Any
        other finalizer stays (the Job controller's counts the pod's end before it goes).

        The finalizer list is written with the resourceVersion it was read at: a controller
        may drop its own finalizer in between, and a list read before that would put it back
        on a pod being deleted, which the apiserver refuses (422). A conflict, or that
        refusal, means the pod changed: read it again. A pod already gone is released."""
        try:
            rest.call(self.cp.core.patch_namespaced_pod, pod, self.ns,
                      {"metadata": {"annotations": {SIMULATED_SHUTDOWN: "0"}}},
                      _content_type=rest.MERGE_PATCH)
        except client.ApiException as exc:
            if exc.status == 404:
                return
            raise
        for _ in range(20):
            current = self.cp.get_pod(self.ns, pod)
            finalizers = (current or {}).get("metadata", {}).get("finalizers") or []
            if current is None or LINGER not in finalizers:
                return
            try:
                rest.call(self.cp.core.patch_namespaced_pod, pod, self.ns,
                          {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"],
                                        "finalizers": [f for f in finalizers if f != LINGER]}},
                          _content_type=rest.MERGE_PATCH)
                return
            except client.ApiException as exc:
                if exc.status == 404:
                    return
                if exc.status not in (409, 422):
                    raise
        raise AssertionError(f"{pod}: its finalizer list kept changing under 20 writes")

    def release_all(self) -> None:
        for name, pod in self.tenant.pods().items():
            if LINGER in (pod["metadata"].get("finalizers") or ()):
                self.release(name)

    # The scheduler ---------------------------------------------------------------------------
    def start_scheduler(self, metrics_port: bool = False, identity: str | None = None,
                        **overrides: Any) -> InProcessScheduler:
        """An in-process scheduler for this tenant; Queue status every second, not every 3.
        Replicas sharing a Lease need their own *identity* (the default is host and pid)."""
        config = tenant_config(self.tenant, **overrides)
        kube = connect(str(self.cp.kubeconfig), pool_maxsize=max(64, config.bind_concurrency * 2))
        runner = InProcessScheduler(LiveScheduler(config, kube, poll_interval=0.02,
                                                  queue_status_interval=1.0,
                                                  identity=identity))
        self.cleanup.append(runner.stop)
        runner.live.start(sync_timeout=60)
        runner.thread = threading.Thread(target=runner._run, name="ops-scheduler", daemon=True)
        runner.thread.start()
        if metrics_port:
            server = serve(runner.live.metrics.registry, runner.live.health, "127.0.0.1", 0)
            self.cleanup.append(server.shutdown)
            runner.metrics_port = server.server_address[1]  # type: ignore[attr-defined]
        return runner


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """GET /metrics and parse it: (sample name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Mapping[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
          **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


class DeletionWatch(PodWatch):
    """``PodWatch`` that also keeps, per pod name, the first deletion it saw (its grace
    period)."""

    def __init__(self, cp: ControlPlane, namespace: str) -> None:
        super().__init__(cp, namespace)
        self.deleting: dict[str, int | None] = {}  # name -> deletionGracePeriodSeconds

    def __enter__(self) -> DeletionWatch:
        super().__enter__()
        return self

    def _handle(self, event: informer.EventType, obj: dict[str, Any]) -> None:
        super()._handle(event, obj)
        meta = obj["metadata"]
        with self._lock:
            if meta.get("deletionTimestamp") and meta["name"] not in self.deleting:
                self.deleting[meta["name"]] = meta.get("deletionGracePeriodSeconds")


def ops_for(control_plane: ControlPlane) -> Iterator[Ops]:
    """The body of each ``test_ops_*`` module's ``ops`` fixture: a tenant (its own Queues come
    later, from the test) and cleanup of whatever the test started."""
    tenant = Tenant.create(control_plane)
    tag = tenant.pool.removeprefix("pool-")
    o = Ops(control_plane, tenant, f"ops-{tag}")
    yield o
    for stop in reversed(o.cleanup):
        stop()
    o.release_all()
