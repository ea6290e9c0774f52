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
from fractions import Fraction

from scheduler.kit.memo import Slot, Slots
from scheduler.model.device_capacity import most_shares
from scheduler.model.device_counters import capacities
from scheduler.model.devices import (
    ClaimTemplate,
    Device,
    DeviceClass,
    DeviceId,
    DeviceSlice,
    ResourceClaim,
    allocated_devices,
    consumed_capacity,
)

#: The node-local slices by node (``DeviceInventory.slices_by_node``).
BY_NODE: Slot[tuple[()], dict[str, tuple[DeviceSlice, ...]]] = Slot("device_inventory.by_node")
#: The slices that are not node-local (``DeviceInventory.network_slices``).
NETWORK: Slot[tuple[()], tuple[DeviceSlice, ...]] = Slot("device_inventory.network")
#: Pod uid -> the claims reserved for it (``DeviceInventory.consumers``).
CONSUMERS: Slot[tuple[()], dict[str, tuple[str, ...]]] = Slot("device_inventory.consumers")
#: The devices allocated to claims (``DeviceInventory.taken``).
TAKEN: Slot[tuple[()], frozenset[DeviceId]] = Slot("device_inventory.taken")
#: Shareable device -> the capacity its shares take (``DeviceInventory.consumed``).
CONSUMED: Slot[tuple[()], dict[DeviceId, dict[str, Fraction]]] = Slot("device_inventory.consumed")
#: Device -> it and its pool's counter sets (``DeviceInventory.published``).
PUBLISHED: Slot[tuple[()], dict[DeviceId, tuple[Device, dict[str, dict[str, Fraction]]]]] = Slot(
    "device_inventory.published")
#: Node -> its node-local devices no claim holds (``DeviceInventory.free_by_node``).
FREE: Slot[tuple[()], dict[str, int]] = Slot("device_inventory.free")


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

    def consumed(self) -> Mapping[DeviceId, Mapping[str, Fraction]]:
        """Per shareable device, the capacity the claims' shares of it take together."""
        return self.slots.get_or_make(CONSUMED, (), lambda: consumed_capacity(
            self.claims.values()))

    def published(self) -> Mapping[DeviceId, tuple[Device, Mapping[str, Mapping[str, Fraction]]]]:
        """Every published device by id, with the counter sets of its pool (by set name):
        what accounting reads of an allocated device (``demand.claim_milli``)."""
        def make() -> dict[DeviceId, tuple[Device, dict[str, dict[str, Fraction]]]]:
            sets: dict[tuple[str, str], dict[str, dict[str, Fraction]]] = defaultdict(dict)
            for s in self.slices.values():
                sets[(s.driver, s.pool.name)].update(capacities(s.counter_sets))
            return {DeviceId(s.driver, s.pool.name, d.name): (d, sets[(s.driver, s.pool.name)])
                    for s in self.slices.values() for d in s.devices}
        return self.slots.get_or_make(PUBLISHED, (), make)

    def free_by_node(self) -> Mapping[str, int]:
        """Node -> at most how many GPUs the devices of its node-local slices (the newest
        generation of each pool) that no claim holds can still count for
        (``Snapshot.free_gpus``: what best fit orders nodes by for pods whose GPUs are
        devices, and what quick "could it fit" counts compare with demand). Which class
        selects a device is known only per request, so each free device counts the most GPUs
        any class gives one device: never less than the truth, so a count that says "too
        few" is right. A shareable device counts the shares it may still serve
        (``device_capacity.most_shares``), since each claim counts at least one GPU."""
        def make() -> dict[str, int]:
            taken, consumed = self.taken(), self.consumed()
            per_device = max((c.gpus_per_device for c in self.classes.values()), default=1)
            out: dict[str, int] = {}
            for node, slices in self.slices_by_node().items():
                newest: dict[tuple[str, str], int] = {}
                for s in slices:
                    key = (s.driver, s.pool.name)
                    newest[key] = max(newest.get(key, s.pool.generation), s.pool.generation)
                out[node] = per_device * sum(
                    most_shares(d, consumed.get(DeviceId(s.driver, s.pool.name, d.name), {}))
                    if d.shareable else 1
                    for s in slices if s.pool.generation == newest[(s.driver, s.pool.name)]
                    for d in s.devices
                    if DeviceId(s.driver, s.pool.name, d.name) not in taken)
            return out
        return self.slots.get_or_make(FREE, (), make)

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
