"""Namespaces and volumes as the cluster cache knows them, with this scheduler's pre-bind
decisions assumed until the watch shows them (as pods are assumed bound).

Why apart from ``ClusterCache``: the cache groups pods into gangs; these are plain facts
the snapshot carries for placement (namespace labels for ``namespaceSelector``; claims, PVs,
classes and attach limits for volume binding). A pre-bind decision written by the actuator
(a PV's claimRef, a claim's selected-node annotation) is assumed in the catalog the next
cycles see, so no other gang is given the same PV meanwhile; the assumption ends when the
watch reports the claim changed that way (``prebind.shown``, per kind), or after ``ttl``
seconds. A decision the binding stage is still carrying out (a flight, ``scheduler.run.inflight``)
is *held*: assumed from the cycle that handed it out, never lapsing, until the flight lands
(``land``: what it carried out lapses from then, what it did not is forgotten at once).
Without that, the cycles run while a gang's claims are being written would see its members
bound but its devices free, and give them to another gang.

The device objects of Dynamic Resource Allocation (ResourceSlices, DeviceClasses,
ResourceClaims, ResourceClaimTemplates) are facts of the same sort: the catalog carries them
as its ``devices`` inventory, rebuilt only after one of them changed. A claim's allocation
written by the actuator is assumed the same way until the claim's watch shows it allocated
and reserved for the gang's members.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduler.model import prebind
from scheduler.model.device_inventory import DeviceInventory
from scheduler.model.devices import ClaimTemplate, DeviceClass, DeviceSlice, ResourceClaim
from scheduler.model.prebind import PreBind
from scheduler.model.volumes import Claim, StorageClass, Volume, VolumeCatalog


@dataclass(frozen=True, slots=True)
class _Assumed:
    decision: PreBind
    at: float
    #: Being carried out by a bind in flight: it does not lapse until the flight lands.
    held: bool = False


class ClusterFacts:
    """Not thread-safe by itself: the cache calls it under its lock."""

    def __init__(self, ttl: float = 60.0) -> None:
        self.ttl = ttl
        self._namespaces: dict[str, dict[str, str]] = {}
        self._claims: dict[str, Claim] = {}
        self._volumes: dict[str, Volume] = {}
        self._classes: dict[str, StorageClass] = {}
        self._limits: dict[str, dict[str, int]] = {}
        self._assumed: dict[tuple[str, str], _Assumed] = {}  # PreBind.subject -> decision
        self._slices: dict[str, DeviceSlice] = {}
        self._device_classes: dict[str, DeviceClass] = {}
        self._resource_claims: dict[str, ResourceClaim] = {}
        self._claim_templates: dict[str, ClaimTemplate] = {}
        self._devices: DeviceInventory | None = None
        #: Bumped whenever a device object changes: what the cache compares to know that
        #: the GPUs its gangs' device claims count for may have changed.
        self.devices_generation = 0
        self._catalog: VolumeCatalog | None = None
        self._ns_view: dict[str, dict[str, str]] | None = None

    # Feeding: each returns whether anything changed ------------------------------------
    def set_namespace(self, name: str, labels: Mapping[str, str] | None) -> bool:
        old = self._namespaces.get(name)
        if labels is None:
            if old is None:
                return False
            del self._namespaces[name]
        elif old == dict(labels):
            return False
        else:
            self._namespaces[name] = dict(labels)
        self._ns_view = None
        return True

    def _put(self, table: dict[str, object], key: str, value: object | None) -> bool:
        if value is None:
            if table.pop(key, None) is None:
                return False
        elif table.get(key) == value:
            return False
        else:
            table[key] = value
        self._catalog = None
        return True

    def _watched(self, kind: str, key: str, claim: Claim | ResourceClaim | None) -> None:
        """The watch's word on a claim ends the decision assumed about it once the claim
        shows it (or is gone)."""
        subject = (kind, key)
        assumed = self._assumed.get(subject)
        if assumed is not None and (claim is None or prebind.shown(claim, assumed.decision)):
            del self._assumed[subject]
            self._catalog = None

    def set_claim(self, key: str, claim: Claim | None) -> bool:
        changed = self._put(self._claims, key, claim)  # type: ignore[arg-type]
        self._watched(prebind.PVC, key, claim)
        return changed

    def set_volume(self, name: str, volume: Volume | None) -> bool:
        return self._put(self._volumes, name, volume)  # type: ignore[arg-type]

    def set_class(self, name: str, cls: StorageClass | None) -> bool:
        return self._put(self._classes, name, cls)  # type: ignore[arg-type]

    def set_limits(self, node: str, limits: Mapping[str, int] | None) -> bool:
        return self._put(self._limits, node,  # type: ignore[arg-type]
                         dict(limits) if limits is not None else None)

    def _put_device(self, table: dict[str, object], key: str, value: object | None) -> bool:
        changed = self._put(table, key, value)
        if changed:
            self._devices = None
            self.devices_generation += 1
        return changed

    def set_slice(self, name: str, slice_: DeviceSlice | None) -> bool:
        return self._put_device(self._slices, name, slice_)  # type: ignore[arg-type]

    def set_device_class(self, name: str, cls: DeviceClass | None) -> bool:
        return self._put_device(self._device_classes, name, cls)  # type: ignore[arg-type]

    def set_resource_claim(self, key: str, claim: ResourceClaim | None) -> bool:
        changed = self._put_device(self._resource_claims, key, claim)  # type: ignore[arg-type]
        self._watched(prebind.RESOURCE_CLAIM, key, claim)
        return changed

    def set_claim_template(self, key: str, template: ClaimTemplate | None) -> bool:
        return self._put_device(self._claim_templates, key, template)  # type: ignore[arg-type]

    def assume(self, decisions: Iterable[PreBind], now: float, held: bool = False) -> bool:
        """Take *decisions* as carried out from *now* (*held*: being carried out by a bind in
        flight, kept until ``land``)."""
        changed = False
        for d in decisions:
            self._assumed[d.subject] = _Assumed(d, now, held)
            changed = True
        if changed:
            self._catalog = None
        return changed

    def land(self, flown: Iterable[PreBind], done: Iterable[PreBind], now: float) -> bool:
        """A flight carrying out *flown* landed, having carried out *done*: those lapse from
        *now* unless the watch shows them first; the rest (its gang failed and took its
        claims back) are forgotten, so the next cycle may hand them out again."""
        carried = set(done)
        changed = False
        for d in flown:
            assumed = self._assumed.get(d.subject)
            if assumed is None or assumed.decision != d:
                continue  # shown by the watch already, or decided anew since
            if d in carried:
                self._assumed[d.subject] = _Assumed(d, now)
            else:
                del self._assumed[d.subject]
                changed = True
        if changed:
            self._catalog = None
        return changed

    def expire(self, now: float) -> bool:
        stale = [k for k, a in self._assumed.items()
                 if not a.held and now - a.at > self.ttl]
        for k in stale:
            del self._assumed[k]
        if stale:
            self._catalog = None
        return bool(stale)

    def next_expiry(self) -> float | None:
        """When the first assumed decision lapses unless the watch shows it (``expire``
        drops it once strictly past), None: none assumed that can lapse."""
        return min((a.at + self.ttl for a in self._assumed.values() if not a.held),
                   default=None)

    # Reading ----------------------------------------------------------------------------
    def namespaces(self) -> Mapping[str, Mapping[str, str]]:
        if self._ns_view is None:
            self._ns_view = dict(sorted(self._namespaces.items()))
        return self._ns_view

    def devices(self) -> DeviceInventory:
        """The device inventory as the watches have it (decisions not assumed): what the
        gangs' device claims count for is read from it."""
        if self._devices is None:
            self._devices = DeviceInventory.of(
                self._slices.values(), self._device_classes.values(),
                self._resource_claims.values(), self._claim_templates.values())
        return self._devices

    def catalog(self) -> VolumeCatalog:
        """The catalog with assumed decisions applied (one object while nothing changed)."""
        if self._catalog is None:
            base = VolumeCatalog.of(self._claims.values(), self._volumes.values(),
                                    self._classes.values(), self._limits, self.devices())
            assumed = [a.decision for _, a in sorted(self._assumed.items())]
            self._catalog = prebind.assume(base, assumed) if assumed else base
        return self._catalog

