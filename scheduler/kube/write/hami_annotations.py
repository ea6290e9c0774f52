"""The GPUs chosen for a pod's HAMi shares, written where HAMi's device plugin reads them.

HAMi's own scheduler writes the chosen devices on the pod in its filter step and the bind
phase in its bind step, then binds; the device plugin's Allocate, called by the kubelet once
the pod is on the node, finds the pod by ``hami.io/vgpu-node`` + ``hami.io/bind-phase:
allocating`` and reads ``hami.io/vgpu-devices-to-allocate``. So every annotation must be on
the pod before the binding. Here that is the pre-bind seam's job: the placement's
``DEVICES`` decision for a pod's share claim (``scheduler.kube.read.hami_convert``) is
written as one conditional merge patch of the pod's annotations (``write``) instead of a
ResourceClaim status, before any member of the gang binds; a failed write fails the gang's
pre-bind writes as a claim's would, and ``undo`` takes the annotations back from a pod that
is not bound yet.

Not done (documented): HAMi's node lock (``hami.io/mutex.lock``), which serialises binds per
node so the device plugin never sees two pods allocating at once. Without it the device
plugin falls back to the pending pods bound to its node that carry these annotations.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from scheduler.kube.client import path_segment
from scheduler.kube.write.conditional import Api
from scheduler.model import hami
from scheduler.model.devices import Allocation
from scheduler.model.prebind import PreBind

#: The vendor word HAMi writes as a chosen device's type.
_VENDOR = "NVIDIA"


def devices_text(allocation: Allocation, containers: Sequence[str]) -> str:
    """``UUID,NVIDIA,MiB,cores:`` per device, containers in order, each ended by ``;`` (a
    container holding none: an empty segment), as HAMi encodes a pod's devices."""
    segments = []
    for name in containers:
        entries = []
        for r in allocation.results:
            if r.request != name:
                continue
            consumed = dict(r.consumed)
            memory = consumed.get(hami.MEMORY, Fraction(0)) / hami.MIB
            cores = consumed.get(hami.CORES, Fraction(0))
            entries.append(f"{r.device.device},{_VENDOR},{int(memory)},{int(cores)}:")
        segments.append("".join(entries) + ";")
    return "".join(segments)


def pod_annotations(allocation: Allocation, containers: Sequence[str], node: str,
                now: float) -> dict[str, str]:
    """Every annotation HAMi's device plugin needs to find the pod and its GPUs on *node*
    (*now*: Unix seconds, from the caller's clock)."""
    devices = devices_text(allocation, containers)
    stamp = str(int(now))
    return {hami.HAMI_TO_ALLOCATE_ANNOTATION: devices,
            hami.HAMI_ALLOCATED_ANNOTATION: devices,
            hami.HAMI_NODE_ANNOTATION: node,
            hami.HAMI_TIME_ANNOTATION: stamp,
            hami.HAMI_BIND_PHASE_ANNOTATION: "allocating",
            hami.HAMI_BIND_TIME_ANNOTATION: stamp}


def is_share_claim(key: str) -> bool:
    """Is *key* (``namespace/name``) a pod's share claim rather than a ResourceClaim?"""
    return key.endswith(f"~{hami.DRIVER}")


def _pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{path_segment(namespace)}/pods/{path_segment(name)}"


def _pod(api: Api, d: PreBind) -> tuple[str, dict[str, Any]] | str:
    """The path and the object of the one pod *d* is for, or why not."""
    if len(d.consumers) != 1:
        return f"claim {d.claim}: a share claim is one pod's, not {len(d.consumers)}'s"
    namespace = d.claim.split("/", 1)[0]
    path = _pod_path(namespace, d.consumers[0].name)
    pod = api.get(path)
    if isinstance(pod, str):
        return f"pod {namespace}/{d.consumers[0].name}: {pod}"
    if (pod.get("metadata") or {}).get("uid") != d.consumers[0].uid:
        return f"pod {namespace}/{d.consumers[0].name}: recreated"
    return path, pod


def _containers(pod: Mapping[str, Any]) -> list[str]:
    return [str(c.get("name", "")) for c in (pod.get("spec") or {}).get("containers") or []]


def write(api: Api, d: PreBind) -> str:
    """Carry out a ``DEVICES`` decision for a pod's share claim: why not, "" when done."""
    if d.allocation is None:
        return ""  # allocated already: the pod carries its annotations
    found = _pod(api, d)
    if isinstance(found, str):
        return found
    path, pod = found
    meta = pod.get("metadata") or {}
    if (pod.get("spec") or {}).get("nodeName"):
        return f"pod {d.claim.split('/', 1)[0]}/{meta.get('name')} is bound already"
    written = pod_annotations(d.allocation, _containers(pod), d.target, time.time())
    why = api.patch(path, {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                                        "annotations": written}})
    return f"pod {d.claim.split('/', 1)[0]}/{meta.get('name')}: {why}" if why else ""


def undo(api: Api, d: PreBind) -> str:
    """Take the annotations back from a pod not bound yet (best effort): why not, ""."""
    found = _pod(api, d)
    if isinstance(found, str):
        return ""  # gone or recreated: nothing of ours is left
    path, pod = found
    meta = pod.get("metadata") or {}
    if (pod.get("spec") or {}).get("nodeName"):
        return ""  # bound: the device plugin may have read them
    gone: dict[str, None] = dict.fromkeys(_WRITTEN)
    return api.patch(path, {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                                         "annotations": gone}})


_WRITTEN = (hami.HAMI_TO_ALLOCATE_ANNOTATION, hami.HAMI_ALLOCATED_ANNOTATION,
            hami.HAMI_NODE_ANNOTATION, hami.HAMI_TIME_ANNOTATION,
            hami.HAMI_BIND_PHASE_ANNOTATION, hami.HAMI_BIND_TIME_ANNOTATION)
