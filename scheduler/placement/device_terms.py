"""Devices in placement: a gang's ResourceClaims as one more rule of the search, so its
members are placed only where every one of them gets its devices, all or nothing (issue 35).

kube-scheduler allocates one pod's claims when it places that pod; a gang placed that way
can end with some members holding devices and the rest finding none. Here the devices are
part of the gang's placement, in the three faces every rule has (``rules``):

* ``tracker``: while the constructive pass puts members one at a time, a node admits one
  more member of a role when the claims of all the members put there so far, and the new
  one's, can be allocated together on it (``devices.allocate``, the structured allocator),
  no device counted twice across nodes. Members of a role are alike: a role's claims are
  made from one template per entry, so its first member's claims stand for every member's;
* ``encode``: CP-SAT may put no more members of a role on a node than its devices take
  alone (a bound; ``violation`` is the exact check);
* ``violation`` / ``decide``: the finished placement's members, each with its own claims,
  get devices node by node (``device_gang.allocate_gang``); the allocations become
  ``PreBind`` decisions (``DEVICES``) written before any member binds.

A claim named by several members (``resourceClaimName``, or a claim of their
``scheduling.k8s.io`` PodGroup: shared) is allocated once, on the first node that needs it,
and then reaches only the nodes its devices reach; a claim allocated before
(``status.allocation``) is only reserved for the new members. A PodGroup's claim is reserved
for the PodGroup, not for its pods, as kube-scheduler does.

Nodes no ResourceSlice reaches are ruled out before the search, and a role whose usable
nodes offer devices for fewer members than it needs is told so by name
(``diagnose.rule_shortfall``), not left to the search: ``DEVICE_CLAIMS`` (until a driver
publishes devices there) and ``DEVICES`` (until devices are freed: a reason to reserve nodes
and to look for victims, whose claims a proof releases, ``Snapshot.without``). Nodes whose
devices are all taken are left to the search, which asks only the nodes it would use (asking
every node of a large cluster first cost more than the whole placement).
A victim search counts devices as the GPUs they are charged as (a victim's charge, the
gang's demand) and proves its choice by placing the gang with the victims gone and their
claims released, as the resourceclaim controller releases them.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass, field, replace

from scheduler.kit.memo import Slot
from scheduler.model import Gang
from scheduler.model.device_config import allocation_config
from scheduler.model.device_inventory import DeviceInventory
from scheduler.model.devices import Allocation, Consumer, DeviceId, ResourceClaim
from scheduler.model.prebind import PreBind, PreBindKind, device_names
from scheduler.placement.device_claims import Member, MemberClaims, resolve_claims
from scheduler.placement.device_gang import GangDevices, allocate_gang
from scheduler.placement.device_outcome import DeviceMisfit, NodeAllocation
from scheduler.placement.device_pools import NodeDevices, node_devices
from scheduler.placement.devices import Held, allocate
from scheduler.placement.rules import Blocks, Encoding
from scheduler.placement.types import Assignment, spread_members
from scheduler.world.snapshot import Snapshot

#: node (and its labels, with network-attached slices) -> the pools that reach it, kept in
#: the device inventory's slots (an inventory never changes).
NODE_DEVICES: Slot[object, NodeDevices] = Slot("device_terms.node_devices", bound=100_000)
#: Nodes some ResourceSlice may reach (node-local slices' nodes; every node when a slice
#: reaches nodes by selector or all of them).
REACHED: Slot[tuple[()], frozenset[str] | None] = Slot("device_terms.reached")

#: (class, selectors, device) -> selected, for every search over this inventory's devices.
SELECTIONS: Slot[tuple[str, tuple[str, ...], DeviceId], bool] = Slot(
    "device_terms.selections", bound=1_000_000)
#: Steps one node's search may take while the placement asks whether a member fits there:
#: a search that long answers "no" (the gang is placed elsewhere, or waits with a reason),
#: where the final allocation (``allocate_gang``) has the full budget.
FIT_BUDGET = 20_000

NO_SLICE = "devices: no ResourceSlice offers devices on the node"


@dataclass(frozen=True, slots=True)
class _World:
    """What a device search reads of the snapshot, with the per-inventory memos."""

    snapshot: Snapshot

    @property
    def inventory(self) -> DeviceInventory:
        return self.snapshot.volumes.devices

    def devices(self, node: str) -> NodeDevices:
        """The pools that reach *node* (kept per node, and per its labels when some slice
        reaches nodes by selector: a node's labels may change while the inventory lives)."""
        inventory = self.snapshot.volumes.devices
        slots = inventory.slots
        network = inventory.network_slices()
        key: object = (node, tuple(sorted(self.labels(node).items()))) if network else node
        hit = slots.table(NODE_DEVICES).get(key)
        if hit is None:
            local = inventory.slices_by_node().get(node, ())
            hit = slots.put(NODE_DEVICES, key, node_devices((*local, *network), node,
                                                            self.labels(node)))
        return hit

    def labels(self, node: str) -> Mapping[str, str]:
        found = self.snapshot.nodes.get(node)
        return found.labels if found is not None else {}

    def reached(self) -> frozenset[str] | None:
        """Nodes some slice may reach (None: any node may be)."""
        inventory = self.snapshot.volumes.devices

        def make() -> frozenset[str] | None:
            if inventory.network_slices():
                return None
            return frozenset(inventory.slices_by_node())
        return inventory.slots.get_or_make(REACHED, (), make)


def _copy(member: Member, role: str, i: int) -> list[ResourceClaim]:
    """Unallocated copies of *member*'s own claims for the *i*-th member of *role*, named
    apart (a node must find devices for each member put there)."""
    return [replace(c, name=f"{c.name}#{role}#{i}", allocation=None, reserved_for=())
            for c in member.own]


@dataclass(slots=True)
class _Tracker:
    """Members put on each node so far, and the devices their claims got there."""

    rule: DeviceRule
    placed: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> role -> count
    chosen: dict[str, NodeAllocation] = field(default_factory=dict)
    verdicts: dict[tuple[str, str], NodeAllocation | None] = field(default_factory=dict)

    def scope(self, node: str) -> object:
        return node

    def _elsewhere(self, node: str) -> frozenset[DeviceId]:
        """Devices this search chose on other nodes that *node* may also reach: none when
        every slice is node-local (another node's devices are never offered here)."""
        if self.rule.world.reached() is not None:
            return frozenset()
        out: set[DeviceId] = set()
        for n, a in self.chosen.items():
            if n != node:
                out |= a.devices
        return frozenset(out)

    def _shared_elsewhere(self, node: str) -> dict[str, Allocation]:
        """Shared claims this search allocated on other nodes, by key."""
        return {key: a for n, found in self.chosen.items() if n != node
                for key, a in found.allocations if key in self.rule.shared}

    def _try(self, role: str, node: str, more: int) -> NodeAllocation | None:
        counts = dict(self.placed.get(node, {}))
        counts[role] = counts.get(role, 0) + more
        return self.rule.fit(node, counts, self._shared_elsewhere(node),
                             self._elsewhere(node))

    def admits(self, role: str, node: str) -> bool:
        key = (role, node)
        if key not in self.verdicts:
            self.verdicts[key] = self._try(role, node, 1)
        return self.verdicts[key] is not None

    def add(self, role: str, node: str, count: int) -> None:
        found = self._try(role, node, count)
        counts = self.placed.setdefault(node, {})
        counts[role] = counts.get(role, 0) + count
        before = self.chosen.get(node)
        if found is not None:
            self.chosen[node] = found
        newly_shared = found is not None and any(
            key in self.rule.shared and (before is None or key not in dict(before.allocations))
            for key, _ in found.allocations)
        if newly_shared or self.rule.world.reached() is None:
            self.verdicts.clear()  # a shared claim placed, or devices other nodes reach
        else:
            for key in [k for k in self.verdicts if k[1] == node]:
                del self.verdicts[key]


@dataclass(slots=True)
class DeviceRule:
    """The gang's claims get devices on the nodes its members are put on."""

    gang: Gang
    members: MemberClaims
    world: _World
    #: Keys of the claims several members share (allocated once).
    shared: frozenset[str] = frozenset()
    _last: tuple[tuple[tuple[tuple[str, str], int], ...], GangDevices | DeviceMisfit] | None = (
        None)
    #: role -> copies of its first member's own claims, per member (grown on demand).
    _copies: dict[str, list[list[ResourceClaim]]] = field(default_factory=dict)

    def copies(self, role: str, count: int) -> list[ResourceClaim]:
        """*count* members' worth of *role*'s own claims (see ``_copy``)."""
        made = self._copies.setdefault(role, [])
        first = self.members[role][0]
        while len(made) < count:
            made.append(_copy(first, role, len(made)))
        return [c for per_member in made[:count] for c in per_member]

    @property
    def roles(self) -> frozenset[str]:
        return frozenset(self.members)

    def _shared_claims(self, role: str) -> list[ResourceClaim]:
        first = self.members[role][0] if self.members[role] else None
        return [c for c in first.claims if c.key in self.shared] if first else []

    def fit(self, node: str, counts: Mapping[str, int], shared_at: Mapping[str, Allocation],
            taken: Container[DeviceId]) -> NodeAllocation | None:
        """Devices on *node* for *counts* members per role (their own claims, and the
        shared claims not allocated yet), none in *taken*; None if there are none, or a
        shared claim allocated elsewhere does not reach the node."""
        claims: list[ResourceClaim] = []
        seen: set[str] = set()
        labels = self.world.labels(node)
        for role, count in sorted(counts.items()):
            members = self.members.get(role)
            if not members or count <= 0:
                continue
            for claim in self._shared_claims(role):
                if claim.key in seen:
                    continue
                seen.add(claim.key)
                allocation = claim.allocation or shared_at.get(claim.key)
                if allocation is None:
                    claims.append(claim)
                elif not allocation.reaches(node, labels):
                    return None
            claims += self.copies(role, count)
        if not claims:
            return NodeAllocation(node)
        inventory = self.world.inventory
        answer = allocate(self.world.devices(node), claims, inventory.classes,
                          Held(inventory.taken(), taken), explain=False, budget=FIT_BUDGET,
                          selections=inventory.slots.table(SELECTIONS),
                          consumed=inventory.consumed())
        return answer if isinstance(answer, NodeAllocation) else None

    def alone(self, role: str, node: str, most: int) -> int:
        """Members of *role* (up to *most*) whose claims get devices on *node* alone."""
        reached = self.world.reached()
        if reached is not None and node not in reached:
            return 0
        k = 0
        while k < most and self.fit(node, {role: k + 1}, {}, ()) is not None:
            k += 1
        return k

    def why_not(self, role: str, node: str, members: int) -> str:
        """Why *members* members of *role* do not all get devices on *node* (explained)."""
        members_of = self.members.get(role)
        if not members_of:
            return ""
        claims = [c for c in self._shared_claims(role) if c.allocation is None]
        claims += self.copies(role, members)
        answer = allocate(self.world.devices(node), claims, self.world.inventory.classes,
                          self.world.inventory.taken(), consumed=self.world.inventory.consumed())
        if not isinstance(answer, DeviceMisfit):
            return ""
        if answer.claim:  # one member's claim (a copy): named as the claim it copies
            return replace(answer, claim=answer.claim.split("#", 1)[0]).describe()
        like = members_of[0].own[0].key if members_of[0].own else ""
        return (f"on node {node}: the claims of {members} members (each like {like}) "
                f"together need more devices than are free")

    # The rule's faces --------------------------------------------------------------------
    def tracker(self) -> _Tracker:
        return _Tracker(self)

    def encode(self, enc: Encoding) -> None:
        for role in sorted(self.members):
            for node in enc.nodes_of(role):
                cap = enc.caps.get((role, node), 0)
                enc.model.add(enc.x[(role, node)] <= self.alone(role, node, cap))

    def allocate(self, assign: Mapping[tuple[str, str], int]) -> GangDevices | DeviceMisfit:
        """Devices for the members *assign* places, each with its own claims (kept for the
        last *assign*: the final check and ``decide`` ask for the same one)."""
        key = tuple(sorted((k, v) for k, v in assign.items() if v))
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        placement: dict[str, list[ResourceClaim]] = {}
        for member, node in self.placed_members(assign):
            placement.setdefault(node, []).extend(member.claims)
        world = self.world
        nodes = {n: world.devices(n) for n in placement}
        labels = {n: world.labels(n) for n in placement}
        answer = allocate_gang(placement, nodes, world.inventory.classes, labels,
                               world.inventory.taken(), consumed=world.inventory.consumed())
        self._last = (key, answer)
        return answer

    def placed_members(self, assign: Mapping[tuple[str, str], int]) -> list[tuple[Member, str]]:
        """Each member of a role with claims and the node *assign* puts it on, in the order
        its pod binds (``types.spread_members``)."""
        assignments = [Assignment(r, n, c) for (r, n), c in sorted(assign.items()) if c > 0]
        out: list[tuple[Member, str]] = []
        for role in self.gang.roles:
            members = self.members.get(role.name)
            if members:
                out += spread_members(members, role.name, assignments)
        return out

    def violation(self, assign: Mapping[tuple[str, str], int]) -> str | None:
        answer = self.allocate(assign)
        return answer.describe() if isinstance(answer, DeviceMisfit) else None

    def describe(self) -> str:
        keys = sorted({c.key for ms in self.members.values() for m in ms[:1]
                       for c in m.claims})
        return "device claims: " + ", ".join(k.split("/", 1)[-1] for k in keys)

    # Decisions ---------------------------------------------------------------------------
    def decide(self, assign: Mapping[tuple[str, str], int]) -> tuple[PreBind, ...] | DeviceMisfit:
        """The claims' allocations and reservations for *assign*, as pre-bind decisions."""
        answer = self.allocate(assign)
        if isinstance(answer, DeviceMisfit):
            return answer
        made = {key: (node, a) for key, node, a in answer.allocations}
        users: dict[str, list[Consumer]] = {}
        where: dict[str, str] = {}
        claims: dict[str, ResourceClaim] = {}
        group = self.gang.native
        for member, node in self.placed_members(assign):
            for claim in member.claims:
                claims.setdefault(claim.key, claim)
                where.setdefault(claim.key, node)
                if claim.key in member.grouped and group is not None:
                    api_group, resource, name, uid = group.consumer
                    users[claim.key] = [Consumer(resource, name, uid, api_group)]
                elif member.pod is not None:
                    users.setdefault(claim.key, []).append(
                        Consumer("pods", member.pod.name, member.pod.uid))
        out: list[PreBind] = []
        for key, claim in claims.items():
            reserved = {c.uid for c in claim.reserved_for}
            new = tuple(c for c in users.get(key, ()) if c.uid not in reserved)
            if key in made:
                node, allocation = made[key]
                config = allocation_config(claim.spec, self.world.inventory.classes,
                                           allocation)
                out.append(PreBind(key, PreBindKind.DEVICES, node, device_names(allocation),
                                   allocation, new, config))
            elif new:
                out.append(PreBind(key, PreBindKind.DEVICES, where[key], consumers=new))
        return tuple(sorted(out))


@dataclass(frozen=True, slots=True)
class DeviceTerms:
    """A gang's devices for one solve: why it waits before any search (``impossible``),
    the nodes each role cannot use, and the rule."""

    impossible: str = ""
    blocked: Mapping[str, Blocks] = field(default_factory=dict)
    rule: DeviceRule | None = None


def compile_devices(gang: Gang, snapshot: Snapshot) -> DeviceTerms | None:
    """The gang's device terms, or None when no member names a claim."""
    resolved = resolve_claims(gang, snapshot.volumes.devices)
    if resolved is None:
        return None
    if isinstance(resolved, str):
        return DeviceTerms(impossible=resolved)
    shared = frozenset(k for ms in resolved.values() for m in ms for k in m.shared)
    rule = DeviceRule(gang, resolved, _World(snapshot), shared)
    reached = rule.world.reached()
    blocked: dict[str, Blocks] = {}
    if reached is not None:
        unreached = [n for n in snapshot.node_names if n not in reached]
        for role in sorted(resolved):
            blocked[role] = Blocks()
            blocked[role].block(unreached, NO_SLICE, devices=True)
    return DeviceTerms("", blocked, rule)
