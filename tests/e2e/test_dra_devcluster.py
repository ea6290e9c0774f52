"""Dynamic Resource Allocation in the dev cluster, with the real controllers (issue 35, items 5
and 6): the fake driver's DeviceClasses and ResourceSlices pass the apiserver's validation and
follow the nodes; the real resource claim controller makes a claim per pod of an Indexed Job
and the real kube-scheduler allocates devices of the node it binds the pod to; the same Job
under gang-scheduler: two such Jobs on too few devices, one allocated and bound whole, the
other waiting whole until the first is done; a CEL-selected
request and a two-device request as kube-scheduler answers them (the seed of the differential
test).

Everything is asserted on state and events, polled with generous timeouts (a loaded 2-core
machine). ``GANG_SCHEDULER_E2E_DRA_FIXTURES=1`` also writes the objects read back to
``tests/data/dra/`` (dra_support.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client

from scheduler.tools.devcluster import dra, dra_driver, rest
from scheduler.world import clusterspec
from tests.e2e import dra_support as ds
from tests.e2e import native_support
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import (
    POOL_LABEL,
    QUEUE_LABEL,
    InProcessScheduler,
    Tenant,
    unschedulable_message,
)

pytestmark = pytest.mark.e2e

TAG_LABEL = "gangscheduler.io/dra-test"
H100 = "NVIDIA-H100-80GB-HBM3"
A100_40 = "NVIDIA-A100-SXM4-40GB"
MEMORY_64GI = f'device.capacity["{dra.DRIVER}"].memory.compareTo(quantity("64Gi")) >= 0'
TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Pools:
    """This module's nodes: two H100 nodes sharing a rack (one NVLink domain), one A100-40GB
    node, and one H100 node of a pool with ``draDevices: false``."""

    tag: str
    h100: list[str]
    a100: list[str]
    off: list[str]

    def of_pool(self, pool: str) -> dict[str, str]:
        return {POOL_LABEL: pool}

    def all(self) -> dict[str, str]:
        return {TAG_LABEL: self.tag}


@pytest.fixture(scope="module")
def pools(control_plane: ControlPlane) -> Pools:
    tag = uuid.uuid4().hex[:6]
    labels = {TAG_LABEL: tag}
    spec = clusterspec.parse({"pools": [
        {"name": f"dra-h100-{tag}", "count": 2, "gpusPerNode": 4, "gpuModel": H100,
         "nodesPerRack": 2, "labels": labels},
        {"name": f"dra-a100-{tag}", "count": 1, "gpusPerNode": 4, "gpuModel": A100_40,
         "labels": labels},
        {"name": f"dra-off-{tag}", "count": 1, "gpusPerNode": 2, "gpuModel": H100,
         "labels": labels, "draDevices": False},
    ]})
    names = control_plane.create_nodes(spec)
    dra_driver.wait_published(control_plane.api, names, timeout_s=TIMEOUT_S)
    return Pools(tag, *([n for n in names if n.startswith(f"dra-{kind}-")]
                        for kind in ("h100", "a100", "off")))


def _slices(cp: ControlPlane) -> dict[str, dict[str, Any]]:
    items = rest.call(client.ResourceV1Api(cp.api).list_resource_slice,
                      field_selector=f"spec.driver={dra.DRIVER}")["items"]
    return {str(s["spec"]["nodeName"]): s for s in items}


def test_device_classes_and_slices_are_accepted_and_follow_the_nodes(
        control_plane: ControlPlane, pools: Pools) -> None:
    cp = control_plane
    resource = client.ResourceV1Api(cp.api)
    for name in (dra.DRIVER, dra.class_name(H100), dra.class_name(A100_40)):
        assert rest.exists(resource.read_device_class, name), name
    slices = _slices(cp)
    for node in pools.h100 + pools.a100:
        assert len(slices[node]["spec"]["devices"]) == 4, node
    assert not set(pools.off) & set(slices), "a draDevices: false pool published devices"
    cliques = {d["attributes"]["cliqueID"]["string"]
               for node in pools.h100 for d in ds.devices_of(cp, node).values()}
    assert len(cliques) == 1, cliques  # one rack: one NVLink domain
    memory = {d["capacity"]["memory"]["value"] for d in ds.devices_of(cp, pools.a100[0]).values()}
    assert memory == {"40Gi"}

    # The apiserver validates what it accepted: a device with two value types in one
    # attribute, or a class whose CEL does not compile, is refused.
    bad = dra.resource_slice(cp.get_node(pools.h100[0]))
    bad["metadata"]["name"] = f"bad-{pools.tag}"
    bad["spec"]["devices"][0]["attributes"]["index"] = {"int": 0, "string": "0"}
    with pytest.raises(client.ApiException) as refused:
        rest.call(resource.create_resource_slice, bad, dry_run="All")
    assert refused.value.status == 422, refused.value.body
    bad_class = dra.device_class(None)
    bad_class["metadata"]["name"] = f"bad-{pools.tag}.{dra.DRIVER}"
    bad_class["spec"]["selectors"][0]["cel"]["expression"] = "device.driver =="
    with pytest.raises(client.ApiException) as refused:
        rest.call(resource.create_device_class, bad_class, dry_run="All")
    assert refused.value.status == 422, refused.value.body

    # A node added later gets its slice; a deleted node's slice goes with it.
    extra = cp.create_node(gpus=2, labels=pools.all())
    wait_for(lambda: extra in _slices(cp), TIMEOUT_S, what=f"the slice of {extra}")
    rest.code_of(cp.core.delete_node, extra)
    wait_for(lambda: extra not in _slices(cp), TIMEOUT_S, what=f"{extra}'s slice deleted")

    ds.keep("deviceclass", rest.call(resource.read_device_class, dra.class_name(H100)))
    ds.keep("deviceclass-driver", rest.call(resource.read_device_class, dra.DRIVER))
    ds.keep("resourceslice", rest.call(resource.read_resource_slice,
                                       dra.slice_name(pools.h100[0])))


def test_kube_scheduler_allocates_a_device_per_pod_of_an_indexed_job(
        control_plane: ControlPlane, pools: Pools) -> None:
    cp = control_plane
    namespace = cp.new_namespace("dra")
    template = ds.create_template(cp, namespace, "one-h100", ds.exactly(dra.class_name(H100)))
    pod_spec = ds.claiming_pod_spec(pools.of_pool(f"dra-h100-{pools.tag}"), "default-scheduler",
                                    template="one-h100")
    rest.call(client.BatchV1Api(cp.api).create_namespaced_job, namespace,
              ds.indexed_job("train", 2, pod_spec))

    def running() -> dict[str, dict[str, Any]]:
        pods = rest.call(cp.core.list_namespaced_pod, namespace)["items"]
        up = {p["metadata"]["name"]: p for p in pods if p["status"].get("phase") == "Running"}
        return up if len(up) == 2 else {}

    pods = wait_for(running, TIMEOUT_S, what="both pods of the Job Running (kwok)")

    def allocated() -> list[dict[str, Any]]:
        found = ds.claims(cp, namespace)
        done = len(found) == 2 and all(ds.results(c) and ds.reserved_for(c) for c in found)
        return found if done else []

    claims = wait_for(allocated, TIMEOUT_S, what="two allocated, reserved claims")
    for claim in claims:
        (owner,) = claim["metadata"]["ownerReferences"]
        pod = pods[owner["name"]]
        node = pod["spec"]["nodeName"]
        (result,) = ds.results(claim)
        assert (result["driver"], result["pool"]) == (dra.DRIVER, node), result
        assert result["device"] in ds.devices_of(cp, str(node))
        assert ds.reserved_for(claim) == [owner["name"]]
        statuses = pod["status"]["resourceClaimStatuses"]
        assert statuses == [{"name": ds.CLAIM,
                             "resourceClaimName": claim["metadata"]["name"]}]
    devices = {(ds.results(c)[0]["pool"], ds.results(c)[0]["device"]) for c in claims}
    assert len(devices) == 2, devices  # no device given twice

    ds.keep("resourceclaimtemplate", template)
    # (read one by one: a list's items carry no apiVersion and kind)
    ds.keep("resourceclaim-allocated",
            ds.read_claim(cp, namespace, str(claims[0]["metadata"]["name"])))
    ds.keep("pod-with-claim", dict(cp.get_pod(namespace, next(iter(pods))) or {}))


def test_gang_scheduler_allocates_whole_gangs_and_the_second_waits_whole_behind_the_first(
        control_plane: ControlPlane, tenant: Tenant,
        live_scheduler: InProcessScheduler) -> None:
    """Two Indexed Jobs of 4 pods, each pod claiming one device from a template, on 6
    devices (two nodes of 3): kube-scheduler would start parts of both. gang-scheduler
    allocates the first Job's 4 claims (written to the claims before any pod binds, accepted
    by the apiserver's validation, reserved for their pods, each device of its pod's node)
    and binds it whole; the second waits whole with a Devices reason, none of its claims
    allocated, until the first is deleted (the real resourceclaim controller and garbage
    collector take its claims away): then it starts whole on the freed devices."""
    cp = control_plane
    nodes = tenant.create_nodes(2, gpus=3)
    dra_driver.wait_published(cp.api, nodes, timeout_s=TIMEOUT_S)
    ds.create_template(cp, tenant.namespace, "one-gpu", ds.exactly(dra.DRIVER))
    batch = client.BatchV1Api(cp.api)
    for name in ("first", "second"):
        job = ds.indexed_job(name, 4, ds.claiming_pod_spec(
            {POOL_LABEL: tenant.pool}, tenant.scheduler_name, template="one-gpu"),
            {QUEUE_LABEL: tenant.queue})
        rest.call(batch.create_namespaced_job, tenant.namespace, job)
        if name == "first":  # the first is older: it goes first, once its claims are made
            # (until the resourceclaim controller has made them, it cannot be placed, and a
            # younger gang whose claims exist is not held back for it)
            wait_for(lambda: len(tenant.job_pods("first")) == 4 and len(
                [c for c in ds.claims(cp, tenant.namespace)
                 if c["metadata"]["ownerReferences"][0]["name"].startswith("first-")]) == 4,
                TIMEOUT_S, what="the first Job's pods and their claims")

    first = wait_for(lambda: tenant.job_pods("first") if tenant.all_bound(
        list(tenant.job_pods("first"))) and len(tenant.job_pods("first")) == 4 else {},
        TIMEOUT_S, what="the first Job bound whole")
    claims = {c["metadata"]["ownerReferences"][0]["name"]: c
              for c in ds.claims(cp, tenant.namespace)}
    used = set()
    for name, pod in first.items():
        claim = claims[name]
        (result,) = ds.results(claim)
        assert (result["driver"], result["pool"]) == (dra.DRIVER, pod["spec"]["nodeName"])
        assert ds.reserved_for(claim) == [name]
        used.add((result["pool"], result["device"]))
    assert len(used) == 4  # no device twice

    def waiting() -> list[str]:
        """Every pod told the shortage (until its claims exist, the reason is that they do
        not: the same category, an earlier message, which some pods may still show)."""
        pods = tenant.job_pods("second")
        said = [unschedulable_message(p) for p in pods.values()]
        return said if len(pods) == 4 and all(
            m.startswith("Devices: ") and "4 members need devices for their claims" in m
            for m in said) else []

    wait_for(waiting, TIMEOUT_S, what="the second Job's pods told they are short of devices")
    assert tenant.bound(list(tenant.job_pods("second"))) == []
    second_claims = [c for c in ds.claims(cp, tenant.namespace)
                     if c["metadata"]["ownerReferences"][0]["name"].startswith("second-")]
    assert [ds.results(c) for c in second_claims] == [[]] * len(second_claims)
    live_scheduler.run_cycles(3)  # and it stays so
    assert tenant.bound(list(tenant.job_pods("second"))) == []

    rest.call(batch.delete_namespaced_job, "first", tenant.namespace,
              propagation_policy="Background")
    second = wait_for(lambda: tenant.job_pods("second") if tenant.all_bound(
        list(tenant.job_pods("second"))) and len(tenant.job_pods("second")) == 4 else {},
        TIMEOUT_S * 2, what="the second Job bound whole once the first was deleted")
    claims = {c["metadata"]["ownerReferences"][0]["name"]: c
              for c in ds.claims(cp, tenant.namespace)}
    for name, pod in second.items():
        (result,) = ds.results(claims[name])
        assert result["pool"] == pod["spec"]["nodeName"]
        assert ds.reserved_for(claims[name]) == [name]


def test_a_podgroup_claim_is_shared_by_its_pods_and_reserved_for_the_group(
        control_plane: ControlPlane, tenant: Tenant,
        live_scheduler: InProcessScheduler) -> None:
    """Kubernetes' own PodGroup holding a claim its pods share (``spec.resourceClaims``,
    DRAWorkloadResourceClaims, on in the dev cluster's apiserver): 3 pods, each with its own
    device from a template and the group's claim of 2 devices. gang-scheduler allocates the
    group's claim once, reserves it for the PodGroup (the apiserver accepts the entry),
    gives each pod its own device on the same node, and binds the three whole."""
    cp = control_plane
    (node,) = tenant.create_nodes(1, gpus=8)
    dra_driver.wait_published(cp.api, [node], timeout_s=TIMEOUT_S)
    ns = tenant.namespace
    ds.create_template(cp, ns, "one-gpu", ds.exactly(dra.DRIVER))
    ds.create_claim(cp, ns, "grp", ds.exactly(dra.DRIVER, count=2))
    group = {"apiVersion": f"{native_support.GROUP}/{native_support.VERSION}",
             "kind": "PodGroup", "metadata": {"name": "pg", "labels": {QUEUE_LABEL: tenant.queue}},
             "spec": {"schedulingPolicy": {"gang": {"minCount": 3}},
                      "resourceClaims": [{"name": "shared", "resourceClaimName": "grp"}]}}
    made = rest.call(cp.custom.create_namespaced_custom_object, native_support.GROUP,
                     native_support.VERSION, ns, "podgroups", group)
    for i in range(3):
        spec = ds.claiming_pod_spec({POOL_LABEL: tenant.pool}, tenant.scheduler_name,
                                    template="one-gpu")
        spec["schedulingGroup"] = {"podGroupName": "pg"}
        spec["resourceClaims"].append({"name": "shared", "resourceClaimName": "grp"})
        spec["containers"][0]["resources"]["claims"].append({"name": "shared"})
        rest.call(cp.core.create_namespaced_pod, ns, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pg-{i}", "labels": {QUEUE_LABEL: tenant.queue}},
            "spec": spec})
    names = [f"pg-{i}" for i in range(3)]
    wait_for(lambda: tenant.all_bound(names), TIMEOUT_S, what="the PodGroup's pods bound")
    shared = ds.read_claim(cp, ns, "grp")
    assert len(ds.results(shared)) == 2
    assert [(r.get("apiGroup"), r["resource"], r["name"], r.get("uid"))
            for r in shared["status"]["reservedFor"]] == [
        (native_support.GROUP, "podgroups", "pg", made["metadata"]["uid"])], shared["status"]
    nodes = {tenant.nodes_of(names)[n] for n in names}
    assert nodes == {node}
    own = [c for c in ds.claims(cp, ns) if c["metadata"]["name"] != "grp"]
    assert sorted(ds.reserved_for(c)[0] for c in own) == names
    devices = [(r["pool"], r["device"]) for c in [shared, *own] for r in ds.results(c)]
    assert len(devices) == len(set(devices)) == 5


def test_a_jobset_whose_pods_claim_devices_starts_whole(
        control_plane: ControlPlane, tenant: Tenant,
        live_scheduler: InProcessScheduler) -> None:
    """A JobSet (the real JobSet controller) of two replicated Jobs, a driver and 3
    workers, every pod claiming one device from a template (the real resourceclaim
    controller makes the claims of the Jobs' pods): one gang across both Jobs, bound whole
    with every claim allocated on its pod's node and reserved for it, on 4 devices."""
    if not control_plane.operators:
        pytest.skip("the session cluster runs without the training operators")
    cp = control_plane
    nodes = tenant.create_nodes(2, gpus=2)
    dra_driver.wait_published(cp.api, nodes, timeout_s=TIMEOUT_S)
    ns = tenant.namespace
    ds.create_template(cp, ns, "one-gpu", ds.exactly(dra.DRIVER))
    template = {"metadata": {"labels": {QUEUE_LABEL: tenant.queue}},
                "spec": ds.claiming_pod_spec({POOL_LABEL: tenant.pool}, tenant.scheduler_name,
                                             template="one-gpu")}
    body = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train"},
            "spec": {"replicatedJobs": [
                {"name": rjob, "replicas": 1,
                 "template": {"spec": {"parallelism": pods, "completions": pods,
                                       "backoffLimit": 0, "template": template}}}
                for rjob, pods in (("driver", 1), ("workers", 3))]}}
    rest.call(cp.custom.create_namespaced_custom_object, "jobset.x-k8s.io", "v1alpha2", ns,
              "jobsets", body)

    def members() -> dict[str, dict[str, Any]]:
        return {n: p for n, p in tenant.pods().items()
                if p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == "train"}

    pods = wait_for(lambda: members() if len(members()) == 4 and tenant.all_bound(
        list(members())) else {}, TIMEOUT_S, what="the JobSet's 4 pods bound whole")
    claims = {c["metadata"]["ownerReferences"][0]["name"]: c for c in ds.claims(cp, ns)}
    devices = set()
    for name, pod in pods.items():
        (result,) = ds.results(claims[name])
        assert result["pool"] == pod["spec"]["nodeName"], (name, result)
        assert ds.reserved_for(claims[name]) == [name]
        devices.add((result["pool"], result["device"]))
    assert len(devices) == 4


