"""What the device allocator answers, and the refusals that need no device.

Kept apart from the search (``device_search``) and its driver (``devices``): the placement
and the claim bookkeeping (``device_claims``, ``device_terms``, ``solve``) read these answers
and run ``precheck`` without depending on how a node's devices are searched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.model.devices import (
    MAX_DEVICES_PER_CLAIM,
    Allocation,
    AllocationMode,
    DeviceClass,
    DeviceId,
    ResourceClaim,
)


@dataclass(frozen=True, slots=True)
class DeviceMisfit:
    """Why the claims cannot get devices: which claim, which request (or constraint)."""

    claim: str = ""
    request: str = ""
    reason: str = ""
    node: str = ""

    def describe(self) -> str:
        where = f"claim {self.claim}" if self.claim else "device claims"
        if self.request:
            where += f", request {self.request}"
        on = f" on node {self.node}" if self.node else ""
        return f"{where}{on}: {self.reason}"


@dataclass(frozen=True, slots=True)
class NodeAllocation:
    """Per claim key, the allocation found for it on ``node``."""

    node: str
    allocations: tuple[tuple[str, Allocation], ...] = ()

    def as_dict(self) -> dict[str, Allocation]:
        return dict(self.allocations)

    @property
    def devices(self) -> frozenset[DeviceId]:
        return frozenset(r.device for _, a in self.allocations for r in a.results
                         if not r.admin_access)


def precheck(claim: ResourceClaim, classes: Mapping[str, DeviceClass], *,
             admin_access: bool = False) -> DeviceMisfit | None:
    """What makes *claim* unallocatable anywhere, before any device is looked at."""
    unsupported = claim.spec.all_unsupported()
    if unsupported:
        return DeviceMisfit(claim.key, "", f"{', '.join(unsupported)} not supported by "
                                           "gang-scheduler's device allocator")
    if claim.terminating:
        return DeviceMisfit(claim.key, "", "the claim is being deleted")
    if not claim.spec.requests:
        return DeviceMisfit(claim.key, "", "no device requests")
    least = 0
    for request in claim.spec.requests:
        for ask in request.asks:
            cls = classes.get(ask.class_name)
            if cls is None:
                return DeviceMisfit(claim.key, ask.name, f"device class {ask.class_name} "
                                                         "not found")
            if cls.unsupported:
                return DeviceMisfit(claim.key, ask.name, f"device class {cls.name}: "
                                    f"{', '.join(cls.unsupported)} not supported")
            if ask.admin_access and not admin_access:
                return DeviceMisfit(claim.key, ask.name, "admin access is requested, but "
                                                         "it is not enabled")
        least += min(a.count if a.mode is AllocationMode.EXACT_COUNT else 1
                     for a in request.asks)
    if least > MAX_DEVICES_PER_CLAIM:
        return DeviceMisfit(claim.key, "", f"{least} devices requested, more than the limit "
                                           f"of {MAX_DEVICES_PER_CLAIM} per claim")
    return None
