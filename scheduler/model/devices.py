"""Devices for Dynamic Resource Allocation (``resource.k8s.io/v1``), as frozen values.

What a DRA driver publishes (``DeviceSlice``: a ResourceSlice, one part of a pool of devices
at one generation), what an administrator offers (``DeviceClass``: selectors) and what a
workload asks for (``ResourceClaim`` / ``ClaimTemplate``: requests, constraints, and once
allocated the devices it got), reduced to what an allocator reads. Issue 35 allocates the
devices of a whole gang jointly, so the placement layer needs these as plain, hashable
values: the allocator memoises selector results per device, and a snapshot carries them.

Why a field list per value (``unsupported``): the v1 API has fields whose meaning we do not
implement yet (binding conditions, device taints and request tolerations,
``distinctAttribute``, list-typed attributes, per-device node selection). Dropping them
silently would hand out a device tainted off limits, or a wrong set; so the converter keeps
the path of each such field, and the allocator refuses what carries one with a reason that
names it (a claim: it waits; a device or a pool: not offered, and a failure says it was left
out). Consumable capacity is implemented (issue 36): a shareable device, its capacities'
request policies, a request's capacity amounts and an allocation's shares
(``scheduler.model.device_capacity``), and so are partitionable devices (issue 36, MIG): a
slice's counter sets and the counters each device consumes from them
(``scheduler.model.device_counters``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction

from scheduler.model.device_version import AttributeValue as AttributeValue
from scheduler.model.device_version import Version as Version
from scheduler.model.device_version import same_value as same_value
from scheduler.model.pods import NodeSelectorTerm

#: Most devices one claim's allocation may hold (``AllocationResultsMaxSize``).
MAX_DEVICES_PER_CLAIM = 32
#: The DeviceClass annotation saying how many GPUs one of its devices counts for.
GPUS_PER_DEVICE_ANNOTATION = "gangscheduler.io/gpus-per-device"
#: Most consumers a claim may be reserved for (``ResourceClaimReservedForMaxSize``).
MAX_RESERVED_FOR = 256

def qualify(name: str, driver: str) -> str:
    """``domain/id``: a name without a domain belongs to the driver's."""
    return name if "/" in name else f"{driver}/{name}"


class DeviceId(tuple[str, str, str]):
    """(driver, pool, device): a device's identity across slices and generations."""

    __slots__ = ()

    def __new__(cls, driver: str, pool: str, device: str) -> DeviceId:
        return super().__new__(cls, (driver, pool, device))

    @property
    def driver(self) -> str:
        return self[0]

    @property
    def pool(self) -> str:
        return self[1]

    @property
    def device(self) -> str:
        return self[2]

    def __str__(self) -> str:
        return "/".join(self)


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """A capacity's ``requestPolicy``: what a request consumes when it names no amount
    (``default``), and the amounts it may consume (``valid_values``, or a range from
    ``minimum`` up to ``maximum`` in steps of ``step``); ``None``: unbounded."""

    default: Fraction | None = None
    valid_values: tuple[Fraction, ...] = ()
    minimum: Fraction | None = None
    maximum: Fraction | None = None
    step: Fraction | None = None


#: Counter name -> amount, sorted by name (exact).
Counters = tuple[tuple[str, Fraction], ...]


