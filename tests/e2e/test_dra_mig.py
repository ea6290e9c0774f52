"""A gang of MIG pods on the dev cluster, requested the upstream way (issue 36): DRA
partitionable devices (``DRAPartitionableDevices``, beta and on by default in the pinned
Kubernetes 1.36). The fake driver publishes the node's two GPUs as counter sets (7 compute,
8 memory slices each) with the whole GPU and its MIG devices consuming from them
(``dra_mig``); each pod of an Indexed Job claims a 3g.40gb through a ResourceClaimTemplate.

gang-scheduler allocates the first Job's four claims as the four 3g.40gb devices the two
GPUs hold (two each, never over a GPU's slices) and binds the Job whole; a second Job of
2g.20gb pods does not fit (each GPU has one compute slice left), waits whole with a reason
naming the GPU and the counter, and starts whole when the first is deleted. A gang mixing
whole GPUs and slices binds whole on a node of three GPUs.

The real kube-scheduler agrees both ways: before the gangs, it allocates a 3g.40gb to a pod
of its own, written in the shape our reader reads; with the first gang running, it refuses
a whole GPU (it counts the counters of the devices gang-scheduler allocated).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
from kubernetes import client

from scheduler.kube.read.devices_convert import resource_claim
from scheduler.tools.devcluster import dra, dra_driver, dra_mig, rest
from tests.e2e import dra_support as ds
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import POOL_LABEL, QUEUE_LABEL, InProcessScheduler, Tenant
from tests.e2e.shares_support import TIMEOUT_S, KubeSchedulerClaims, ShareJobs

pytestmark = pytest.mark.e2e

D = dra.DRIVER


def _selector(attribute: str, value: str) -> str:
    """A device whose *attribute* is *value*; one without the attribute is no match."""
    return (f'"{attribute}" in device.attributes["{D}"] && '
            f'device.attributes["{D}"].{attribute} == "{value}"')


def _requests(*kinds: str) -> dict[str, Any]:
    """A claim spec of one device per kind: a MIG profile, or "gpu" for a whole GPU."""
    return {"devices": {"requests": [
        {"name": "whole" if kind == "gpu" else f"mig-{i}", "exactly": {
            "deviceClassName": D, "selectors": [{"cel": {"expression": _selector(
                "type", "gpu") if kind == "gpu" else _selector("profile", kind)}}]}}
        for i, kind in enumerate(kinds)]}}


def _mig_node(cp: ControlPlane, tenant: Tenant, suffix: str, gpus: int) -> str:
    node = cp.create_node(f"{tenant.pool}-{suffix}", gpus=gpus,
                          labels={POOL_LABEL: tenant.pool, dra_mig.MIG_GPUS_LABEL: "true",
                                  "mig-test": suffix})
    dra_driver.wait_published(cp.api, [node], timeout_s=TIMEOUT_S)
    return node


def test_a_gang_of_mig_slices_fills_two_gpus_and_the_next_waits_whole_for_the_counters(
        control_plane: ControlPlane, tenant: Tenant,
        live_scheduler: InProcessScheduler) -> None:
    cp = control_plane
    node = _mig_node(cp, tenant, "mig", 2)
    devices = ds.devices_of(cp, node)
    assert devices["gpu-0-mig-3g40gb-1"]["consumesCounters"][0]["counterSet"] == "gpu-0"
    ds.create_template(cp, tenant.namespace, "mig-3g", _requests("3g.40gb"))
    ds.create_template(cp, tenant.namespace, "mig-2g", _requests("2g.20gb"))
    ds.create_template(cp, tenant.namespace, "whole-gpu", _requests("gpu"))
    where = {POOL_LABEL: tenant.pool, "mig-test": "mig"}
    jobs = ShareJobs(cp, tenant, live_scheduler)
    theirs = KubeSchedulerClaims(cp, tenant, where)

    # kube-scheduler allocates a MIG device; our reader takes its allocation as ours.
    theirs.create_pod("ks-mig", "mig-3g")
    claim = theirs.wait_allocated("ks-mig", what="kube-scheduler allocated a 3g.40gb")
    (result,) = ds.results(claim)
    assert result["device"] == "gpu-0-mig-3g40gb-0", result
    read = resource_claim(claim)
    assert read.allocation is not None and read.allocation.results[0].device.device == (
        "gpu-0-mig-3g40gb-0")
    theirs.delete_and_wait_gone("ks-mig")

    jobs.submit("first", ds.claiming_pod_spec(where, tenant.scheduler_name, template="mig-3g"))
    first = jobs.wait_bound_whole("first", what="the first Job bound whole")
    claims = theirs.claims_by_pod()
    per_gpu: Counter[str] = Counter()
    names = []
    for name in first:
        (result,) = ds.results(claims[name])
        assert (result["driver"], result["pool"]) == (D, node)
        assert re.fullmatch(r"gpu-[01]-mig-3g40gb-[01]", result["device"]), result
        assert "shareID" not in result
        assert ds.reserved_for(claims[name]) == [name]
        names.append(result["device"])
        per_gpu[result["device"][:5]] += 1
    assert len(set(names)) == 4 and per_gpu == {"gpu-0": 2, "gpu-1": 2}

    # The queue's usage counts each 3g.40gb as half a GPU (4 of 8 memory slices): two GPUs.
    jobs.wait_charged_two_gpus()

    # kube-scheduler counts the counters of the devices gang-scheduler allocated.
    theirs.create_pod("ks-whole", "whole-gpu")
    theirs.wait_refused("ks-whole", what="kube-scheduler refusing a whole GPU beside the slices")
    theirs.delete_pod("ks-whole")

    jobs.submit("second", ds.claiming_pod_spec(where, tenant.scheduler_name, template="mig-2g"))
    reason = re.compile(r"gpu-[01]: device gpu-[01]-mig-2g20gb-\d needs 2 compute-slices, "
                        r"1 of 7 free")
    said = jobs.wait_told("second", lambda m: bool(reason.search(m)),
                          what="the second Job told which counter does not fit")
    assert all(m.startswith("Devices: ") for m in said), said
    jobs.stays_pending("second")

    jobs.delete("first")
    second = jobs.wait_bound_whole("second",
                                   what="the second Job bound whole once the first was deleted")
    claims = theirs.claims_by_pod()
    got = sorted(ds.results(claims[name])[0]["device"] for name in second)
    assert all(re.fullmatch(r"gpu-[01]-mig-2g20gb-[012]", d) for d in got), got
    assert len(set(got)) == 4


def test_a_gang_mixing_whole_gpus_and_slices_binds_whole(
        control_plane: ControlPlane, tenant: Tenant,
        live_scheduler: InProcessScheduler) -> None:
    """Two pods, each claiming a whole GPU and a 3g.40gb, on a node of three GPUs: two whole
    GPUs, and the two slices on the third (a whole GPU's counters leave no slice of it)."""
    cp = control_plane
    node = _mig_node(cp, tenant, "mixed", 3)
    ds.create_template(cp, tenant.namespace, "whole-and-slice", _requests("gpu", "3g.40gb"))
    job = ds.indexed_job("mixed", 2, ds.claiming_pod_spec(
        {POOL_LABEL: tenant.pool, "mig-test": "mixed"}, tenant.scheduler_name,
        template="whole-and-slice"), {QUEUE_LABEL: tenant.queue})
    rest.call(client.BatchV1Api(cp.api).create_namespaced_job, tenant.namespace, job)

    def bound() -> dict[str, dict[str, Any]]:
        pods = tenant.job_pods("mixed")
        return pods if len(pods) == 2 and tenant.all_bound(list(pods)) else {}

    pods = wait_for(bound, TIMEOUT_S, what="the mixed Job bound whole")
    claims = {c["metadata"]["ownerReferences"][0]["name"]: c
              for c in ds.claims(cp, tenant.namespace)}
    wholes, slices = [], []
    for name in pods:
        by_request = {r["request"]: r for r in ds.results(claims[name])}
        assert by_request["whole"]["pool"] == node
        wholes.append(by_request["whole"]["device"])
        slices.append(by_request["mig-1"]["device"])
    # (first fit, as upstream: the first pod's slice goes to gpu-1, next to its whole gpu-0)
    assert len(set(wholes)) == 2 and len(set(slices)) == 2, (wholes, slices)
    parents = {s.split("-mig-")[0] for s in slices}
    assert len(parents) == 1 and not parents & set(wholes), (wholes, slices)
    assert all(re.fullmatch(r"gpu-[012]-mig-3g40gb-[01]", s) for s in slices), slices
