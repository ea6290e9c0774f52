"""Demand: what a role's member (or a whole gang) asks for in accounting units.

Quota, the placement pre-filters, GPU accounting, metrics and the views all ask one question
of a gang: how many GPUs does it take? Today the answer is the ``nvidia.com/gpu`` request of
each member, but that stops being true as soon as a GPU can also come from a Dynamic Resource
Allocation ResourceClaim (a device class, a MIG slice, a fraction): such a pod requests no
``nvidia.com/gpu`` at all, and a reader of the request would let it through quota for free.
So the readers ask this module instead: ``role_demand`` adds the GPUs a member's device
claims count for (``claims_gpus``: devices times their DeviceClass's
``gangscheduler.io/gpus-per-device``), and quota and the rest charge them like any other GPU.

Quota charges vectors, not GPU counts: a member's *charge* (``charge_of``) is its requests
with the GPU entry taken from its demand. The bounds quota admits a gang by, the exact charge
of a placement and what a running gang is charged per node (``node_charges``) are all made of
it, so the bound and the exact check never disagree. A node's free capacity stays a matter of
requests (``allocations``): what the kubelet counts.

This is the one module that reads the GPU resource key of a resource vector (``gpus_of``);
``tests/unit/test_demand_seam.py`` keeps the others off it. Without device claims a role's
demand is exactly its GPU request.

GPU-equivalents (``Demand.milli``, thousandths of a GPU): what a demand is worth when a device
is shared by consumable capacity. A share of a shareable device counts the largest fraction it
holds of any of the device's capacities (half of a GPU's memory: 500), known once the claim is
allocated; until then (and for a claim not made yet) it counts a whole device, so a figure is
never below what the share will turn out to be. Integers, not floats: a queue's sum of many
shares stays exact (each share rounded up to a thousandth: a sum never below its shares).
``gpus`` stays whole (each member's share rounded up to a device): what a gang is admitted by,
in whole GPUs like quotas and every recorded decision. A running gang's quota charge
(``node_charges``) lowers a node's GPUs to the shares held there rounded up to whole GPUs, so
quota and fair share count shares without ever charging less than is held.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from scheduler.model.constraints import DeviceClaimUse
from scheduler.model.device_counters import partition_fraction
from scheduler.model.device_inventory import DeviceInventory
from scheduler.model.devices import (
    AllocationMode,
    ClaimSpec,
    DeviceClass,
    DeviceResult,
    ResourceClaim,
    qualify,
)
from scheduler.model.resources import GPU, Resources, parse_quantity

#: Thousandths of a GPU in one GPU: the unit of GPU-equivalents (``Demand.milli``).
MILLI = 1000


@dataclass(frozen=True, slots=True)
class Demand:
    """What is asked for in accounting units: whole GPUs, and the device claims behind them.

    ``device_claims`` names the ResourceClaims (``namespace/name``, or a template's name) whose
    devices count towards ``gpus``; empty until claims are read, so today ``gpus`` is the GPU
    request. Kept with the figure so an explanation can say where a GPU came from.

    ``shares_milli``: the GPU-equivalents in thousandths when a share of a device makes them
    differ from ``gpus`` whole (``None``: they do not); read ``milli``, which says both.
    Build through ``demand_of`` so equal demands compare equal.
    """

    gpus: int = 0
    device_claims: tuple[str, ...] = ()
    shares_milli: int | None = None

    @property
    def milli(self) -> int:
        """GPU-equivalents in thousandths: a whole GPU 1000, half a GPU's memory 500."""
        return self.gpus * MILLI if self.shares_milli is None else self.shares_milli

    def __add__(self, other: Demand) -> Demand:
        if (not other.device_claims and not self.device_claims
                and self.shares_milli is None and other.shares_milli is None):
            return Demand(self.gpus + other.gpus)
        return demand_of(self.gpus + other.gpus, self.device_claims + other.device_claims,
                         self.milli + other.milli)

    def times(self, members: int) -> Demand:
        """The demand of *members* members alike: GPUs multiply, claims are named once.

        A role's claims come from one template per member (each member gets its own claim),
        so the names stay the template's; the count is what multiplies."""
        return demand_of(self.gpus * members, self.device_claims, self.milli * members)


def demand_of(gpus: int, device_claims: tuple[str, ...] = (), milli: int | None = None) -> Demand:
    """A demand of *gpus* whole GPUs worth *milli* thousandths (None: exactly *gpus*)."""
    shares = None if milli is None or milli == gpus * MILLI else milli
    return Demand(gpus, device_claims, shares)


def gpus_text(milli: int) -> str:
    """GPU-equivalents for people: ``"2"``, ``"2.5"``, ``"0.125"`` (no trailing zeros)."""
    whole, part = divmod(milli, MILLI)
    return str(whole) if not part else f"{whole}.{part:03d}".rstrip("0")


#: Asks for nothing: the start of a sum.
NO_DEMAND = Demand()


def total(demands: Iterable[Demand]) -> Demand:
    """The sum of many demands (``Demand.__add__`` folded, claims in order)."""
    gpus = milli = 0
    claims: tuple[str, ...] = ()
    for d in demands:
        gpus += d.gpus
        milli += d.milli
        if d.device_claims:
            claims += d.device_claims
    return demand_of(gpus, claims, milli)


def gpus_of(resources: Mapping[str, int]) -> int:
    """Whole GPUs in a resource vector: 0 if none.

    The one reader of the ``nvidia.com/gpu`` key. For the supply side (a node's allocatable
    or free GPUs, a quota's nominal), for the request part of ``role_demand``, and for
    charges (``charge_of``, ``node_charges``, a ledger's usage), whose GPU entry is the
    demand's. What a gang *asks* is ``role_demand`` / ``gang_demand``: a device claim is in
    no request vector.

    Called in the placement index's and the victim search's per-node loops (about 200,000
    times a busy cycle), so a ``Resources`` is read through its own dict: one Python frame
    per call, as the ``Resources.gpus`` property this replaced cost, not two."""
    if type(resources) is Resources:
        return resources._amounts.get(GPU, 0)
    return resources.get(GPU, 0)


def quantity_gpus(quantities: Mapping[str, object]) -> int:
    """Whole GPUs in a mapping of quantities as Kubernetes writes them (a Queue's status
    ``{"nvidia.com/gpu": "8"}``): 0 if absent; ``QuantityError`` if malformed."""
    value = quantities.get(GPU)
    return 0 if value is None else parse_quantity(str(value), GPU)


class _Member(Protocol):
    """What ``role_demand`` reads of a member: a role (``scheduler.model.gangs.Role``) or
    one pod (``scheduler.model.workloads.PodInfo``)."""

    @property
    def requests(self) -> Mapping[str, int]: ...


class _Charged(Protocol):
    """What ``charge_of`` reads of a role (``scheduler.model.gangs.Role``)."""

    @property
    def requests(self) -> Resources: ...

    @property
    def demand(self) -> Demand: ...


class _Role(_Charged, Protocol):
    @property
    def name(self) -> str: ...

    @property
    def charge(self) -> Resources: ...

    @property
    def required(self) -> int: ...


class _Gang(Protocol):
    """What ``gang_demand`` reads of a gang (``scheduler.model.gangs.Gang``)."""

    @property
    def roles(self) -> Sequence[_Role]: ...


def role_demand(role: _Member) -> Demand:
    """What one member of *role* (or one pod) asks for: its GPU request plus the GPUs its
    device claims count for (``Role.device_gpus``, worked out from the device inventory by
    ``claims_gpus`` where gangs are built). Readers ask ``Role.demand``, which is this."""
    requested = gpus_of(role.requests)
    device_gpus = getattr(role, "device_gpus", 0)
    device_milli = getattr(role, "device_milli", None)
    if device_milli is None:
        return Demand(requested + device_gpus)
    return demand_of(requested + device_gpus, milli=requested * MILLI + device_milli)


def claim_gpus(spec: ClaimSpec, classes: Mapping[str, DeviceClass]) -> int:
    """GPUs a claim of *spec* counts for: per request, its devices times its class's
    ``gpus_per_device`` (a class not known yet: 1); ``All`` counts one device (how many it
    gets is known only once allocated), an admin-access request none (it takes no device),
    ``firstAvailable`` its cheapest alternative."""
    total_gpus = 0
    for request in spec.requests:
        costs = []
        for ask in request.asks:
            if ask.admin_access:
                costs.append(0)
                continue
            cls = classes.get(ask.class_name)
            per_device = cls.gpus_per_device if cls is not None else 1
            count = ask.count if ask.mode is AllocationMode.EXACT_COUNT else 1
            costs.append(count * per_device)
        total_gpus += min(costs, default=0)
    return total_gpus


def claim_key(use: DeviceClaimUse, namespace: str, made: Sequence[tuple[str, str]]) -> str:
    """``namespace/name`` of the claim a ``spec.resourceClaims`` entry resolves to (named,
    or made for it: *made*, the pod's ``status.resourceClaimStatuses``), "" while unknown."""
    name = use.claim or dict(made).get(use.entry, "")
    return f"{namespace}/{name}" if name else ""


def claims_gpus(uses: Iterable[DeviceClaimUse], namespace: str,
                made: Sequence[tuple[str, str]], devices: DeviceInventory,
                users: Mapping[str, int] | None = None) -> int:
    """GPUs one member's ``spec.resourceClaims`` count for (``claims_demand``'s whole GPUs)."""
    return claims_demand(uses, namespace, made, devices, users)[0]


def claims_demand(uses: Iterable[DeviceClaimUse], namespace: str,
                  made: Sequence[tuple[str, str]], devices: DeviceInventory,
                  users: Mapping[str, int] | None = None) -> tuple[int, int]:
    """(GPUs, GPU-equivalents in thousandths) one member's ``spec.resourceClaims`` count for:
    each entry's claim (named, or made for it from a template: *made*, its
    ``status.resourceClaimStatuses``), or while that claim is not seen yet its template's spec.
    A claim the gang's members share (*users*: claim key -> how many of them use it; a
    PodGroup's claim, a named one) is split among them, each share rounded up: 8 devices
    shared by 8 members count 8 in all, not 64; 1 device shared by 4 counts 4 GPUs (too much
    rather than ever for free) and 1000 thousandths (250 each)."""
    total_gpus = total_milli = 0
    for use in uses:
        key = claim_key(use, namespace, made)
        claim = devices.claims.get(key) if key else None
        if claim is not None:
            gpus = claim_gpus(claim.spec, devices.classes)
            milli = claim_milli(claim, devices)
            sharing = max(1, (users or {}).get(key, 1))
            total_gpus += -(-gpus // sharing)
            total_milli += -(-milli // sharing)
        elif use.template:
            template = devices.templates.get(f"{namespace}/{use.template}")
            if template is not None:
                gpus = claim_gpus(template.spec, devices.classes)
                total_gpus += gpus
                total_milli += gpus * MILLI
    return total_gpus, total_milli


def claim_milli(claim: ResourceClaim, devices: DeviceInventory) -> int:
    """GPU-equivalents (thousandths) *claim* counts for: ``claim_gpus`` whole until it holds
    a share or a partition; then each allocated device its class's GPUs per device, a share
    of one only the largest fraction it holds of any of the device's capacities, and a
    partition (a MIG device: one that consumes counters) only the largest fraction it
    consumes of any counter of its GPU's counter set (``partition_fraction``), each rounded
    up to a thousandth. Never more than ``claim_gpus`` whole, so the figure only ever lowers
    a whole-GPU count."""
    whole = claim_gpus(claim.spec, devices.classes) * MILLI
    allocation = claim.allocation
    if allocation is None:
        return whole
    held = [(r, _held_fraction(r, devices)) for r in allocation.results if not r.admin_access]
    if all(fraction is None for _, fraction in held):
        return whole
    class_of = {ask.name: ask.class_name for request in claim.spec.requests
                for ask in request.asks}
    milli = 0
    for result, fraction in held:
        cls = devices.classes.get(class_of.get(result.request, ""))
        per_device = (cls.gpus_per_device if cls is not None else 1) * MILLI
        milli += per_device if fraction is None else math.ceil(per_device * fraction)
    return min(milli, whole)


def _held_fraction(result: DeviceResult, devices: DeviceInventory) -> Fraction | None:
    """The part of its device that *result* holds: a share's largest fraction of a capacity
    of the device, a partition's of a counter of its counter sets; None when it holds the
    device whole, or the device is not in a slice seen (then it counts whole)."""
    known = devices.published().get(result.device)
    if known is None:
        return None
    found, sets = known
    if result.share_id:
        driver = result.device.driver
        capacity = dict(found.capacity)
        return max((amount / capacity[qualify(cap, driver)] for cap, amount in result.consumed
                    if capacity.get(qualify(cap, driver))), default=None)
    return partition_fraction(found, sets)


def gang_demand(gang: _Gang) -> Demand:
    """What the gang's required members ask for together: what quota must admit it for.

    The sum over roles of one member's demand times the role's required members (the demand
    counterpart of ``Gang.min_requests``)."""
    return total(r.demand.times(r.required) for r in gang.roles)


def charge_of(role: _Charged) -> Resources:
    """What quota charges for one member of *role*: its requests, with the GPU entry taken
    from its demand (``Role.demand``), so a GPU that comes from a device claim is charged.
    Readers ask ``Role.charge``, which is this, worked out once per role.

    The very ``requests`` object when the two agree (today, always), so memos keyed on it
    by identity still hit."""
    requests = role.requests
    gpus = role.demand.gpus
    if gpus == gpus_of(requests):
        return requests
    return requests + {GPU: gpus - gpus_of(requests)}


def node_charges(allocations: tuple[tuple[str, Resources], ...], roles: Iterable[_Role],
                 members: Iterable[tuple[str, str, int]],
                 ) -> tuple[tuple[str, Resources], ...]:
    """Per node, sorted by node, what quota charges for members placed as *members* say
    ((role, node, pods)), whose requests there are *allocations* ((node, requests)).

    *allocations* with each member's GPU entry taken from its role's demand (``Role.charge``),
    then, where members hold shares of devices (``node_equivalents``), the node's GPUs
    lowered to its GPU-equivalents rounded up to whole GPUs (four halves on a node: 2, not
    4): never below what is held, and a GPU free in quota as soon as the shares on it are.
    The very *allocations* object while every role's charge is its requests and no share
    is held (*members* is then not read). A gang known by its totals only (no members) is
    charged its allocations."""
    roles = tuple(roles)
    members = tuple(members)
    extra: dict[str, int] | None = None  # role name -> GPUs one member is charged beyond
    for role in roles:
        requests = role.requests
        charge = role.charge
        if charge is not requests:
            if extra is None:
                extra = {}
            extra[role.name] = gpus_of(charge) - gpus_of(requests)
    if extra is None:
        return allocations
    more: dict[str, int] = {}
    for role_name, node, pods in members:
        gpus = extra.get(role_name, 0) * pods
        if gpus:
            more[node] = more.get(node, 0) + gpus
    held = node_equivalents(roles, members)
    if not more and not held:
        return allocations
    out = dict(allocations)
    for node, gpus in more.items():
        out[node] = out.get(node, Resources()) + {GPU: gpus}
    for node, milli in held.items():
        charged = out.get(node)
        if charged is None:
            continue
        rounded = -(-milli // MILLI)
        if rounded < gpus_of(charged):
            out[node] = charged + {GPU: rounded - gpus_of(charged)}
    return tuple(sorted(out.items()))


def node_equivalents(roles: Iterable[_Role], members: Iterable[tuple[str, str, int]],
                     ) -> dict[str, int]:
    """Per node, the GPU-equivalents (thousandths) members placed as *members* say ((role,
    node, pods)) hold there, when a share of a device makes some role's differ from its
    whole GPUs; empty when none does (each node then holds its charged GPUs whole) or when
    the gang is known by its totals only (no members)."""
    demands = {r.name: r.demand for r in roles}
    if all(d.shares_milli is None for d in demands.values()):
        return {}
    out: dict[str, int] = {}
    for role_name, node, pods in members:
        demand = demands.get(role_name)
        if demand is not None:
            out[node] = out.get(node, 0) + demand.milli * pods
    return out
