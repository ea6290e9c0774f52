"""A training Job whose GPUs are device claims, under contention (issue 35 with issue 33's
rule: every claim about an operator holds on a busy cluster too), on the real Job controller,
resourceclaim controller and the fake DRA driver's devices.

The shipped PyTorch DDP example, each pod claiming one device from a ResourceClaimTemplate
instead of requesting ``nvidia.com/gpu``, on one node of 4 devices:

- it waits whole behind a running gang that holds every device, and starts whole once that
  gang is gone;
- a higher-priority pod claiming every device preempts it twice: each time its pods are
  evicted whole, the resourceclaim controller deletes their claims (freeing the devices), the
  Job controller recreates the pods with fresh claims, and the gang is allocated and runs
  again whole, never two claims on one device.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from scheduler.tools.devcluster import dra, rest
from tests.e2e import dra_support as ds
from tests.e2e.cluster_api import ControlPlane
from tests.e2e.contention_jobs import Contention, TimingWatch, Workload
from tests.e2e.ops_support import Ops, ops_for
from tests.e2e.test_job_contention import example_job

pytestmark = pytest.mark.e2e

PODS = 4


@pytest.fixture
def ops(control_plane: ControlPlane) -> Iterator[Ops]:
    yield from ops_for(control_plane)


def device_job(ops: Ops, name: str) -> Workload:
    """The example Job, each pod's GPU a claim from the ``one-gpu`` template."""
    def create(queue: str, priority_class: str) -> None:
        body = example_job(ops, name, queue, priority_class)
        pod = body["spec"]["template"]["spec"]
        pod["resourceClaims"] = [{"name": ds.CLAIM, "resourceClaimTemplateName": "one-gpu"}]
        for container in pod["containers"]:
            for part in ("requests", "limits"):
                container["resources"].get(part, {}).pop("nvidia.com/gpu", None)
            container["resources"]["claims"] = [{"name": ds.CLAIM}]
        rest.call(client.BatchV1Api(ops.cp.api).create_namespaced_job, ops.ns, body)

    def pods() -> list[str]:
        return sorted(n for n, p in ops.tenant.job_pods(name).items()
                      if not p["metadata"].get("deletionTimestamp")
                      and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))

    return Workload(name, PODS, 1, create, pods)


def allocated(ops: Ops, pods: list[str]) -> dict[str, tuple[str, str]]:
    """Pod -> (pool, device) of its claim's allocation, for *pods* (each claim's owner)."""
    out = {}
    for claim in ds.claims(ops.cp, ops.ns):
        owner = (claim["metadata"].get("ownerReferences") or [{}])[0].get("name")
        if owner in pods:
            (result,) = ds.results(claim)
            assert ds.reserved_for(claim) == [owner]
            out[owner] = (result["pool"], result["device"])
    return out


def test_a_device_claiming_job_queues_is_preempted_twice_and_resumes_whole(ops: Ops) -> None:
    ds.create_template(ops.cp, ops.ns, "one-gpu", ds.exactly(dra.DRIVER))
    ds.create_template(ops.cp, ops.ns, "whole-node", ds.exactly(dra.DRIVER, count=PODS))
    contention = Contention.set_up(ops, device_job(ops, "ddp-dra"), node_template="whole-node")
    with TimingWatch(ops.cp, ops.ns) as watch:
        runner = ops.start_scheduler(eviction_grace_period_seconds=60)
        pods = contention.queued_behind_a_running_gang(runner)
        devices = allocated(ops, pods)
        assert sorted(devices) == pods and len(set(devices.values())) == PODS, devices
        for round_ in (1, 2):
            resume = contention.preempted_and_resumed(watch, round_)
            print(f"\nddp-dra round {round_}: {resume.describe()}")
            fresh = list(resume.pods)
            devices = allocated(ops, fresh)
            assert sorted(devices) == sorted(fresh), devices
            assert len(set(devices.values())) == PODS, devices  # no device twice
        assert watch.rebinds() == {}
