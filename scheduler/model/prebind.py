"""Pre-bind decisions: what placement decides about a gang's claims that must be written to
the apiserver before any member binds (kube-scheduler's PreBind: VolumeBinding's and
DynamicResources' writes), one value whatever the kind.

A ``PreBind`` names the claim, its ``kind`` and a target; it travels unchanged from the
placement through the plan (``Bind``'s placement, ``Provision``), the actuator's writer, the
``ApplyResult`` and the cache's assumption. What depends on the kind is kept here, one row
per kind in ``RULES``, for the edges that consult it:

- ``assume``: the catalog as it will be once the decision is carried out (the next gang of
  the cycle, and the next cycles until the watch shows it, see it so);
- ``shown``: whether a watched claim already reflects the decision (``feed.facts`` then
  drops its assumption);
- ``describe``: the words ``explain`` and pending reasons use.

The writes themselves are the apiserver edge's: ``scheduler.kube.write.prebind`` keeps the
same kind of table. A new kind is a new ``PreBindKind`` member, its row here, its row there
and the placement rule that decides it (returned in ``Placement.prebinds``); the plan, the
draft, the actuator, the in-flight result, the loop and the cache's assumption carry it as
they are. A kind about claims the catalog does not contain yet (ResourceClaims) also brings
them into the catalog (``Tables``) and the facts' feed (whose watch calls ``shown``).
``DEVICES`` is a ResourceClaim's allocation (Dynamic Resource Allocation, issue 35): the
claim's ``status.allocation`` and its ``reservedFor`` entries for the members that use it,
written as kube-scheduler's DynamicResources plugin writes them in its PreBind; a decision
about a claim allocated already (a shared claim, or one allocated for this gang before its
bind failed to answer) carries no allocation and only adds its users to ``reservedFor``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from scheduler.model.device_inventory import DeviceInventory
from scheduler.model.devices import AllocatedConfig, Allocation, Consumer, ResourceClaim
from scheduler.model.volumes import Claim, ClaimRef, Volume, VolumeCatalog, VolumePhase

#: The API kinds of the claims pre-bind decisions are about (``PreBind.subject``).
PVC = "PersistentVolumeClaim"
RESOURCE_CLAIM = "ResourceClaim"


class PreBindKind(StrEnum):
    #: A static PV's ``spec.claimRef`` set to the claim (the PV controller completes it);
    #: target: the PV's name.
    CLAIM_REF = "ClaimRef"
    #: The claim's ``volume.kubernetes.io/selected-node`` annotation set (its provisioner
    #: creates a PV reachable from that node); target: the node's name.
    SELECTED_NODE = "SelectedNode"
    #: A ResourceClaim's ``status.allocation`` and ``reservedFor`` (DRA, issue 35); target:
    #: the node the devices were chosen on, ``devices`` their names (driver/pool/device),
    #: ``allocation`` what is written, ``consumers`` the pods it is reserved for.
    DEVICES = "Devices"


@dataclass(frozen=True, slots=True, order=True)
class PreBind:
    """One write placement decided for a claim of a gang, to make before any member binds."""

    claim: str  # namespace/name
    kind: PreBindKind
    target: str
    #: What a ``DEVICES`` decision allocates (driver/pool/device); empty for the other kinds
    #: and for a claim allocated already (then only ``consumers`` are added).
    devices: tuple[str, ...] = ()
    #: The allocation a ``DEVICES`` decision writes (None: the claim is allocated already).
    #: Not compared: ``devices`` names the same devices.
    allocation: Allocation | None = field(default=None, compare=False)
    #: The pods a ``DEVICES`` decision reserves the claim for (``status.reservedFor``).
    consumers: tuple[Consumer, ...] = field(default=(), compare=False)
    #: The config the allocation carries for its drivers (``allocation.devices.config``:
    #: ``scheduler.model.device_config.allocation_config``), decided with it from the
    #: classes it was allocated with. Empty without an allocation.
    config: tuple[AllocatedConfig, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if self.kind is not PreBindKind.DEVICES and (
                self.devices or self.allocation is not None or self.consumers
                or self.config):
            raise ValueError(f"{self.kind} decision for {self.claim} carries devices")
        if self.config and self.allocation is None:
            raise ValueError(f"decision for {self.claim}: config without an allocation")
        if self.allocation is not None and self.devices != device_names(self.allocation):
            raise ValueError(f"decision for {self.claim}: devices {self.devices} are not "
                             "its allocation's")

    @property
    def subject(self) -> tuple[str, str]:
        """(API kind, namespace/name) of the object whose watch shows it: a PVC and a
        ResourceClaim of the same name are two subjects."""
        return RULES[self.kind].watched, self.claim

    def describe(self) -> str:
        """``data -> PV pv-3`` (what ``explain`` and pending reasons use)."""
        return RULES[self.kind].describe(self)


def device_names(allocation: Allocation) -> tuple[str, ...]:
    """``driver/pool/device`` of each result, in order (what ``PreBind.devices`` holds)."""
    return tuple(str(r.device) for r in allocation.results)


@dataclass(slots=True)
class Tables:
    """The catalog's tables while decisions are assumed in it (copies, changed in place)."""

    claims: dict[str, Claim]
    volumes: dict[str, Volume]
    #: The device inventory's ResourceClaims (``DEVICES`` decisions change them).
    device_claims: dict[str, ResourceClaim] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class KindRules:
    """What one kind of pre-bind decision means to the model (see the module docstring)."""

    #: Change *tables* as the decision will once carried out (a claim they do not contain:
    #: nothing to change).
    assume: Callable[[Tables, PreBind], None]
    #: Given the watched claim: a PVC (``Claim``) or a ``ResourceClaim`` by ``watched``.
    shown: Callable[[Any, PreBind], bool]
    describe: Callable[[PreBind], str]
    #: The API kind of the claim it is about (whose watch ``shown`` reads).
    watched: str = PVC


