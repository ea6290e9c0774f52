"""The dev cluster's ``scale`` node liveness (``scheduler/tools/devcluster/liveness.py``) on a real
control plane: kwok writes no Leases yet still runs its nodes and their pods, the node
lifecycle controller gets the long grace period, and a node that *reports* NotReady is still
tainted at once (that needs no grace period, so node-failure tests would still work).

Its own cluster, not the session one: the profile is chosen when the cluster starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from scheduler.tools.devcluster import build, liveness, nodes, rest
from scheduler.tools.devcluster.cluster import DevCluster
from tests.e2e.cluster_api import ControlPlane, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def scale_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    build.ensure_all(log=lambda line: None, operators=False)
    cluster = DevCluster(tmp_path_factory.mktemp("scale-cluster"), owned=True)
    try:
        cluster.up(log=lambda line: print(f"[scale-cluster] {line}"), training_operators=False,
                   node_liveness=liveness.SCALE)
        yield ControlPlane(cluster)
    finally:
        cluster.down(log=lambda line: None)


def test_the_cluster_records_and_runs_the_scale_profile(scale_cluster: ControlPlane) -> None:
    st = scale_cluster.cluster.state
    assert st is not None and st.node_liveness == "scale"
    argv = {p.name: p.argv for p in st.processes}
    assert "--node-lease-duration-seconds=0" in argv["kwok"]
    assert "--node-monitor-grace-period=7200s" in argv["kube-controller-manager"]
    stages = next(a.split("=", 1)[1] for a in argv["kwok"] if a.startswith("--config="))
    assert Path(stages).name == "kwok-stages-scale.yaml"


def test_a_node_is_run_without_a_lease_and_its_pod_runs(scale_cluster: ControlPlane) -> None:
    node = scale_cluster.create_node(gpus=8)  # returns once Ready and not-ready is lifted
    assert nodes.is_ready_and_untainted(scale_cluster.get_node(node))
    leases = rest.call(client.CoordinationV1Api(scale_cluster.api).list_namespaced_lease,
                       "kube-node-lease")
    assert node not in {item["metadata"]["name"] for item in leases["items"]}
    namespace = scale_cluster.new_namespace("liveness")
    scale_cluster.create_pod(namespace, "worker-0", gpus=8)
    assert scale_cluster.bind(namespace, "worker-0", node) == 201
    running = scale_cluster.wait_pod_phase(namespace, "worker-0", "Running", timeout_s=60)
    assert running["spec"]["nodeName"] == node


def test_a_node_reporting_not_ready_is_tainted_without_waiting_the_grace(
        scale_cluster: ControlPlane) -> None:
    node = scale_cluster.create_node(gpus=8)
    nodes.fail_node(scale_cluster.api, node, "test: runtime down")

    def tainted() -> bool:
        taints = scale_cluster.get_node(node)["spec"].get("taints") or []
        return any(t["key"] == nodes.NOT_READY_TAINT for t in taints)

    wait_for(tainted, 90, what=f"{node} tainted {nodes.NOT_READY_TAINT}")
    nodes.recover_node(scale_cluster.api, node)
    nodes.wait_ready(scale_cluster.api, [node], timeout_s=90)
