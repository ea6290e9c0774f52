"""Run the real cluster-autoscaler, with its kwok cloud provider, against the dev cluster.

Why the real one: whether a gang's ProvisioningRequest gets all of its nodes or none, how long
that takes, what the autoscaler says when it cannot, and what its scale-down does to running
gangs are its behaviour, not ours; a test that answers the requests itself only checks our
reading of its documentation.

How it runs (each choice on purpose):

* Node groups are declared as the kwok provider reads them: a ``List`` of template Nodes
  under ``templates`` in the ConfigMap ``kube-system/kwok-provider-templates``
  (``readNodesFrom: configmap``), each named by the annotation
  ``cluster-autoscaler.kwok.nodegroup/name`` and bounded by ``.../min-count`` and
  ``.../max-count``. gang-scheduler's scale-up feed reads the same ConfigMap
  (``scheduler.kube.read.scale_up_feed``): the names below are imported from it, so the two
  cannot disagree. A template is a pool of the cluster description (`template`): its labels,
  taints and allocatable, as the dev cluster's own nodes of that pool have them.
* The provider reads its templates once, at start: a group declared later needs a restart
  (`start` replaces the ConfigMaps, so stop the running autoscaler first).
* ``nodes.skipTaint: true``: otherwise the provider puts ``kwok-provider=true:NoSchedule`` on
  every node it makes, which no gang's pod tolerates. The templates carry
  ``kwok.x-k8s.io/node: fake``, so the dev cluster's kwok runs the new nodes (Ready, Leases)
  like the others; they carry no ``kubernetes.io/hostname`` (all of a group's nodes would get
  the template's).
* Its identity ``cluster-autoscaler`` is bound to ``cluster-admin``: its RBAC ships in its
  Helm chart, which is not part of the module zip it is built from.
* Flags for tests: a 1 s scan interval; scale-down after 5 s unneeded and 5 s after a scale-up;
  no halt for unready nodes (other tests fail nodes on purpose in the shared cluster); no
  leader election; ProvisioningRequests on; JSON to the apiserver (see `argv`: with this
  release's default protobuf no request is ever answered).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from scheduler.kube.read.node_groups import GROUP_NAME_ANNOTATION, MAX_COUNT_ANNOTATION
from scheduler.kube.read.scale_up_feed import TEMPLATES_CONFIGMAP, TEMPLATES_KEY
from scheduler.tools.devcluster import build, certs, kubeconfig, nodes, operators, procs, rest
from scheduler.world import clusterspec

NAMESPACE, TEMPLATES_NAME = TEMPLATES_CONFIGMAP
#: The provider's own configuration (its ``KWOK_PROVIDER_CONFIGMAP`` default), key ``config``.
CONFIG_NAME = "kwok-provider-config"
MIN_COUNT_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/min-count"
IDENTITY = "cluster-autoscaler"
#: Written at the end of each of its loops (``--write-status-configmap``): its first one has
#: read the node groups, which is when the dev cluster calls it ready.
STATUS_CONFIGMAP = "cluster-autoscaler-status"
READY_TIMEOUT_S = 60.0
#: What the tests rely on; see the module docstring.
SCAN_INTERVAL = "1s"
SCALE_DOWN_UNNEEDED = "5s"
SCALE_DOWN_DELAY_AFTER_ADD = "5s"


@dataclass(frozen=True, slots=True)
class NodeGroupSpec:
    """A pool of the cluster description the autoscaler may grow, from ``min_count`` to
    ``max_count`` nodes (its nodes are the group's, not the pool's ``count`` made at `up`)."""

    pool: str
    max_count: int
    min_count: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.min_count <= self.max_count:
            raise ValueError(f"node group {self.pool}: need 0 <= min-count ({self.min_count}) "
                             f"<= max-count ({self.max_count})")

    @classmethod
    def parse(cls, text: str) -> NodeGroupSpec:
        """``POOL=MAX`` or ``POOL=MIN:MAX`` (the CLI's ``up --autoscale``)."""
        pool, sep, counts = text.partition("=")
        low, _, high = counts.rpartition(":")
        if not sep or not pool or not high.isdigit() or (low and not low.isdigit()):
            raise ValueError(f"--autoscale {text!r}: expected POOL=MAX or POOL=MIN:MAX "
                             "(whole numbers)")
        return cls(pool, int(high), int(low or 0))


def template(spec: clusterspec.ClusterSpec, group: NodeGroupSpec) -> dict[str, Any]:
    """The template Node of *group*: a node of its pool as the cluster description makes it,
    with the group's name and bounds in the provider's annotations."""
    pool = next((p for p in spec.pools if p.name == group.pool), None)
    if pool is None:
        raise ValueError(f"node group {group.pool}: no pool of that name in the cluster "
                         f"description (pools: {', '.join(p.name for p in spec.pools)})")
    node = clusterspec.describe_node(spec, pool, 0)
    labels = {k: v for k, v in node.labels.items() if k != clusterspec.HOSTNAME_LABEL}
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": f"{group.pool}-template",
            "labels": {**labels, nodes.FAKE_NODE_LABEL: "true"},
            "annotations": {GROUP_NAME_ANNOTATION: group.pool,
                            MIN_COUNT_ANNOTATION: str(group.min_count),
                            MAX_COUNT_ANNOTATION: str(group.max_count),
                            nodes.KWOK_ANNOTATION: nodes.KWOK_VALUE}},
        "spec": {"taints": nodes.taint_dicts(node.taints)},
    }
    body.update(nodes.status_body(node.allocatable, "10.255.255.1", body["metadata"]["name"]))
    return body


