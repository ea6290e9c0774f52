"""The devices a cycle sees: every ResourceSlice, DeviceClass, ResourceClaim and
ResourceClaimTemplate the scheduler knows (Dynamic Resource Allocation, issue 35).

Why one value beside the volume catalog: a snapshot carries the cluster's facts as frozen
values, and the device allocator reads all four kinds together (a claim's requests name
classes, the slices offer devices, the allocated claims hold some of them). Tables are keyed
the way the objects are named: slices and classes by name, claims and templates by
``namespace/name``; ``slices_by_node`` is the node-local part of the inventory, what a node's
pools are gathered from together with the slices that reach many nodes
(``network_slices``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from scheduler.kit.memo import Slot, Slots
from scheduler.model.devices import (
    ClaimTemplate,
    DeviceClass,
    DeviceId,
    DeviceSlice,
    ResourceClaim,
    allocated_devices,
)

#: The node-local slices by node (``DeviceInventory.slices_by_node``).
BY_NODE: Slot[tuple[()], dict[str, tuple[DeviceSlice, ...]]] = Slot("device_inventory.by_node")
#: The slices that are not node-local (``DeviceInventory.network_slices``).
NETWORK: Slot[tuple[()], tuple[DeviceSlice, ...]] = Slot("device_inventory.network")
#: Pod uid -> the claims reserved for it (``DeviceInventory.consumers``).
CONSUMERS: Slot[tuple[()], dict[str, tuple[str, ...]]] = Slot("device_inventory.consumers")
#: The devices allocated to claims (``DeviceInventory.taken``).
TAKEN: Slot[tuple[()], frozenset[DeviceId]] = Slot("device_inventory.taken")


@dataclass(frozen=True, slots=True)
class DeviceInventory:
    """Every device object the scheduler knows, by name (``of`` sorts them)."""

    slices: Mapping[str, DeviceSlice] = field(default_factory=dict)
    classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    claims: Mapping[str, ResourceClaim] = field(default_factory=dict)  # namespace/name
    templates: Mapping[str, ClaimTemplate] = field(default_factory=dict)  # namespace/name
    #: What placement derives from these tables (each node's pools, the devices taken): an
    #: inventory never changes, so its answers hold as long as it lives, and a changed
    #: inventory (a new one) starts empty.
    slots: Slots = field(default_factory=Slots, compare=False, repr=False)

    @classmethod
    def of(cls, slices: Iterable[DeviceSlice] = (), classes: Iterable[DeviceClass] = (),
           claims: Iterable[ResourceClaim] = (),
           templates: Iterable[ClaimTemplate] = ()) -> DeviceInventory:
        return cls({s.name: s for s in sorted(slices, key=lambda s: s.name)},
                   {c.name: c for c in sorted(classes, key=lambda c: c.name)},
                   {c.key: c for c in sorted(claims, key=lambda c: c.key)},
                   {t.key: t for t in sorted(templates, key=lambda t: t.key)})

    @property
    def empty(self) -> bool:
        return not (self.slices or self.classes or self.claims or self.templates)

    def slices_by_node(self) -> Mapping[str, tuple[DeviceSlice, ...]]:
        """The node-local slices (``spec.nodeName``) by node, in name order."""
        def make() -> dict[str, tuple[DeviceSlice, ...]]:
            out: dict[str, list[DeviceSlice]] = defaultdict(list)
            for s in self.slices.values():
                if s.node_name:
                    out[s.node_name].append(s)
            return {node: tuple(found) for node, found in sorted(out.items())}
        return self.slots.get_or_make(BY_NODE, (), make)

    def network_slices(self) -> tuple[DeviceSlice, ...]:
        """The slices that are not node-local (a node selector, or every node)."""
        return self.slots.get_or_make(NETWORK, (), lambda: tuple(
            s for s in self.slices.values() if not s.node_name))

    def taken(self) -> frozenset[DeviceId]:
        """Every device some claim's allocation holds (admin access aside)."""
        return self.slots.get_or_make(TAKEN, (), lambda: allocated_devices(
            self.claims.values()))

    def consumers(self) -> Mapping[str, tuple[str, ...]]:
        """Pod uid -> the keys of the claims reserved for it."""
        def make() -> dict[str, tuple[str, ...]]:
            out: dict[str, list[str]] = defaultdict(list)
            for claim in self.claims.values():
                for c in claim.reserved_for:
                    if c.uid:
                        out[c.uid].append(claim.key)
            return {uid: tuple(keys) for uid, keys in out.items()}
        return self.slots.get_or_make(CONSUMERS, (), make)

    def released(self, uids: Iterable[str]) -> DeviceInventory:
        """The inventory once the pods of *uids* are gone: they leave the claims reserved for
        them, and a claim no pod uses any more holds no devices (the resourceclaim
        controller deletes a pod's own claims and frees the others). Itself if none is."""
        by_uid = self.consumers()
        gone = {u for u in uids if u in by_uid}
        if not gone:
            return self
        claims = dict(self.claims)
        for uid in gone:
            for key in by_uid[uid]:
                claim = claims[key]
                left = tuple(c for c in claim.reserved_for if c.uid not in gone)
                claims[key] = replace(claim, reserved_for=left,
                                      allocation=claim.allocation if left else None)
        return DeviceInventory(self.slices, self.classes, claims, self.templates)

    def pools(self) -> dict[tuple[str, str], tuple[DeviceSlice, ...]]:
        """The slices of each (driver, pool), every generation, in name order."""
        out: dict[tuple[str, str], list[DeviceSlice]] = defaultdict(list)
        for s in self.slices.values():
            out[(s.driver, s.pool.name)].append(s)
        return {key: tuple(found) for key, found in sorted(out.items())}


EMPTY_INVENTORY = DeviceInventory()