@dataclass(frozen=True, slots=True)
class CounterSet:
    """One of a slice's ``sharedCounters``: what the devices consuming from it share (a
    physical GPU's memory and compute slices, which its MIG devices take parts of)."""

    name: str
    counters: Counters = ()


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a slice: its attributes and capacities by fully qualified name."""

    name: str
    attributes: tuple[tuple[str, AttributeValue], ...] = ()  # sorted by name
    capacity: tuple[tuple[str, Fraction], ...] = ()  # sorted by name, exact
    #: Field paths we do not implement (``taints``, ``bindsToNode``...): not offered.
    unsupported: tuple[str, ...] = ()
    #: ``allowMultipleAllocations``: many claims may each hold a share of its capacity
    #: (consumable capacity, ``scheduler.model.device_capacity``).
    shareable: bool = False
    #: Capacity name -> its ``requestPolicy`` (sorted by name; only a shareable device's).
    policies: tuple[tuple[str, CapacityPolicy], ...] = ()
    #: ``consumesCounters``: counter set name -> the counters allocating it takes from that
    #: set of its pool (sorted by set name).
    consumes: tuple[tuple[str, Counters], ...] = ()

    def attribute(self, name: str) -> AttributeValue | None:
        for key, value in self.attributes:
            if key == name:
                return value
        return None


@dataclass(frozen=True, slots=True)
class PoolRef:
    """A slice's ``spec.pool``: only the newest generation of a pool counts, and only once
    all of its ``slice_count`` slices are seen."""

    name: str
    generation: int = 0
    slice_count: int = 1


@dataclass(frozen=True, slots=True)
class DeviceSlice:
    """A ResourceSlice: some devices of one pool and which nodes reach them.

    Exactly one of ``node_name`` (node-local), ``node_selector`` (network-attached: one term)
    and ``all_nodes`` says where."""

    name: str
    driver: str
    pool: PoolRef
    devices: tuple[Device, ...] = ()
    node_name: str = ""
    node_selector: NodeSelectorTerm | None = None
    all_nodes: bool = False
    #: Field paths we do not implement (``perDeviceNodeSelection``): the pool is not offered.
    unsupported: tuple[str, ...] = ()
    #: ``sharedCounters`` (a slice has these or devices, never both).
    counter_sets: tuple[CounterSet, ...] = ()

    def reaches(self, node: str, labels: Mapping[str, str]) -> bool:
        if self.node_name:
            return self.node_name == node
        if self.all_nodes:
            return True
        return self.node_selector is not None and self.node_selector.matches(labels, node)


class ConfigSource(StrEnum):
    """Where an allocation's config entry came from (``DeviceAllocationConfiguration``)."""

    FROM_CLASS = "FromClass"
    FROM_CLAIM = "FromClaim"


@dataclass(frozen=True, slots=True)
class DeviceConfig:
    """One opaque config entry of a class or a claim, for a driver.

    The allocator never reads it, but the allocation must carry it: a driver prepares a
    device from ``status.allocation.devices.config`` only, so an allocation written without
    the class's and the claim's config hands the driver a device configured by default.
    ``parameters`` is the entry's JSON as the apiserver gave it, in compact text (hashable;
    key order kept: the driver gets what kube-scheduler would have copied)."""

    driver: str
    parameters: str
    #: The requests it applies to (a claim's entry; empty: all of them).
    requests: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AllocatedConfig:
    """A config entry of an allocation: the class's or the claim's, and its requests."""

    source: ConfigSource
    config: DeviceConfig


@dataclass(frozen=True, slots=True)
class DeviceClass:
    """A DeviceClass: the CEL selectors every request naming it adds, and the config its
    allocations carry for the driver."""

    name: str
    selectors: tuple[str, ...] = ()
    unsupported: tuple[str, ...] = ()
    #: GPUs one device of the class counts for in quota, fair share and accounting (its
    #: ``gangscheduler.io/gpus-per-device`` annotation; 1 unless it says otherwise, so a
    #: device is never free by default: a NIC class says 0).
    gpus_per_device: int = 1
    config: tuple[DeviceConfig, ...] = ()


class AllocationMode(StrEnum):
    EXACT_COUNT = "ExactCount"
    ALL = "All"


@dataclass(frozen=True, slots=True)
class Ask:
    """What one request (``exactly``) or one ``firstAvailable`` sub-request asks for.

    ``name`` is the request's name, or ``request/sub`` for a sub-request (the name results
    and constraints use)."""

    name: str
    class_name: str
    selectors: tuple[str, ...] = ()
    mode: AllocationMode = AllocationMode.EXACT_COUNT
    count: int = 1
    admin_access: bool = False
    unsupported: tuple[str, ...] = ()
    #: ``capacity.requests``: capacity name (as written: a name without a domain is the
    #: device's driver's) -> amount, sorted by name.
    capacity: tuple[tuple[str, Fraction], ...] = ()


