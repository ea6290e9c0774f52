"""Gangs with real volumes on the real apiserver and kube-controller-manager's PV binder.

The seeds' fine-tuning Job shape, as an 8-worker gang: every worker mounts a read-only data
claim (bound to a static zonal PV, ReadOnlyMany) and a shared checkpoint claim of a
WaitForFirstConsumer class served by static PVs. The gang lands in the data's zone, the
scheduler gives the checkpoint claim its PV (claimRef) before any worker binds, and the PV
binder completes the binding. A gang whose volumes pin it to a zone too small for it waits
and says so. Local PVs pinned to single nodes take the per-worker claims of another gang.
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any

import pytest

from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import (
    GROUP_LABEL,
    POOL_LABEL,
    InProcessScheduler,
    Tenant,
    unschedulable_message,
)

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _class(cp: ControlPlane, name: str, mode: str) -> None:
    from kubernetes import client

    body = {"metadata": {"name": name}, "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": mode}
    rest.call(client.StorageV1Api(cp.api).create_storage_class, body)


def _pv(cp: ControlPlane, name: str, cls: str, modes: list[str], key: str, value: str,
        size: str = "100Gi") -> None:
    rest.call(cp.core.create_persistent_volume, {"metadata": {"name": name}, "spec": {
        "capacity": {"storage": size}, "accessModes": modes, "storageClassName": cls,
        "persistentVolumeReclaimPolicy": "Retain", "local": {"path": f"/mnt/{name}"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": key, "operator": "In", "values": [value]}]}]}}}})


def _claim(tenant: Tenant, name: str, cls: str, modes: list[str], size: str = "10Gi") -> None:
    rest.call(tenant.cp.core.create_namespaced_persistent_volume_claim, tenant.namespace, {
        "metadata": {"name": name}, "spec": {"storageClassName": cls, "accessModes": modes,
                                             "resources": {"requests": {"storage": size}}}})


def _read_claim(tenant: Tenant, name: str) -> dict[str, Any]:
    return rest.call(tenant.cp.core.read_namespaced_persistent_volume_claim, name,
                     tenant.namespace)


def _phase(tenant: Tenant, claim: str) -> str:
    return str((_read_claim(tenant, claim).get("status") or {}).get("phase") or "")


def _zoned_nodes(tenant: Tenant, zones: dict[str, int]) -> dict[str, str]:
    """node -> zone, ``zones[z]`` 8-GPU nodes in each zone z."""
    out = {}
    for zone, count in zones.items():
        for i in range(count):
            name = f"{tenant.pool}-{zone}-{i}"
            tenant.cp.create_node(name, gpus=8, labels={POOL_LABEL: tenant.pool, ZONE: zone})
            out[name] = zone
    return out


def _worker(tenant: Tenant, name: str, group: str, volumes: list[tuple[str, bool]]) -> None:
    spec = tenant.pod_spec(gpus=8)
    spec["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {
        "claimName": claim, "readOnly": ro}} for i, (claim, ro) in enumerate(volumes)]
    spec["containers"][0]["volumeMounts"] = [
        {"name": f"v{i}", "mountPath": f"/m{i}", "readOnly": ro}
        for i, (_, ro) in enumerate(volumes)]
    body = {"metadata": {"name": name, "labels": {GROUP_LABEL: group,
                                                  "gangscheduler.io/queue": tenant.queue}},
            "spec": spec}
    rest.call(tenant.cp.core.create_namespaced_pod, tenant.namespace, body)


def _fine_tuning_gang(tenant: Tenant, name: str, data: str, ckpt: str) -> list[str]:
    tenant.create_group(name, 8)
    pods = [f"{name}-{i}" for i in range(8)]
    for pod in pods:
        _worker(tenant, pod, name, [(data, True), (ckpt, False)])
    return pods


def test_the_fine_tuning_shape_runs_as_an_8_worker_gang_in_its_datas_zone(
        control_plane: ControlPlane, tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    tag = uuid.uuid4().hex[:6]
    zone_of = _zoned_nodes(tenant, {"za": 8, "zb": 8})
    _class(control_plane, f"data-{tag}", "Immediate")
    _class(control_plane, f"ckpt-{tag}", "WaitForFirstConsumer")
    _pv(control_plane, f"data-{tag}", f"data-{tag}", ["ReadOnlyMany"], ZONE, "zb")
    # Two checkpoint PVs: the smaller one is in the other zone; the data pins the gang to zb.
    _pv(control_plane, f"ckpt-a-{tag}", f"ckpt-{tag}", ["ReadWriteMany"], ZONE, "za", "50Gi")
    _pv(control_plane, f"ckpt-b-{tag}", f"ckpt-{tag}", ["ReadWriteMany"], ZONE, "zb", "60Gi")
    _claim(tenant, "training-data-fast", f"data-{tag}", ["ReadOnlyMany"])
    _claim(tenant, "ckpt-tenant-a", f"ckpt-{tag}", ["ReadWriteMany"])
    wait_for(lambda: _phase(tenant, "training-data-fast") == "Bound", 60,
             what="the data claim bound by the PV binder (Immediate)")
    assert _phase(tenant, "ckpt-tenant-a") == "Pending"  # WaitForFirstConsumer: nobody yet

    pods = _fine_tuning_gang(tenant, "lora-tune", "training-data-fast", "ckpt-tenant-a")
    wait_for(lambda: tenant.all_bound(pods), 90, what="the 8 workers bound")
    nodes = tenant.nodes_of(pods)
    assert {zone_of[n] for n in nodes.values()} == {"zb"} and len(set(nodes.values())) == 8
    wait_for(lambda: _phase(tenant, "ckpt-tenant-a") == "Bound", 60,
             what="the checkpoint claim bound to the PV the scheduler chose")
    assert _read_claim(tenant, "ckpt-tenant-a")["spec"]["volumeName"] == f"ckpt-b-{tag}"


def test_a_gang_its_volumes_pin_to_a_small_zone_waits_and_says_why(
        control_plane: ControlPlane, tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    tag = uuid.uuid4().hex[:6]
    _zoned_nodes(tenant, {"za": 8, "zb": 4})
    _class(control_plane, f"data-{tag}", "Immediate")
    _class(control_plane, f"ckpt-{tag}", "WaitForFirstConsumer")
    _pv(control_plane, f"data-{tag}", f"data-{tag}", ["ReadOnlyMany"], ZONE, "zb")
    _pv(control_plane, f"ckpt-{tag}", f"ckpt-{tag}", ["ReadWriteMany"], ZONE, "zb")
    _claim(tenant, "data", f"data-{tag}", ["ReadOnlyMany"])
    _claim(tenant, "ckpt", f"ckpt-{tag}", ["ReadWriteMany"])
    wait_for(lambda: _phase(tenant, "data") == "Bound", 60, what="the data claim bound")
    pods = _fine_tuning_gang(tenant, "too-big", "data", "ckpt")

    def said() -> str:
        messages = {unschedulable_message(p) for p in tenant.pods().values()}
        return next((m for m in messages if "claim data" in m), "")

    try:
        message = wait_for(said, 60, what="PodScheduled=False naming the data claim")
    except AssertionError:
        raise AssertionError({unschedulable_message(p) for p in tenant.pods().values()}) from None
    assert "ruled out" in message and "claim ckpt" in message, message
    assert "its volume data-" in message and "not reachable from the node" in message, message
    assert tenant.bound(pods) == []
    assert _phase(tenant, "ckpt") == "Pending"  # nothing was bound for a gang that waits


def test_per_worker_local_pvs_pinned_to_nodes_take_the_workers(
        control_plane: ControlPlane, tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    tag = uuid.uuid4().hex[:6]
    nodes = tenant.create_nodes(4, gpus=8)
    _class(control_plane, f"local-{tag}", "WaitForFirstConsumer")
    for node in nodes[1:3]:  # local disks on two nodes only
        _pv(control_plane, f"local-{tag}-{node}", f"local-{tag}", ["ReadWriteOnce"], HOST, node)
    tenant.create_group("pair", 2)
    for i in range(2):
        _claim(tenant, f"scratch-{i}", f"local-{tag}", ["ReadWriteOnce"])
        _worker(tenant, f"pair-{i}", "pair", [(f"scratch-{i}", False)])
    pods = ["pair-0", "pair-1"]
    wait_for(lambda: tenant.all_bound(pods), 90, what="both workers bound")
    assert sorted(tenant.nodes_of(pods).values()) == sorted(nodes[1:3])
    for i in range(2):
        wait_for(partial(lambda c: _phase(tenant, c) == "Bound", f"scratch-{i}"), 60,
                 what=f"scratch-{i} bound by the PV binder")


def test_a_pod_whose_device_claim_is_missing_waits_naming_it(
        control_plane: ControlPlane, tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """Dynamic Resource Allocation: a pod naming a claim that does not exist waits with a
    reason naming its entry and the claim, never bound as if the claim were absent."""
    tenant.create_nodes(1)
    spec = tenant.pod_spec(gpus=1)
    spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "some-claim"}]
    rest.call(control_plane.core.create_namespaced_pod, tenant.namespace, {
        "metadata": {"name": "dra", "labels": {"gangscheduler.io/queue": tenant.queue}},
        "spec": spec})
    message = wait_for(lambda: unschedulable_message(tenant.pods()["dra"]), 60,
                       what="PodScheduled=False on the DRA pod")
    assert message.startswith("Devices"), message
    assert "spec.resourceClaims entry gpu" in message and "some-claim not found" in message
    assert tenant.bound(["dra"]) == []