def _short(d: PreBind) -> str:
    return d.claim.split("/", 1)[-1]


def _assume_claim_ref(tables: Tables, d: PreBind) -> None:
    claim = tables.claims.get(d.claim)
    if claim is None:
        return
    tables.claims[d.claim] = replace(claim, volume_name=d.target, bind_completed=True)
    pv = tables.volumes.get(d.target)
    if pv is not None:
        tables.volumes[d.target] = replace(
            pv, claim_ref=ClaimRef(claim.namespace, claim.name, claim.uid),
            phase=VolumePhase.BOUND)


def _assume_selected_node(tables: Tables, d: PreBind) -> None:
    claim = tables.claims.get(d.claim)
    if claim is not None:
        tables.claims[d.claim] = replace(claim, selected_node=d.target)


def _assume_devices(tables: Tables, d: PreBind) -> None:
    claim = tables.device_claims.get(d.claim)
    if claim is None:
        return
    allocation = d.allocation if d.allocation is not None else claim.allocation
    users = claim.reserved_for + tuple(c for c in d.consumers if c not in claim.reserved_for)
    tables.device_claims[d.claim] = replace(claim, allocation=allocation, reserved_for=users)


def _devices_shown(claim: ResourceClaim, d: PreBind) -> bool:
    """Allocated (by this decision or otherwise since) and reserved for every member."""
    if claim.allocation is None:
        return False
    uids = {c.uid for c in claim.reserved_for}
    return all(c.uid in uids for c in d.consumers)


def _describe_devices(d: PreBind) -> str:
    if not d.devices:
        return f"{_short(d)} (allocated already) reserved on node {d.target}"
    return f"{_short(d)} allocated {', '.join(d.devices)} on node {d.target}"


RULES: Mapping[PreBindKind, KindRules] = {
    PreBindKind.CLAIM_REF: KindRules(
        assume=_assume_claim_ref,
        shown=lambda claim, d: bool(claim.volume_name),
        describe=lambda d: f"{_short(d)} -> PV {d.target}"),
    PreBindKind.SELECTED_NODE: KindRules(
        assume=_assume_selected_node,
        # Provisioned (or bound otherwise) since: moved past the decision.
        shown=lambda claim, d: claim.selected_node == d.target or bool(claim.volume_name),
        describe=lambda d: f"{_short(d)} provisioned for node {d.target}"),
    PreBindKind.DEVICES: KindRules(
        assume=_assume_devices,
        shown=_devices_shown,
        describe=_describe_devices,
        watched=RESOURCE_CLAIM),
}


def assume(catalog: VolumeCatalog, decisions: Iterable[PreBind]) -> VolumeCatalog:
    """The catalog as it will be once *decisions* are carried out (a decision about a claim
    the catalog does not contain changes nothing)."""
    decisions = tuple(decisions)
    inventory = catalog.devices
    devices = any(d.kind is PreBindKind.DEVICES for d in decisions)
    tables = Tables(dict(catalog.claims), dict(catalog.volumes),
                    dict(inventory.claims) if devices else {})
    for d in decisions:
        RULES[d.kind].assume(tables, d)
    if devices:
        inventory = DeviceInventory(inventory.slices, inventory.classes, tables.device_claims,
                                    inventory.templates)
    return VolumeCatalog(tables.claims, tables.volumes, catalog.classes, catalog.attach_limits,
                         inventory)


def shown(claim: Claim | ResourceClaim, decision: PreBind) -> bool:
    """Does the watched *claim* already reflect *decision* (or has it moved past it)?"""
    return RULES[decision.kind].shown(claim, decision)


def describe(decisions: Iterable[PreBind]) -> str:
    """``data -> PV pv-3, ckpt provisioned for node n-4``."""
    return ", ".join(d.describe() for d in decisions)
