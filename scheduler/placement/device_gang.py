"""Devices for a whole gang's placement, all or nothing.

kube-scheduler allocates one pod's claims at a time; a gang must not start with some members
holding devices and others finding none, so a placement (node -> the claims of the members
put there) gets devices for every member or a reason, never part of it. Nodes are taken in
name order; each node's claims are allocated by ``devices.allocate`` with every device chosen
on an earlier node counted as taken, so no device is handed out twice across the gang.

A claim may be named by several members (a shared claim): it is allocated once, on the first
node that needs it, and every other node using it must be reachable by that allocation (a
node-local device pins all its users to one node, as in Kubernetes). A claim allocated
before (``status.allocation``) is not allocated again: it is checked to reach the node.

What the search does not do yet: choose a shared claim's devices so that they reach several
nodes when the first choice does not (it reports the node that cannot reach them instead).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.model.devices import Allocation, DeviceClass, DeviceId, ResourceClaim
from scheduler.placement.device_outcome import DeviceMisfit, precheck
from scheduler.placement.device_pools import NodeDevices
from scheduler.placement.device_search import Consumed
from scheduler.placement.devices import BUDGET, allocate


@dataclass(frozen=True, slots=True)
class GangDevices:
    """The allocations a gang's placement needs: (claim key, node it was chosen on,
    allocation), in the order they were made."""

    allocations: tuple[tuple[str, str, Allocation], ...] = ()

    def by_claim(self) -> dict[str, Allocation]:
        return {key: a for key, _, a in self.allocations}

    @property
    def devices(self) -> frozenset[DeviceId]:
        return frozenset(r.device for _, _, a in self.allocations for r in a.results
                         if not r.admin_access)


def allocate_gang(placement: Mapping[str, Sequence[ResourceClaim]],
                  nodes: Mapping[str, NodeDevices], classes: Mapping[str, DeviceClass],
                  labels: Mapping[str, Mapping[str, str]],
                  taken: frozenset[DeviceId] = frozenset(), *, admin_access: bool = False,
                  budget: int = BUDGET,
                  consumed: Consumed | None = None) -> GangDevices | DeviceMisfit:
    """Allocations for every unallocated claim of *placement* (node -> the claims of the
    members placed there), or the first reason one cannot be had: all or nothing.

    *nodes* has each node's devices (``device_pools.node_devices``), *labels* each node's
    labels (for where an allocation reaches), *taken* every device allocated by anyone whole,
    *consumed* the capacity the cluster's shares take of each shareable device (a device this
    gang shares on one node is held whole for the others: never over, at the cost of a
    network-attached device shared across the gang's nodes)."""
    seen: set[str] = set()
    for claims in placement.values():
        for claim in claims:
            if claim.key not in seen and claim.allocation is None:
                seen.add(claim.key)
                early = precheck(claim, classes, admin_access=admin_access)
                if early is not None:
                    return early
    made: dict[str, tuple[str, Allocation]] = {}
    order: list[tuple[str, str, Allocation]] = []
    held = set(taken)
    for node in sorted(placement):
        node_labels = labels.get(node, {})
        todo: list[ResourceClaim] = []
        for claim in _unique(placement[node]):
            where, allocation = made.get(claim.key, ("", claim.allocation))
            if allocation is None:
                todo.append(claim)
            elif not allocation.reaches(node, node_labels):
                first = f" (allocated for node {where})" if where else ""
                return DeviceMisfit(claim.key, "", f"its devices{first} cannot be used from "
                                                   "this node", node)
        if not todo:
            continue
        devices = nodes.get(node, NodeDevices(node))
        answer = allocate(devices, todo, classes, frozenset(held), admin_access=admin_access,
                          budget=budget, consumed=consumed)
        if isinstance(answer, DeviceMisfit):
            return answer
        for key, allocation in answer.allocations:
            made[key] = (node, allocation)
            order.append((key, node, allocation))
        held |= answer.devices
    return GangDevices(tuple(order))


def _unique(claims: Sequence[ResourceClaim]) -> list[ResourceClaim]:
    out: dict[str, ResourceClaim] = {}
    for claim in claims:
        out.setdefault(claim.key, claim)
    return list(out.values())
