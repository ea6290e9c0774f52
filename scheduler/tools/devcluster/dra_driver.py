"""The fake DRA driver: a process that keeps the ResourceSlices of each fake GPU node (one; a
node of MIG devices has several: ``dra_mig``) in step with the nodes, and a DeviceClass per
GPU product.

Why a process of its own (not a thread of whoever ran ``up``): a detached dev cluster outlives
the command that started it, and tests add and delete nodes for as long as the cluster runs.
It is the part of a DRA driver that talks to the apiserver (a real one runs it inside its
kubelet plugin, one per node); the part that prepares devices for a container does not exist
here, since kwok runs no container (README.md, "Dynamic Resource Allocation").

How: list the fake nodes, publish or fix every slice, delete the slices of nodes that are gone
(or no longer publish), then watch nodes from that list's resourceVersion and do the same per
event; a watch that ends or expires starts over with a list. A slice is rewritten only when
what it should say changed (``dra.SPEC_HASH_ANNOTATION``), with the pool generation bumped, as
a driver must. Each slice is owned by its Node, so the garbage collector deletes it with the
node even when this process is not running.

Credentials: its own client certificate (``certs.CLIENTS["dra-driver"]``) bound to
``ROLE``: nodes read-only, ResourceSlices and DeviceClasses written.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kubernetes import client, watch

from scheduler.model.nodes import DEFAULT_TOPOLOGY_LABELS
from scheduler.tools.devcluster import certs, dra, kubeconfig, nodes, procs, rest

NAME = "dra-driver"
ROLE = "gang-scheduler-dev-dra-driver"
READY_TIMEOUT_S = 60.0
PUBLISHED_TIMEOUT_S = 60.0
WATCH_TIMEOUT_S = 240
_BOOT = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
         "from scheduler.tools.devcluster.dra_driver import main; sys.exit(main())")
RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["deviceclasses"],
     "verbs": ["get", "list", "watch", "create"]},
]


class Publisher:
    """Writes what `dra` builds; remembers what it wrote to skip unchanged nodes."""

    def __init__(self, api: client.ApiClient, topology_labels: Sequence[str]) -> None:
        self.core = client.CoreV1Api(api)
        self.resource = client.ResourceV1Api(api)
        self.topology_labels = tuple(topology_labels)
        self.written: dict[str, str] = {}  # node -> spec hash of its slice
        self.classes: set[str] = set()

    def ensure_class(self, product: str | None) -> None:
        body = dra.device_class(product)
        name = body["metadata"]["name"]
        if name in self.classes:
            return
        try:
            rest.call(self.resource.create_device_class, body)
            say(f"created DeviceClass {name}")
        except client.ApiException as exc:
            if exc.status != 409:
                raise
        self.classes.add(name)

    def node(self, node: Mapping[str, Any]) -> None:
        """Publish, fix or withdraw the slices of one node as it is now. A pool of several
        slices (partitionable GPUs: devices and counter sets) is rewritten all at once at
        the next generation, and a slice it no longer has is deleted."""
        name = node["metadata"]["name"]
        if not dra.publishes(node):
            self.withdraw(name)
            return
        self.ensure_class(dra.product_of(node))
        wanted = dra.resource_slices(node, topology_labels=self.topology_labels)
        digest = wanted[0]["metadata"]["annotations"][dra.SPEC_HASH_ANNOTATION]
        if self.written.get(name) == digest:
            return
        current = {s["metadata"]["name"]: s for s in self._slices_of(name)}
        if current and all((s["metadata"].get("annotations") or {}).get(
                dra.SPEC_HASH_ANNOTATION) == digest for s in current.values()) and set(
                current) == {w["metadata"]["name"] for w in wanted}:
            self.written[name] = digest
            return
        if current:
            generation = max(s["spec"]["pool"]["generation"] for s in current.values()) + 1
            wanted = dra.resource_slices(node, generation=generation,
                                         topology_labels=self.topology_labels)
        for body in wanted:
            slice_name = body["metadata"]["name"]
            if slice_name in current:
                body["metadata"]["resourceVersion"] = (
                    current[slice_name]["metadata"]["resourceVersion"])
                rest.call(self.resource.replace_resource_slice, slice_name, body)
                say(f"updated {slice_name} (pool generation "
                    f"{body['spec']['pool']['generation']})")
            else:
                rest.call(self.resource.create_resource_slice, body)
                say(f"published {slice_name}: {len(body['spec'].get('devices') or [])} "
                    f"devices, {len(body['spec'].get('sharedCounters') or [])} counter sets")
        for stale in current.keys() - {w["metadata"]["name"] for w in wanted}:
            rest.code_of(self.resource.delete_resource_slice, stale)
        self.written[name] = digest

    def _slices_of(self, node_name: str) -> list[dict[str, Any]]:
        return list(rest.call(
            self.resource.list_resource_slice,
            field_selector=f"spec.driver={dra.DRIVER},spec.nodeName={node_name}")["items"])

    def withdraw(self, node_name: str) -> None:
        """Delete the node's slices, if this driver published any."""
        self.written.pop(node_name, None)
        for found in self._slices_of(node_name):
            try:
                rest.code_of(self.resource.delete_resource_slice, found["metadata"]["name"])
                say(f"withdrew {found['metadata']['name']}")
            except client.ApiException as exc:
                if exc.status != 404:
                    raise

    def resync(self) -> str:
        """Every node at once; the slices of nodes that are gone go. Returns the nodes'
        list resourceVersion to watch from."""
        slices = rest.call(self.resource.list_resource_slice,
                           field_selector=f"spec.driver={dra.DRIVER}")["items"]
        hashes: dict[str, set[str | None]] = {}
        for s in slices:
            hashes.setdefault(str(s["spec"].get("nodeName")), set()).add(
                (s["metadata"].get("annotations") or {}).get(dra.SPEC_HASH_ANNOTATION))
        # (a node whose slices disagree is rewritten)
        found = {n: next(iter(h)) if len(h) == 1 else None for n, h in hashes.items()}
        # Forget what is no longer there as written (someone deleted or changed a slice).
        self.written = {n: h for n, h in self.written.items() if found.get(n) == h}
        listed = rest.call(self.core.list_node,
                           label_selector=f"{nodes.FAKE_NODE_LABEL}=true")
        present = {n["metadata"]["name"] for n in listed["items"]}
        for node in listed["items"]:
            self.node(node)
        for node_name in found.keys() - present:
            self.withdraw(node_name)
        return str(listed["metadata"]["resourceVersion"])

    def follow(self, resource_version: str) -> None:
        """Apply node events until the watch ends (timeout, expiry or a broken connection)."""
        stream = watch.Watch().stream(
            self.core.list_node, label_selector=f"{nodes.FAKE_NODE_LABEL}=true",
            resource_version=resource_version, timeout_seconds=WATCH_TIMEOUT_S)
        for event in stream:
            kind, node = event["type"], event["raw_object"]
            if kind == "ERROR":
                return  # (410 Gone: start over with a list)
            if kind == "DELETED":
                self.withdraw(node["metadata"]["name"])
            elif kind in ("ADDED", "MODIFIED"):
                self.node(node)


