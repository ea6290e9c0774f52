"""What the fake DRA driver publishes for a node whose GPUs are partitionable (MIG, issue 36):
each GPU as a counter set, and the whole GPU and its MIG devices as devices consuming from it.

Modelled on an A100/H100 80GB: a GPU has 7 compute slices and 8 memory slices (10GB each).
``MIG_GPUS_LABEL`` on a node has the driver publish, per GPU ``gpu-N``:

* a counter set ``gpu-N`` (``sharedCounters``) with ``compute-slices: 7`` and
  ``memory-slices: 8``, in a slice of counter sets of its own (1.36 allows a slice either
  devices or counter sets, never both);
* the whole GPU, ``gpu-N`` (attribute ``type: gpu``), consuming all of both;
* every MIG device a profile could take at once: 1g.10gb x7 (1 compute, 1 memory slice),
  2g.20gb x3 (2, 2), 3g.40gb x2 (3, 4), 7g.80gb x1 (7, 8), named ``gpu-N-mig-3g40gb-K``
  (device names are DNS labels: no dots), with the attributes NVIDIA's DRA driver gives
  its MIG devices in spirit: their GPU's (product, architecture, versions, ``index``...,
  so a selector written for GPUs evaluates on them without an error), and ``type: mig``,
  ``profile``, ``parentIndex``, ``parentUUID``, their own ``uuid``, and their ``memory``
  as a capacity.

So the counters alone say what can be had together: two 3g.40gb, or one 3g.40gb beside
three 1g.10gb, or the whole GPU, never the whole GPU beside a slice of it. What the
counters do not model is MIG's placement rules (which start slices a profile may begin
at): real drivers publish per-slice counters for that; the aggregate is enough to test
the scheduler's counting, which is the same for either.

Slices: at most 64 devices in a slice whose devices consume counters and at most 8 counter
sets in one, so a node's pool has ``ceil(gpus / 4)`` device slices and ``ceil(gpus / 8)``
counter slices; ``resourceSliceCount`` counts them all.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from typing import Any

from scheduler.world.gpu_devices import DRIVER

#: A node label: ``"true"`` publishes the node's GPUs partitionable (counter sets and MIG
#: devices: DRA partitionable devices, beta and on by default in Kubernetes 1.36).
MIG_GPUS_LABEL = "gangscheduler.io/dra-mig-gpus"
COMPUTE = "compute-slices"
MEMORY = "memory-slices"
#: A whole GPU's counters.
WHOLE = {COMPUTE: 7, MEMORY: 8}
#: profile -> (compute slices, memory slices, how many fit on one GPU at once).
PROFILES: dict[str, tuple[int, int, int]] = {
    "1g.10gb": (1, 1, 7),
    "2g.20gb": (2, 2, 3),
    "3g.40gb": (3, 4, 2),
    "7g.80gb": (7, 8, 1),
}
GPUS_PER_DEVICE_SLICE = 4  # 4 x 14 devices <= 64
COUNTER_SETS_PER_SLICE = 8


def partitions_gpus(node: Mapping[str, Any]) -> bool:
    """Whether *node*'s GPUs are published partitionable (``MIG_GPUS_LABEL``)."""
    labels = node.get("metadata", {}).get("labels") or {}
    return labels.get(MIG_GPUS_LABEL) == "true"


def mig_device_name(gpu: str, profile: str, k: int) -> str:
    """``gpu-0``, ``3g.40gb``, 1 -> ``gpu-0-mig-3g40gb-1``."""
    return f"{gpu}-mig-{profile.replace('.', '')}-{k}"


def _counters(amounts: Mapping[str, int]) -> dict[str, Any]:
    return {name: {"value": str(value)} for name, value in amounts.items()}


def _consumes(gpu: str, compute: int, memory: int) -> list[dict[str, Any]]:
    return [{"counterSet": gpu, "counters": _counters({COMPUTE: compute, MEMORY: memory})}]


def gpu_partitions(whole: dict[str, Any]) -> list[dict[str, Any]]:
    """The devices of one GPU, from its whole-GPU device (JSON as ``dra.devices`` makes
    it): that device consuming the whole counter set, then its MIG devices."""
    gpu = whole["name"]
    attributes = whole["attributes"]
    parent = attributes["uuid"]["string"]
    out = [{**whole, "attributes": {**attributes, "type": {"string": "gpu"}},
            "consumesCounters": _consumes(gpu, WHOLE[COMPUTE], WHOLE[MEMORY])}]
    for profile, (compute, memory, fit) in PROFILES.items():
        for k in range(fit):
            name = mig_device_name(gpu, profile, k)
            mig_uuid = uuid.uuid5(uuid.NAMESPACE_URL, f"{DRIVER}/{parent}/{name}")
            out.append({"name": name, "attributes": {
                **attributes,
                "type": {"string": "mig"},
                "profile": {"string": profile},
                "parentIndex": attributes["index"],
                "parentUUID": {"string": parent},
                "uuid": {"string": f"MIG-{mig_uuid}"},
            }, "capacity": {"memory": {"value": f"{memory * 10}Gi"}},
                "consumesCounters": _consumes(gpu, compute, memory)})
    return out


def pool_specs(node_name: str, wholes: list[dict[str, Any]],
               generation: int) -> list[tuple[str, dict[str, Any]]]:
    """(slice name suffix, spec) of every slice of the node's pool: device slices first
    (suffix "" for the first, so the node's usual slice name stays), then counter slices."""
    groups = [wholes[i:i + GPUS_PER_DEVICE_SLICE]
              for i in range(0, len(wholes), GPUS_PER_DEVICE_SLICE)]
    sets = [{"name": w["name"], "counters": _counters(WHOLE)} for w in wholes]
    set_groups = [sets[i:i + COUNTER_SETS_PER_SLICE]
                  for i in range(0, len(sets), COUNTER_SETS_PER_SLICE)]
    count = len(groups) + math.ceil(len(sets) / COUNTER_SETS_PER_SLICE)
    pool = {"name": node_name, "generation": generation, "resourceSliceCount": count}
    out: list[tuple[str, dict[str, Any]]] = []
    for i, group in enumerate(groups):
        devices = [d for whole in group for d in gpu_partitions(whole)]
        out.append(("" if i == 0 else f"-{i}", {"driver": DRIVER, "nodeName": node_name,
                                                 "pool": pool, "devices": devices}))
    for i, group in enumerate(set_groups):
        out.append((f"-counters-{i}", {"driver": DRIVER, "nodeName": node_name,
                                       "pool": pool, "sharedCounters": group}))
    return out