def provider_config() -> dict[str, Any]:
    """The kwok provider's configuration: groups from the templates ConfigMap, by name."""
    return {"apiVersion": "v1alpha1", "readNodesFrom": "configmap",
            "nodegroups": {"fromNodeLabelAnnotation": GROUP_NAME_ANNOTATION},
            "nodes": {"skipTaint": True},
            "configmap": {"name": TEMPLATES_NAME, "key": TEMPLATES_KEY}}


def declare(api: client.ApiClient, templates: Sequence[Mapping[str, Any]]) -> None:
    """Write (or replace) the provider's two ConfigMaps."""
    core = client.CoreV1Api(api)
    data = {CONFIG_NAME: {"config": yaml.safe_dump(provider_config(), sort_keys=False)},
            TEMPLATES_NAME: {TEMPLATES_KEY: yaml.safe_dump(
                {"apiVersion": "v1", "kind": "List", "items": list(templates)},
                sort_keys=False)}}
    for name, entries in data.items():
        body = {"metadata": {"name": name, "namespace": NAMESPACE}, "data": entries}
        try:
            rest.call(core.create_namespaced_config_map, NAMESPACE, body)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
            rest.call(core.replace_namespaced_config_map, name, NAMESPACE, body)


def _grant(api: client.ApiClient) -> None:
    operators.apply_object(api, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": IDENTITY},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": certs.CLIENTS[IDENTITY].user}]})


def argv(binary: Path, client_config: Path, port: int,
         max_nodes_total: int | None = None) -> list[str]:
    """The command line (flag names as in the pinned release's main.go). *max_nodes_total*:
    its cluster-wide node limit (all nodes, not only its groups'), none by default."""
    limit = [] if max_nodes_total is None else [f"--max-nodes-total={max_nodes_total}"]
    return [
        str(binary), *limit, "--cloud-provider=kwok", f"--kubeconfig={client_config}",
        f"--namespace={NAMESPACE}", f"--address=127.0.0.1:{port}", "--leader-elect=false",
        "--enable-provisioning-requests=true", f"--scan-interval={SCAN_INTERVAL}",
        "--scale-down-enabled=true", f"--scale-down-unneeded-time={SCALE_DOWN_UNNEEDED}",
        f"--scale-down-delay-after-add={SCALE_DOWN_DELAY_AFTER_ADD}",
        "--scale-down-delay-after-delete=0s", "--scale-down-delay-after-failure=5s",
        "--max-node-provision-time=2m",
        # The shared test cluster has nodes failed on purpose: do not halt for them.
        "--max-total-unready-percentage=100", "--ok-total-unready-count=100000",
        # Its default (protobuf) also goes to its ProvisioningRequest client, and a CRD has no
        # protobuf encoding: every status update of a request fails ("does not implement the
        # protobuf marshalling interface") and no request is ever Accepted.
        "--kube-api-content-type=application/json",
        # client-go's default 5 QPS would pace a scale-up of many nodes.
        "--kube-client-qps=50", "--kube-client-burst=100",
        "--write-status-configmap=true", "--v=2",
    ]


def start(api: client.ApiClient, server: str, pki: certs.CertPaths, state_dir: Path,
          owned: bool, templates: Sequence[Mapping[str, Any]],
          max_nodes_total: int | None = None) -> procs.ManagedProcess:
    """Declare *templates*, then start the autoscaler; returns once its first loop is done
    (its status ConfigMap written: its health check answers before its provider has even
    read the groups, and a provider that cannot read them exits)."""
    declare(api, templates)
    _grant(api)
    core = client.CoreV1Api(api)
    try:  # an earlier run's
        rest.call(core.delete_namespaced_config_map, STATUS_CONFIGMAP, NAMESPACE)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
    client_config = kubeconfig.write_client(
        state_dir / "kubeconfigs" / f"{IDENTITY}.kubeconfig", server, pki, IDENTITY)
    # Its kwok provider makes its own client from $KUBECONFIG (KWOK_PROVIDER_MODE=local)
    # and reads its ConfigMaps in $POD_NAMESPACE.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(state_dir), "KUBECONFIG": str(client_config),
           "KWOK_PROVIDER_MODE": "local", "POD_NAMESPACE": NAMESPACE}

    def serve() -> procs.ManagedProcess:
        port = procs.free_port()
        proc = procs.spawn(IDENTITY, argv(build.CLUSTER_AUTOSCALER.binary(), client_config,
                                          port, max_nodes_total),
                           state_dir / "logs" / f"{IDENTITY}.log", owned, env=env)
        procs.wait_until(lambda: _healthy(port), READY_TIMEOUT_S,
                         f"{IDENTITY} /health-check", proc, interval_s=0.25)
        return proc

    proc = procs.start_listening(serve)
    procs.wait_until(lambda: rest.exists(core.read_namespaced_config_map, STATUS_CONFIGMAP,
                                         NAMESPACE),
                     READY_TIMEOUT_S, f"{IDENTITY}'s first loop ({NAMESPACE}/{STATUS_CONFIGMAP})",
                     proc, interval_s=0.25)
    return proc


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health-check",
                                    timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False
