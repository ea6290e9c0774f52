"""The structured device allocator: devices for the claims of the members placed on one node,
chosen as kube-scheduler's DRA allocator chooses them, or the reason there are none.

This module drives the search (``device_search``, where its rules are described): it refuses
early what ``precheck`` refuses, skips a search that counts alone show to be hopeless, and
explains a failure by probing claim by claim. Answers are ``device_outcome``'s types.
"""

from __future__ import annotations

import contextlib
from collections.abc import Container, Mapping, Sequence

from scheduler.model.devices import (
    AllocationMode,
    Ask,
    DeviceClass,
    DeviceId,
    ResourceClaim,
)
from scheduler.placement.device_outcome import DeviceMisfit, NodeAllocation, precheck
from scheduler.placement.device_pools import NodeDevices
from scheduler.placement.device_search import Consumed, NodeSearch, SearchStop, Selections

#: Steps (devices tried) one node's search may take before it gives up with a reason.
BUDGET = 200_000
#: The reason an unexplained search gives (``allocate(..., explain=False)``).
NO_DEVICES = "not enough free devices match"


class Held:
    """Devices held, read as the union of several sets without building it (a placement
    asks many nodes against the cluster's allocations plus its own choices so far)."""

    __slots__ = ("sets",)

    def __init__(self, *sets: Container[DeviceId]) -> None:
        self.sets = tuple(s for s in sets if s)

    def __contains__(self, device: object) -> bool:
        return any(device in s for s in self.sets)


def allocate(node: NodeDevices, claims: Sequence[ResourceClaim],
             classes: Mapping[str, DeviceClass], taken: Container[DeviceId] = frozenset(),
             *, admin_access: bool = False, budget: int = BUDGET, explain: bool = True,
             selections: Selections | None = None,
             consumed: Consumed | None = None) -> NodeAllocation | DeviceMisfit:
    """Devices on *node* for every one of *claims* (unallocated claims, each once), none of
    them in *taken* and no share over what *consumed* leaves of a device; or the reason
    there are none (without *explain*, a plain "no devices": a placement search asking many
    nodes wants the verdict, not the second search that explains it)."""
    for claim in claims:
        early = precheck(claim, classes, admin_access=admin_access)
        if early is not None:
            return DeviceMisfit(early.claim, early.request, early.reason, node.node)
    consumed = consumed or {}
    search = NodeSearch(node, claims, classes, taken, budget, consumed)
    if selections is not None:
        search.selectable = selections
    try:
        if search.counts_fall_short():
            if not explain:
                return DeviceMisfit("", "", NO_DEVICES, node.node)
            return _explain(node, claims, classes, taken, budget, consumed)
        if search.request(0, 0):
            return search.answer()
        if not explain:
            return DeviceMisfit("", "", NO_DEVICES, node.node)
        return _explain(node, claims, classes, taken, budget, consumed)
    except SearchStop as stop:
        return stop.misfit


def _explain(node: NodeDevices, claims: Sequence[ResourceClaim],
             classes: Mapping[str, DeviceClass], taken: Container[DeviceId],
             budget: int, consumed: Consumed) -> DeviceMisfit:
    """Why the search found nothing: a request short of devices; else a claim whose
    constraints no set satisfies; else the claims together want more than is free (and the
    last share or device's counters that did not fit, naming the device, the counter set
    and the amounts)."""
    note = f" (left out: {'; '.join(node.left_out)})" if node.left_out else ""
    probe = NodeSearch(node, claims, classes, taken, budget, consumed)
    for ci, claim in enumerate(claims):
        for request in claim.spec.requests:
            shortfalls = []
            for ask in request.asks:
                free, held = probe.count(ci, ask)
                want = ask.count if ask.mode is AllocationMode.EXACT_COUNT else max(1, free)
                if free >= want and (ask.mode is AllocationMode.EXACT_COUNT or not held):
                    break
                shortfalls.append(_short(ask, free, held))
            else:
                return DeviceMisfit(claim.key, request.name, "; ".join(shortfalls) + note,
                                    node.node)
    for claim in claims:
        alone = NodeSearch(node, (claim,), classes, taken, budget, consumed)
        if not alone.request(0, 0):
            names = ", ".join(f"matchAttribute {c.attribute}"
                              + (f" across {', '.join(c.requests)}" if c.requests else "")
                              for c in claim.spec.constraints)
            last = f" (last: {alone.last_misfit})" if alone.last_misfit else ""
            if names:  # (a share or counters that did not fit may be why, or not)
                why = f"no set of free devices satisfies {names}{last}"
            else:
                why = alone.last_misfit or "its requests cannot all be satisfied together"
            return DeviceMisfit(claim.key, "", why + note, node.node)
    keys = ", ".join(c.key for c in claims)
    last = ""
    if any(o.device.shareable or o.device.consumes for o in probe.offered):
        # which share or which device's counters were the ones too many
        together = NodeSearch(node, claims, classes, taken, budget, consumed)
        with contextlib.suppress(SearchStop):  # a search that gives up still names a share
            together.request(0, 0)
        last = f"; {together.last_misfit}" if together.last_misfit else ""
    return DeviceMisfit("", "", f"claims {keys} together need more devices than are free"
                        + last + note, node.node)


def _short(ask: Ask, free: int, held: int) -> str:
    """What one request (or sub-request, named) lacks on the node."""
    who = f"{ask.name}: " if "/" in ask.name else ""
    taken = f", {held} more held by other claims" if held else ""
    if ask.mode is AllocationMode.ALL:
        if not free and not held:
            return f"{who}asks for all devices of class {ask.class_name}, none match"
        return f"{who}asks for all devices of class {ask.class_name}{taken}"
    return (f"{who}needs {ask.count} device(s) of class {ask.class_name}, {free} free "
            f"match{taken}")