def test_a_cel_request_and_a_two_device_request_as_kube_scheduler_answers_them(
        control_plane: ControlPlane, pools: Pools) -> None:
    cp = control_plane
    namespace = cp.new_namespace("dra")
    create_pod = client.CoreV1Api(cp.api).create_namespaced_pod

    def pod(name: str, where: dict[str, str], **source: str) -> None:
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": ds.claiming_pod_spec(where, "default-scheduler", **source)}
        rest.call(create_pod, namespace, body)

    # At least 64Gi: the A100-40GB node has room, but only an H100's memory qualifies.
    ds.create_template(cp, namespace, "big", ds.exactly(dra.DRIVER, cel=MEMORY_64GI))
    pod("big-0", pools.all(), template="big")
    # Two devices in one NVLink domain, as a claim of its own (not from a template).
    pair = ds.exactly(dra.DRIVER, count=2)
    pair["devices"]["constraints"] = [{"requests": [ds.CLAIM],
                                       "matchAttribute": f"{dra.DRIVER}/cliqueID"}]
    ds.create_claim(cp, namespace, "pair", pair)
    pod("pair-0", pools.all(), claim="pair")
    # The same request held to the A100-40GB node: four free devices of the class, none with
    # the memory, so kube-scheduler says it cannot allocate the claim (the CEL is evaluated
    # per device, on the published capacity).
    pod("big-a100", pools.of_pool(f"dra-a100-{pools.tag}"), template="big")

    def node_of(pod_name: str) -> str:
        return str((cp.get_pod(namespace, pod_name) or {}).get("spec", {}).get("nodeName") or "")

    def allocated(name: str) -> dict[str, Any]:
        """The allocated claim named *name* or made for pod *name* ({} while none is)."""
        for claim in ds.claims(cp, namespace):
            owner = (claim["metadata"].get("ownerReferences") or [{}])[0].get("name")
            if (claim["metadata"]["name"] == name or owner == name) and ds.results(claim):
                return claim
        return {}

    big = wait_for(lambda: allocated("big-0"), TIMEOUT_S, what="big-0's claim allocated")
    (result,) = ds.results(big)
    assert result["pool"] in pools.h100, result
    # kube-scheduler writes the allocation (PreBind) before the binding: wait for the node.
    assert wait_for(lambda: node_of("big-0"), TIMEOUT_S, what="big-0 bound") == result["pool"]

    claim = wait_for(lambda: allocated("pair"), TIMEOUT_S, what="the pair claim allocated")
    node = wait_for(lambda: node_of("pair-0"), TIMEOUT_S, what="pair-0 bound")
    results = ds.results(claim)
    assert len(results) == 2 and {r["pool"] for r in results} == {node}, results
    devices = ds.devices_of(cp, node)
    assert len({r["device"] for r in results}) == 2
    assert len({devices[r["device"]]["attributes"]["cliqueID"]["string"]
                for r in results}) == 1
    assert ds.reserved_for(claim) == ["pair-0"]

    def refused() -> list[str]:
        events = rest.call(client.EventsV1Api(cp.api).list_namespaced_event, namespace)["items"]
        return [e.get("note") or "" for e in events if e.get("reason") == "FailedScheduling"
                and (e.get("regarding") or {}).get("name") == "big-a100"
                and "cannot allocate all claims" in (e.get("note") or "")]

    wait_for(refused, TIMEOUT_S, what="a FailedScheduling event on big-a100 naming the claims")
    assert node_of("big-a100") == ""
    assert allocated("big-a100") == {}
    ds.keep("resourceclaim-two-devices-allocated", ds.read_claim(cp, namespace, "pair"))
    ds.keep("resourceclaim-cel-allocated",
            ds.read_claim(cp, namespace, str(big["metadata"]["name"])))
