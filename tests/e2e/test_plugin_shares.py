"""A gang of fractional-GPU pods on nodes still on a device plugin (issue 36, item 2), asked
for HAMi's way: each pod of an Indexed Job asks ``nvidia.com/gpu: 1`` with
``nvidia.com/gpumem`` half of a GPU's memory, on a kwok node carrying the
``hami.io/node-nvidia-register`` annotation HAMi's device plugin writes (two GPUs of 16 GiB,
ten tasks each; the node advertises twenty ``nvidia.com/gpu`` as the plugin does).

gang-scheduler places the first Job's four pods on the two GPUs, two halves each, writes the
chosen GPU of each pod in HAMi's pod annotations before binding (UUID, memory, cores; the
node; the bind phase the device plugin looks for) and binds the Job whole; a second such Job
does not fit (the GPUs are full), waits whole with a reason naming the GPU and the share, and
starts whole when the first is deleted.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from scheduler.model import hami
from scheduler.tools.devcluster import nodes
from tests.e2e.cluster_api import ControlPlane
from tests.e2e.live import POOL_LABEL, InProcessScheduler, Tenant
from tests.e2e.shares_support import ShareJobs

pytestmark = pytest.mark.e2e

GPU_MIB = 16384


def _half_gpu_spec(pool: str, scheduler_name: str) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1", hami.GPUMEM: str(GPU_MIB // 2)}
    return {"schedulerName": scheduler_name, "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0, "nodeSelector": {POOL_LABEL: pool},
            "containers": [{"name": "main", "image": "registry.invalid/train:latest",
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                          "limits": limits}}]}


def test_a_gang_of_half_gpus_is_written_two_per_gpu_and_the_next_waits_whole_for_the_share(
        control_plane: ControlPlane, tenant: Tenant,
        live_scheduler: InProcessScheduler) -> None:
    cp = control_plane
    name = f"{tenant.pool}-hami"
    registration = nodes.hami_registration(name, 2, GPU_MIB, slots=10)
    node = cp.create_node(name, gpus=20, labels={POOL_LABEL: tenant.pool},
                          annotations=registration)
    index_of = {g["id"]: g["index"]
                for g in json.loads(registration[hami.HAMI_REGISTER_ANNOTATION])}
    jobs = ShareJobs(cp, tenant, live_scheduler)
    pod_spec = _half_gpu_spec(tenant.pool, tenant.scheduler_name)

    jobs.submit("first", pod_spec)
    jobs.wait_bound_whole("first", what="the first Job bound whole")
    per_index: Counter[int] = Counter()
    for pod in tenant.job_pods("first").values():
        notes = pod["metadata"].get("annotations") or {}
        assert notes[hami.HAMI_NODE_ANNOTATION] == node == pod["spec"]["nodeName"]
        assert notes[hami.HAMI_BIND_PHASE_ANNOTATION] == "allocating"
        assert int(notes[hami.HAMI_BIND_TIME_ANNOTATION]) > 0
        chosen = notes[hami.HAMI_TO_ALLOCATE_ANNOTATION]
        assert notes[hami.HAMI_ALLOCATED_ANNOTATION] == chosen
        uuid, vendor, mib, cores = chosen.removesuffix(":;").split(",")
        assert (vendor, int(mib), int(cores)) == ("NVIDIA", GPU_MIB // 2, 0), chosen
        per_index[index_of[uuid]] += 1
    assert per_index == {0: 2, 1: 2}  # two halves on each GPU, never over

    # The queue is charged the GPU-equivalents held: two GPUs for four halves.
    jobs.wait_charged_two_gpus()

    jobs.submit("second", pod_spec)
    said = jobs.wait_told("second", lambda m: "memory 8Gi does not fit, 0 of 16Gi free" in m,
                          what="the second Job told which share does not fit")
    assert all("device GPU-" in m for m in said), said
    assert not any(hami.HAMI_TO_ALLOCATE_ANNOTATION in (p["metadata"].get("annotations") or {})
                   for p in tenant.job_pods("second").values())
    jobs.stays_pending("second")

    jobs.delete("first")
    jobs.wait_bound_whole("second", what="the second Job bound whole once the first was deleted")
    indexes = Counter(index_of[p["metadata"]["annotations"][hami.HAMI_TO_ALLOCATE_ANNOTATION]
                               .split(",")[0]] for p in tenant.job_pods("second").values())
    assert indexes == {0: 2, 1: 2}