@dataclass(frozen=True, slots=True)
class Request:
    """A claim's request: one ``Ask`` (``exactly``) or alternatives tried in order
    (``firstAvailable``: the first that can be satisfied is taken)."""

    name: str
    asks: tuple[Ask, ...]
    first_available: bool = False


@dataclass(frozen=True, slots=True)
class Constraint:
    """``matchAttribute``: the devices of the listed requests (all, if none are listed)
    share one value of the attribute, and each has it."""

    attribute: str  # fully qualified
    requests: tuple[str, ...] = ()

    def covers(self, ask_name: str) -> bool:
        """Does the constraint apply to a device of *ask_name* (``req`` or ``req/sub``)?"""
        if not self.requests:
            return True
        return ask_name in self.requests or ask_name.split("/", 1)[0] in self.requests


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    """A claim's ``spec.devices``: requests and constraints for the allocator, config for the
    allocation it gets (``DeviceConfig``)."""

    requests: tuple[Request, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    unsupported: tuple[str, ...] = ()
    config: tuple[DeviceConfig, ...] = ()

    def all_unsupported(self) -> tuple[str, ...]:
        """Every unsupported field of the spec, its requests and sub-requests."""
        out = list(self.unsupported)
        for request in self.requests:
            for ask in request.asks:
                out.extend(ask.unsupported)
        return tuple(out)


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """One allocated device and the request (``req`` or ``req/sub``) it is for."""

    request: str
    device: DeviceId
    admin_access: bool = False
    #: A share of a shareable device: its ``shareID`` and the ``consumedCapacity`` it holds
    #: (sorted by name); "" for a device held whole.
    share_id: str = ""
    consumed: tuple[tuple[str, Fraction], ...] = ()


@dataclass(frozen=True, slots=True)
class Allocation:
    """A claim's ``status.allocation``: its devices and where they can be used (the node
    selector kube-scheduler writes; ``None``: everywhere)."""

    results: tuple[DeviceResult, ...] = ()
    node_selector: NodeSelectorTerm | None = None

    @property
    def devices(self) -> frozenset[DeviceId]:
        return frozenset(r.device for r in self.results)

    def reaches(self, node: str, labels: Mapping[str, str]) -> bool:
        return self.node_selector is None or self.node_selector.matches(labels, node)


@dataclass(frozen=True, slots=True)
class Consumer:
    """A ``status.reservedFor`` entry: who uses the claim (usually a pod)."""

    resource: str
    name: str
    uid: str = ""
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    spec: ClaimSpec
    uid: str = ""
    allocation: Allocation | None = None
    reserved_for: tuple[Consumer, ...] = ()
    terminating: bool = False
    #: Not compared: an update that changed nothing the scheduler reads is no change.
    resource_version: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ClaimTemplate:
    """A ResourceClaimTemplate: each pod gets its own claim with this spec."""

    namespace: str
    name: str
    spec: ClaimSpec

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def allocated_devices(claims: Iterable[ResourceClaim]) -> frozenset[DeviceId]:
    """The devices the allocations of *claims* hold whole, admin access aside (an
    admin-access result never takes a device from anyone) and shares aside (a share takes
    capacity, not the device: ``consumed_capacity``)."""
    return frozenset(r.device for c in claims if c.allocation is not None
                     for r in c.allocation.results if not r.admin_access and not r.share_id)


def consumed_capacity(claims: Iterable[ResourceClaim]) -> dict[DeviceId, dict[str, Fraction]]:
    """Per shareable device, the capacity the shares allocated to *claims* consume together."""
    out: dict[DeviceId, dict[str, Fraction]] = {}
    for c in claims:
        if c.allocation is None:
            continue
        for r in c.allocation.results:
            if not r.share_id:
                continue
            used = out.setdefault(r.device, {})
            for name, amount in r.consumed:
                used[name] = used.get(name, Fraction(0)) + amount
    return out
