"""A gang of fractional-GPU pods on the dev cluster, requested the upstream way (issue 36,
item 2): DRA consumable capacity (``DRAConsumableCapacity``, beta and on by default in the
pinned Kubernetes 1.36). The fake driver publishes the node's two GPUs shareable
(``allowMultipleAllocations``, ``memory`` taken in whole GiB); each pod of an Indexed Job
claims half a GPU's memory through a ResourceClaimTemplate.

gang-scheduler allocates the first Job's four claims on the two GPUs, two halves each, written
with ``shareID`` and ``consumedCapacity`` (which the apiserver validates) and binds the Job
whole; a second such Job does not fit (the GPUs are full), waits whole with a reason naming
the device and the share, and starts whole when the first is deleted.

The real kube-scheduler agrees both ways: before the gangs, it allocates a half of a GPU to a
pod of its own (the pinned release serves consumable capacity), written in the shape our
reader reads; with the first gang running, it refuses another half (it counts the shares
gang-scheduler wrote, so the two schedulers never put a GPU over its memory).
"""

from __future__ import annotations

from collections import Counter

import pytest
from kubernetes import client

from scheduler.kube.read.devices_convert import resource_claim
from scheduler.tools.devcluster import dra, dra_driver, rest
from tests.e2e import dra_support as ds
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import (
    POOL_LABEL,
    QUEUE_LABEL,
    InProcessScheduler,
    Tenant,
    unschedulable_message,
)

pytestmark = pytest.mark.e2e

TIMEOUT_S = 60.0
HALF = "8Gi"  # of the fake GPU's 16Gi (``gpu_devices``: an unlabelled product)


def _half_gpu() -> dict[str, object]:
    return {"devices": {"requests": [{"name": ds.CLAIM, "exactly": {
        "deviceClassName": dra.DRIVER, "capacity": {"requests": {"memory": HALF}}}}]}}


def test_a_gang_of_half_gpus_shares_two_gpus_and_the_next_waits_whole_for_the_share(
        control_plane: ControlPlane, tenant: Tenant,
        live_scheduler: InProcessScheduler) -> None:
    cp = control_plane
    node = cp.create_node(f"{tenant.pool}-shared", gpus=2,
                          labels={POOL_LABEL: tenant.pool, dra.SHARED_GPUS_LABEL: "true"})
    dra_driver.wait_published(cp.api, [node], timeout_s=TIMEOUT_S)
    assert all(d.get("allowMultipleAllocations") for d in ds.devices_of(cp, node).values())
    ds.create_template(cp, tenant.namespace, "half-gpu", _half_gpu())
    batch = client.BatchV1Api(cp.api)
    core = client.CoreV1Api(cp.api)

    def kube_scheduler_pod(name: str) -> None:
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": ds.claiming_pod_spec({POOL_LABEL: tenant.pool}, "default-scheduler",
                                             template="half-gpu")}
        rest.call(core.create_namespaced_pod, tenant.namespace, body)

    def claim_of(pod: str) -> dict[str, object]:
        return next((c for c in ds.claims(cp, tenant.namespace)
                     if c["metadata"]["ownerReferences"][0]["name"] == pod), {})

    # kube-scheduler allocates a share; our reader takes its allocation as ours would be.
    kube_scheduler_pod("ks-half")
    theirs = wait_for(lambda: (lambda c: c if c and ds.results(c) else {})(claim_of("ks-half")),
                      TIMEOUT_S, what="kube-scheduler allocated a half GPU")
    (result,) = ds.results(theirs)
    assert result["consumedCapacity"] == {"memory": HALF} and result.get("shareID"), result
    read = resource_claim(theirs)
    assert read.allocation is not None and read.allocation.results[0].share_id
    rest.code_of(core.delete_namespaced_pod, "ks-half", tenant.namespace, grace_period_seconds=0)
    wait_for(lambda: not claim_of("ks-half"), TIMEOUT_S, what="ks-half's claim deleted")

    def submit(name: str) -> None:
        job = ds.indexed_job(name, 4, ds.claiming_pod_spec(
            {POOL_LABEL: tenant.pool}, tenant.scheduler_name, template="half-gpu"),
            {QUEUE_LABEL: tenant.queue})
        rest.call(batch.create_namespaced_job, tenant.namespace, job)

    def bound_whole(name: str) -> dict[str, dict[str, object]]:
        pods = tenant.job_pods(name)
        return pods if len(pods) == 4 and tenant.all_bound(list(pods)) else {}

    submit("first")
    first = wait_for(lambda: bound_whole("first"), TIMEOUT_S, what="the first Job bound whole")
    claims = {c["metadata"]["ownerReferences"][0]["name"]: c
              for c in ds.claims(cp, tenant.namespace)}
    per_device: Counter[str] = Counter()
    for name in first:
        (result,) = ds.results(claims[name])
        assert (result["driver"], result["pool"]) == (dra.DRIVER, node)
        assert result["consumedCapacity"] == {"memory": str(8 * 2**30)}
        assert len(result["shareID"]) == 36
        assert ds.reserved_for(claims[name]) == [name]
        per_device[result["device"]] += 1
    assert per_device == {"gpu-0": 2, "gpu-1": 2}  # two halves on each GPU, never over

    # The queue's usage counts the shares (item 1): once allocated, the four halves on the
    # node are charged their two GPUs' worth, not a whole GPU each (4, at bind time).
    def usage() -> int | None:
        view = live_scheduler.live.view()
        row = next((q for q in view.queues if q.name == tenant.queue), None) if view else None
        pool = next((p for p in row.pools if p.pool == tenant.pool), None) if row else None
        return pool.allocated if pool is not None and pool.allocated == 2 else None

    assert wait_for(usage, TIMEOUT_S, what="the queue charged two GPUs for four halves") == 2

    # kube-scheduler counts the shares gang-scheduler wrote: no room for another half.
    kube_scheduler_pod("ks-late")

    def refused() -> bool:
        events = rest.call(client.EventsV1Api(cp.api).list_namespaced_event,
                           tenant.namespace)["items"]
        return any(e.get("reason") == "FailedScheduling"
                   and (e.get("regarding") or {}).get("name") == "ks-late"
                   and "cannot allocate all claims" in (e.get("note") or "") for e in events)

    wait_for(refused, TIMEOUT_S, what="kube-scheduler refusing a half on the full GPUs")
    assert not ds.results(claim_of("ks-late"))
    rest.code_of(core.delete_namespaced_pod, "ks-late", tenant.namespace, grace_period_seconds=0)

    submit("second")

    def waiting() -> list[str]:
        pods = tenant.job_pods("second")
        said = [unschedulable_message(p) for p in pods.values()]
        return said if len(pods) == 4 and all(
            "memory 8Gi does not fit, 0 of 16Gi free" in m for m in said) else []

    said = wait_for(waiting, TIMEOUT_S, what="the second Job told which share does not fit")
    assert all(m.startswith("Devices: ") and "device gpu-" in m for m in said), said
    assert tenant.bound(list(tenant.job_pods("second"))) == []
    second_claims = [c for c in ds.claims(cp, tenant.namespace)
                     if c["metadata"]["ownerReferences"][0]["name"].startswith("second-")]
    assert [ds.results(c) for c in second_claims] == [[]] * len(second_claims)
    live_scheduler.run_cycles(2)  # and it stays so
    assert tenant.bound(list(tenant.job_pods("second"))) == []

    rest.call(batch.delete_namespaced_job, "first", tenant.namespace,
              propagation_policy="Background")
    wait_for(lambda: bound_whole("second"), TIMEOUT_S,
             what="the second Job bound whole once the first was deleted")
