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

from scheduler.kube.read.devices_convert import resource_claim
from scheduler.tools.devcluster import dra, dra_driver
from tests.e2e import dra_support as ds
from tests.e2e.cluster_api import ControlPlane
from tests.e2e.live import POOL_LABEL, InProcessScheduler, Tenant
from tests.e2e.shares_support import TIMEOUT_S, KubeSchedulerClaims, ShareJobs

pytestmark = pytest.mark.e2e

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
    jobs = ShareJobs(cp, tenant, live_scheduler)
    theirs = KubeSchedulerClaims(cp, tenant, {POOL_LABEL: tenant.pool})

    # kube-scheduler allocates a share; our reader takes its allocation as ours would be.
    theirs.create_pod("ks-half", "half-gpu")
    claim = theirs.wait_allocated("ks-half", what="kube-scheduler allocated a half GPU")
    (result,) = ds.results(claim)
    assert result["consumedCapacity"] == {"memory": HALF} and result.get("shareID"), result
    read = resource_claim(claim)
    assert read.allocation is not None and read.allocation.results[0].share_id
    theirs.delete_and_wait_gone("ks-half")

    pod_spec = ds.claiming_pod_spec({POOL_LABEL: tenant.pool}, tenant.scheduler_name,
                                    template="half-gpu")
    jobs.submit("first", pod_spec)
    first = jobs.wait_bound_whole("first", what="the first Job bound whole")
    claims = theirs.claims_by_pod()
    per_device: Counter[str] = Counter()
    for name in first:
        (result,) = ds.results(claims[name])
        assert (result["driver"], result["pool"]) == (dra.DRIVER, node)
        assert result["consumedCapacity"] == {"memory": str(8 * 2**30)}
        assert len(result["shareID"]) == 36
        assert ds.reserved_for(claims[name]) == [name]
        per_device[result["device"]] += 1
    assert per_device == {"gpu-0": 2, "gpu-1": 2}  # two halves on each GPU, never over

    # The queue's usage counts the shares (item 1).
    jobs.wait_charged_two_gpus()

    # kube-scheduler counts the shares gang-scheduler wrote: no room for another half.
    theirs.create_pod("ks-late", "half-gpu")
    theirs.wait_refused("ks-late", what="kube-scheduler refusing a half on the full GPUs")
    theirs.delete_pod("ks-late")

    jobs.submit("second", pod_spec)
    said = jobs.wait_told("second", lambda m: "memory 8Gi does not fit, 0 of 16Gi free" in m,
                          what="the second Job told which share does not fit")
    assert all(m.startswith("Devices: ") and "device gpu-" in m for m in said), said
    second_claims = [c for c in ds.claims(cp, tenant.namespace)
                     if c["metadata"]["ownerReferences"][0]["name"].startswith("second-")]
    assert [ds.results(c) for c in second_claims] == [[]] * len(second_claims)
    jobs.stays_pending("second")

    jobs.delete("first")
    jobs.wait_bound_whole("second", what="the second Job bound whole once the first was deleted")