def say(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)


def run(api: client.ApiClient, topology_labels: Sequence[str]) -> None:
    """The driver's loop; returns never (the process is stopped by a signal)."""
    publisher = Publisher(api, topology_labels)
    while True:
        try:
            publisher.ensure_class(None)  # first: `start` waits for it as the sign of life
            publisher.follow(publisher.resync())
        except Exception as exc:  # an apiserver restart must not end the driver
            say(f"{type(exc).__name__}: {exc}; listing again in 1s")
            time.sleep(1.0)


def grant(api: client.ApiClient) -> None:
    """``ROLE`` bound to the driver's client-certificate user (replaced if present)."""
    rbac = client.RbacAuthorizationV1Api(api)
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": ROLE}, "rules": RULES}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": ROLE},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": ROLE},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                             "name": certs.CLIENTS[NAME].user}]}
    writers: list[tuple[Callable[..., Any], Callable[..., Any], dict[str, Any]]] = [
        (rbac.create_cluster_role, rbac.replace_cluster_role, role),
        (rbac.create_cluster_role_binding, rbac.replace_cluster_role_binding, binding)]
    for create, replace, body in writers:
        try:
            rest.call(create, body)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
            rest.call(replace, body["metadata"]["name"], body)


def start(api: client.ApiClient, server: str, pki: certs.CertPaths, state_dir: Path,
          owned: bool, topology_labels: Sequence[str] = DEFAULT_TOPOLOGY_LABELS,
          ) -> procs.ManagedProcess:
    """Grant the driver its role and start it; returns once it has created the driver-wide
    DeviceClass (its credentials work and its loop runs)."""
    grant(api)
    config = kubeconfig.write_client(state_dir / "kubeconfigs" / f"{NAME}.kubeconfig", server,
                                     pki, NAME)
    # This checkout's code, whatever PYTHONPATH says, and in argv alone, so that
    # `DevCluster.restart` (which reuses argv) starts the same thing.
    root = str(Path(__file__).resolve().parents[3])  # the directory holding `scheduler`
    argv = [sys.executable, "-c", _BOOT, root, f"--kubeconfig={config}",
            *(f"--topology-label={k}" for k in topology_labels)]
    proc = procs.spawn(NAME, argv, state_dir / "logs" / f"{NAME}.log", owned)
    resource = client.ResourceV1Api(api)
    procs.wait_until(lambda: rest.exists(resource.read_device_class, dra.DRIVER),
                     READY_TIMEOUT_S, f"DeviceClass {dra.DRIVER}", proc, interval_s=0.2)
    return proc


def wait_published(api: client.ApiClient, node_names: Sequence[str],
                   timeout_s: float = PUBLISHED_TIMEOUT_S) -> None:
    """Wait until every named node that publishes devices has its slice."""
    core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
    wanted = {n["metadata"]["name"] for n in rest.call(
        core.list_node, label_selector=f"{nodes.FAKE_NODE_LABEL}=true")["items"]
        if n["metadata"]["name"] in set(node_names) and dra.publishes(n)}
    deadline = time.monotonic() + timeout_s
    while True:
        slices = rest.call(resource.list_resource_slice,
                           field_selector=f"spec.driver={dra.DRIVER}")["items"]
        missing = wanted - {s["spec"].get("nodeName") for s in slices}
        if not missing:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"no ResourceSlice after {timeout_s:.0f}s for "
                               f"{len(missing)} node(s): {', '.join(sorted(missing)[:5])}")
        time.sleep(0.2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--topology-label", action="append", dest="topology_labels",
                        help="a node topology label key, outermost first (repeatable); the "
                        "innermost one a node carries is its devices' cliqueID")
    args = parser.parse_args(argv)
    say(f"fake DRA driver {dra.DRIVER} starting")
    run(kubeconfig.api_client(args.kubeconfig),
        args.topology_labels or DEFAULT_TOPOLOGY_LABELS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
