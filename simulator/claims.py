"""Device claims in the simulated cluster: the templates a trace job's pods name, the claims
the resourceclaim controller makes from them, and the allocations the actuator writes.

Why the simulator plays these parts: a pod that claims GPUs through Dynamic Resource Allocation
names a ResourceClaimTemplate; in a cluster, the resourceclaim controller makes each pod its
own claim (named in the pod's ``status.resourceClaimStatuses``), the scheduler writes the
claim's allocation and ``reservedFor`` before the bind, and the controller deletes the claim
once the pod is gone. The placement code reads those objects exactly as live, so the
simulator must keep them true: this module is that ground truth, fed into the cache's facts
as the watches would feed them.

Never a device twice: every device an allocation holds is recorded with its claim, and a plan
that hands out one already held (or allocates a claim allocated already) stops the
simulation, like a plan binding a pod bound already does (``actuator``).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable

from scheduler.feed.cache import ClusterCache
from scheduler.feed.facts import ClusterFacts
from scheduler.model import prebind
from scheduler.model.device_inventory import DeviceInventory
from scheduler.model.devices import (
    Ask,
    ClaimSpec,
    ClaimTemplate,
    DeviceId,
    Request,
    ResourceClaim,
)
from scheduler.model.prebind import PreBind, PreBindKind
from scheduler.model.volumes import VolumeCatalog
from scheduler.model.workloads import PodInfo
from scheduler.world import gpu_devices

#: The pod's name for its GPU claim (its ``spec.resourceClaims`` entry).
CLAIM_ENTRY = "gpu"
#: The request of a template's claim.
REQUEST = "gpus"


def template_for(namespace: str, gpus: int, models: Iterable[str] = ()) -> ClaimTemplate:
    """The template of a pod that claims *gpus* devices of one of *models* (none: any):
    of the model's DeviceClass for one model, else the driver's class, with a selector on
    the product name for several. Named after what it asks, so jobs alike share one."""
    models = tuple(sorted(set(models)))
    selectors: tuple[str, ...] = ()
    if len(models) == 1:
        cls = gpu_devices.class_name(models[0])
        name = f"{cls.removesuffix('.' + gpu_devices.DRIVER)}-x{gpus}"
    else:
        cls = gpu_devices.DRIVER
        name = f"gpu-x{gpus}"
        if models:
            listed = ", ".join(f'"{m}"' for m in models)
            selectors = (f'device.attributes["{gpu_devices.DRIVER}"].productName in [{listed}]',)
            name += "-" + hashlib.sha256("|".join(models).encode()).hexdigest()[:10]
    spec = ClaimSpec(requests=(Request(REQUEST, (Ask(REQUEST, cls, selectors, count=gpus),)),))
    return ClaimTemplate(namespace, name, spec)


def claim_name(pod_name: str) -> str:
    """The name the controller gives a pod's claim (``<pod>-<entry>``)."""
    return f"{pod_name}-{CLAIM_ENTRY}"


class SimulatedClaims:
    """Templates and claims as the apiserver holds them, written through to *cache*."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self.templates: set[str] = set()
        self.claims: dict[str, ResourceClaim] = {}  # namespace/name
        self.of_pod: dict[str, tuple[str, ...]] = {}  # pod uid -> its claims' keys
        self.held: dict[DeviceId, str] = {}  # device -> the claim whose allocation has it

    def _write(self, claims: Iterable[tuple[str, ResourceClaim | None]],
               templates: Iterable[ClaimTemplate] = ()) -> None:
        changes = tuple(claims)
        new = tuple(templates)

        def put(facts: ClusterFacts) -> bool:
            changed = [facts.set_claim_template(t.key, t) for t in new]
            changed += [facts.set_resource_claim(key, c) for key, c in changes]
            return any(changed)

        if changes or new:
            self.cache.change_facts(put)

    def create(self, pods: Iterable[PodInfo], templates: Iterable[ClaimTemplate]) -> None:
        """The user creates *templates* (those not there yet); the controller makes each of
        *pods* the claims its template entries ask for, named in its claim statuses."""
        by_key = {t.key: t for t in templates}
        fresh = [t for key, t in sorted(by_key.items()) if key not in self.templates]
        self.templates.update(t.key for t in fresh)
        made: list[tuple[str, ResourceClaim | None]] = []
        for pod in pods:
            names = dict(pod.claim_statuses)
            keys = []
            for use in pod.requirements.constraints.device_claims:
                name = names.get(use.entry)
                template = by_key.get(f"{pod.namespace}/{use.template}")
                if not use.template or not name or template is None:
                    continue
                claim = ResourceClaim(pod.namespace, name, template.spec, uid=f"claim/{pod.uid}")
                self.claims[claim.key] = claim
                keys.append(claim.key)
                made.append((claim.key, claim))
            if keys:
                self.of_pod[pod.uid] = tuple(keys)
        self._write(made, fresh)

    def allocate(self, decisions: Iterable[PreBind]) -> None:
        """Carry out a gang's ``DEVICES`` decisions (``prebind.assume``: the claim gets its
        allocation, ``reservedFor`` its pods); a device held already stops the run."""
        chosen = tuple(d for d in decisions if d.kind is PreBindKind.DEVICES)
        if not chosen:
            return
        for d in chosen:
            claim = self.claims.get(d.claim)
            if claim is None:
                raise RuntimeError(f"simulator: plan allocates {d.claim}, which does not exist")
            if d.allocation is None:
                continue
            if claim.allocation is not None:
                raise RuntimeError(f"simulator: plan allocates {d.claim}, allocated already")
            for device in d.allocation.devices:
                other = self.held.get(device)
                if other is not None:
                    raise RuntimeError(f"simulator: plan gives device {device} to {d.claim}, "
                                       f"which {other} holds")
                self.held[device] = d.claim
        keys = sorted({d.claim for d in chosen})
        before = VolumeCatalog(devices=DeviceInventory(claims={k: self.claims[k] for k in keys}))
        after = prebind.assume(before, chosen).devices.claims
        self.claims.update((k, after[k]) for k in keys)
        self._write((k, after[k]) for k in keys)

    def _free(self, key: str) -> None:
        claim = self.claims[key]
        if claim.allocation is not None:
            for device in claim.allocation.devices:
                if self.held.get(device) == key:
                    del self.held[device]

    def release(self, pod_uid: str) -> None:
        """The pod is back to pending (preempted, rolled back, its node failed): in a cluster
        it is deleted and its replacement gets a fresh claim; here its claims lose their
        allocation and reservation, which is the same to the scheduler."""
        changes = []
        for key in self.of_pod.get(pod_uid, ()):
            self._free(key)
            fresh = dataclasses.replace(self.claims[key], allocation=None, reserved_for=())
            if fresh != self.claims[key]:
                self.claims[key] = fresh
                changes.append((key, fresh))
        self._write(changes)

    def delete(self, pod_uid: str) -> None:
        """The pod is done: the controller deletes the claims made for it."""
        keys = self.of_pod.pop(pod_uid, ())
        for key in keys:
            self._free(key)
            del self.claims[key]
        self._write((key, None) for key in keys)
