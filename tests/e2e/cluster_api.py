"""Helpers the e2e tests use against the dev cluster: create nodes, pods and PodGroups, bind,
and wait for conditions.

Why plain dicts: the generated client models are strict and slow, and a test wants to assert on
exactly what the apiserver returned. Calls go through `scheduler.tools.devcluster.rest`.
"""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client

from scheduler.tools.devcluster import kwok, nodes, rest
from scheduler.tools.devcluster.cluster import DevCluster
from scheduler.world import clusterspec
from tests.e2e.capacity import CapacityWatch

T = TypeVar("T")
PODGROUP_GROUP, PODGROUP_VERSION, PODGROUP_PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"
SCHEDULER_NAME = "gang-scheduler"
SIMULATED_RUNTIME = kwok.SIMULATED_RUNTIME
SIMULATED_EXIT_CODE = kwok.SIMULATED_EXIT_CODE
SIMULATED_SHUTDOWN = kwok.SIMULATED_SHUTDOWN


def answers_ready(port: int) -> bool:
    """Does the scheduler process serving on *port* answer ``/readyz`` with 200 (caches
    synced)? False while it is starting or unreachable."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def wait_for(check: Callable[[], T], timeout_s: float = 30.0, interval_s: float = 0.1,
             what: str = "condition") -> T:
    """Poll `check` until it returns something truthy and return that; fail with the last value."""
    deadline = time.monotonic() + timeout_s
    last: T = check()
    while not last:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}; "
                                 f"last value: {last!r}")
        time.sleep(interval_s)
        last = check()
    return last


@dataclass
class ControlPlane:
    """A running dev cluster plus API helpers; what the `control_plane` fixture yields."""

    cluster: DevCluster
    capacity: CapacityWatch | None = None  # the over-commit watch of this cluster, if any
    operators: bool = False  # JobSet and Kubeflow Trainer run
    api: client.ApiClient = field(init=False)

    def __post_init__(self) -> None:
        self.api = self.cluster.api_client()
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig

    @property
    def server(self) -> str:
        assert self.cluster.state is not None
        return self.cluster.state.server

    # Namespaces ---------------------------------------------------------------------------
    def new_namespace(self, prefix: str = "e2e") -> str:
        """A fresh namespace, ready for pods (its `default` ServiceAccount exists).

        Tests do not delete their namespaces: pods left running there cost nothing.
        """
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        rest.call(self.core.create_namespace, {"metadata": {"name": name}})
        wait_for(lambda: rest.exists(self.core.read_namespaced_service_account, "default", name),
                 30, what=f"ServiceAccount {name}/default")
        return name

    # Nodes -------------------------------------------------------------------------------
    def create_node(self, name: str | None = None, gpus: int = 8, cpu: str = "64",
                    memory: str = "512Gi", pods: int = 110, labels: Mapping[str, str] | None = None,
                    taints: list[dict[str, str]] | None = None,
                    annotations: Mapping[str, str] | None = None) -> str:
        """An ad hoc fake GPU node (unique name by default), Ready and without extra taints."""
        name = name or f"node-{uuid.uuid4().hex[:8]}"
        allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods),
                       "ephemeral-storage": "1Ti", "nvidia.com/gpu": str(gpus)}
        nodes.create_node(self.api, name, {"kubernetes.io/hostname": name, **(labels or {})},
                          allocatable, taints, annotations=annotations)
        return name

    def create_nodes(self, spec: clusterspec.ClusterSpec) -> list[str]:
        return nodes.create_from_spec(self.api, spec)

    def get_node(self, name: str) -> dict[str, Any]:
        return rest.call(self.core.read_node, name)

    # Pods --------------------------------------------------------------------------------
    def create_pod(self, namespace: str, name: str | None = None, gpus: int = 0,
                   cpu: str = "100m", memory: str = "128Mi",
                   scheduler_name: str = SCHEDULER_NAME, labels: Mapping[str, str] | None = None,
                   annotations: Mapping[str, str] | None = None,
                   runtime_s: float | None = None, priority_class: str | None = None
                   ) -> dict[str, Any]:
        """A pod for `scheduler_name`; `runtime_s` makes kwok finish it that long after it
        started."""
        name = name or f"pod-{uuid.uuid4().hex[:8]}"
        requests = {"cpu": cpu, "memory": memory}
        limits: dict[str, str] = {}
        if gpus:
            requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpus)
        notes = dict(annotations or {})
        if runtime_s is not None:
            notes[SIMULATED_RUNTIME] = str(runtime_s)
        spec: dict[str, Any] = {
            "schedulerName": scheduler_name, "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "main", "image": "registry.invalid/train:latest",
                            "resources": {"requests": requests, "limits": limits}}],
        }
        if priority_class:
            spec["priorityClassName"] = priority_class
        body = {"apiVersion": "v1", "kind": "Pod", "spec": spec,
                "metadata": {"name": name, "labels": dict(labels or {}), "annotations": notes}}
        return rest.call(self.core.create_namespaced_pod, namespace, body)

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return rest.call(self.core.read_namespaced_pod, name, namespace)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def bind(self, namespace: str, pod: str, node: str) -> int:
        """Bind through the `pods/binding` subresource; returns the HTTP status (201 on success).

        Without parsing the reply: the generated client cannot (kubernetes-client/python
        issues 547 and 825).
        """
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        return rest.code_of(self.core.create_namespaced_pod_binding, pod, namespace, body)

    def wait_pod_phase(self, namespace: str, name: str, phase: str,
                       timeout_s: float = 30.0) -> dict[str, Any]:
        def current() -> dict[str, Any]:
            pod = self.get_pod(namespace, name)
            return pod if pod and pod.get("status", {}).get("phase") == phase else {}

        return wait_for(current, timeout_s, what=f"pod {namespace}/{name} {phase}")

    # PodGroups ---------------------------------------------------------------------------
    def create_pod_group(self, namespace: str, name: str, min_member: int,
                         min_resources: Mapping[str, str] | None = None,
                         schedule_timeout_seconds: int | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"minMember": min_member}
        if min_resources:
            spec["minResources"] = dict(min_resources)
        if schedule_timeout_seconds is not None:
            spec["scheduleTimeoutSeconds"] = schedule_timeout_seconds
        body = {"apiVersion": f"{PODGROUP_GROUP}/{PODGROUP_VERSION}", "kind": "PodGroup",
                "metadata": {"name": name}, "spec": spec}
        return rest.call(self.custom.create_namespaced_custom_object,
                         PODGROUP_GROUP, PODGROUP_VERSION, namespace, PODGROUP_PLURAL, body)

    def get_pod_group(self, namespace: str, name: str) -> dict[str, Any]:
        return rest.call(self.custom.get_namespaced_custom_object,
                         PODGROUP_GROUP, PODGROUP_VERSION, namespace, PODGROUP_PLURAL, name)

    # Identities --------------------------------------------------------------------------
    def service_account_kubeconfig(self, namespace: str, name: str, seconds: int = 3600) -> Path:
        """Create ServiceAccount `namespace/name` if needed and a kubeconfig with a minted token."""
        return self.cluster.service_account_kubeconfig(namespace, name, seconds, create=True)
