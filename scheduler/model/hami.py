"""GPU shares through a device plugin: HAMi's convention (issue 36), as consumable capacity.

Why HAMi rather than KAI-Scheduler's ``gpu-fraction`` annotation: HAMi's device plugin
publishes each node's GPUs (UUID, index, memory, cores, how many tasks may share one) in a
node annotation, and its pods name their share as extended resources beside
``nvidia.com/gpu``; both read as plain objects, so a kwok node carries the convention as a
real node would, and the share is a per-GPU amount of memory and cores that maps one to one
onto a shareable DRA device's capacities. KAI's fraction is handed to the GPU by its own
binder and reservation pods, which a kwok cluster cannot stand in for.

The convention as HAMi v2.x has it (``pkg/device/nvidia/device.go``, ``pkg/util/types.go``):

- node annotation ``hami.io/node-nvidia-register``: a JSON list, one object per GPU:
  ``id`` (UUID), ``index`` (omitted when 0), ``count`` (most tasks that may share it),
  ``devmem`` (MiB), ``devcore`` (percent, 100 a whole GPU), ``type``, ``health``...
- a container asks ``nvidia.com/gpu: n`` GPUs, each with ``nvidia.com/gpumem`` MiB (absent:
  the whole memory) and ``nvidia.com/gpucores`` percent (absent: none reserved);
- the scheduler writes, before binding, the devices chosen per container into
  ``hami.io/vgpu-devices-to-allocate`` (what the device plugin's Allocate reads and clears)
  and ``hami.io/vgpu-devices-allocated`` (what stays, read back to count usage): per
  container ``UUID,NVIDIA,mem,cores:`` for each device, containers separated by ``;``; and
  ``hami.io/vgpu-node`` (the node), ``hami.io/vgpu-time``, ``hami.io/bind-time`` (Unix
  seconds) and ``hami.io/bind-phase: allocating``, by which the device plugin finds the pod
  being bound to its node.

How it maps onto the share model (``scheduler.model.device_capacity``, the one rule "never
over a GPU's capacity"): each registered GPU is a shareable ``Device`` of driver ``DRIVER``,
pool = the node, named by its UUID, with capacities memory (bytes), cores (percent) and task
slots (``count``); a container's ask is a request for ``n`` such devices naming its memory
and cores (a slot is taken by default). Those are built at the read edge
(``scheduler.kube.read.hami_convert``) and the chosen devices are written at the bind edge
(``scheduler.kube.write.hami_annotations``).
"""

from __future__ import annotations

from fractions import Fraction

from scheduler.model.constraints import DeviceClaimUse
from scheduler.model.devices import CapacityPolicy, DeviceClass

#: The driver name the read edge gives the devices a HAMi node registers.
DRIVER = "hami.io"
#: The DeviceClass the shares are asked through (selects every device of ``DRIVER``).
CLASS = DeviceClass("hami.io-gpu", (f'device.driver == "{DRIVER}"',))

#: The ``spec.resourceClaims``-like entry a pod asking for shares is read with: its claim is
#: the pod's own (``scheduler.kube.read.hami_convert.claim_name``), named in its claim
#: statuses as a template's claim is, so alike pods keep one requirements shape. The
#: template is no object (``~`` is in no API name).
USE = DeviceClaimUse(f"{DRIVER}-gpus", template=f"~{DRIVER}")

#: Node: the GPUs its device plugin registered (JSON list, see the module docstring).
HAMI_REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
#: Pod: the devices chosen per container, for the device plugin's Allocate (it clears it).
HAMI_TO_ALLOCATE_ANNOTATION = "hami.io/vgpu-devices-to-allocate"
#: Pod: the devices chosen per container, kept (usage is counted from it).
HAMI_ALLOCATED_ANNOTATION = "hami.io/vgpu-devices-allocated"
#: Pod: the node the devices were chosen on.
HAMI_NODE_ANNOTATION = "hami.io/vgpu-node"
#: Pod: when the devices were chosen (Unix seconds).
HAMI_TIME_ANNOTATION = "hami.io/vgpu-time"
#: Pod: ``allocating`` until the device plugin answers (``success`` / ``failed``).
HAMI_BIND_PHASE_ANNOTATION = "hami.io/bind-phase"
#: Pod: when the binding was made (Unix seconds).
HAMI_BIND_TIME_ANNOTATION = "hami.io/bind-time"

#: Container resources of the convention (besides ``nvidia.com/gpu``).
GPUMEM = "nvidia.com/gpumem"  # MiB of each GPU
GPUCORES = "nvidia.com/gpucores"  # percent of each GPU's cores
GPUMEM_PERCENTAGE = "nvidia.com/gpumem-percentage"  # not supported: refused by name

#: Capacity names of a registered GPU (qualified by ``DRIVER``).
MEMORY = f"{DRIVER}/memory"  # bytes
CORES = f"{DRIVER}/cores"  # percent
SLOTS = f"{DRIVER}/slots"  # tasks

MIB = 2**20

#: An ask naming no cores reserves none; every ask takes one task slot; an ask naming no
#: memory takes all of it (no policy: the whole capacity), as HAMi reads a missing gpumem.
POLICIES = ((CORES, CapacityPolicy(default=Fraction(0))),
            (SLOTS, CapacityPolicy(default=Fraction(1))))
