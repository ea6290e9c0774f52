"""Volumes in placement: what kube-scheduler's VolumeBinding, VolumeZone, VolumeRestrictions
and NodeVolumeLimits plugins decide, for a whole gang at once.

* A bound claim's PV must reach the node (its node affinity; its zone labels, VolumeZone).
* An unbound ``WaitForFirstConsumer`` claim is *open*: it gets a static PV that matches it
  (class, capacity, access modes, volume mode, selector; the smallest, as
  ``FindMatchingVolume`` picks) and reaches every node its members use, or, if its class
  provisions there, dynamic provisioning. Open claims of one gang get distinct PVs; the
  choice is a rule (``ClaimRule``) so greedy, CP-SAT and the final check agree, and
  ``decide`` turns a placement into ``PreBind`` decisions for the actuator to carry out
  before any member binds. A claim annotated ``volume.kubernetes.io/selected-node`` is only usable
  on that node until it is bound, as in kube-scheduler.
* A claim that is unbound otherwise (Immediate, or mid-binding) or missing makes the gang
  wait; a ``ReadWriteOncePod`` claim in use, or shared by two members, cannot be placed.
* CSI attach limits (CSINode ``allocatable.count``): ``attach``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from scheduler.model import Gang
from scheduler.model.prebind import PreBind, PreBindKind
from scheduler.model.volumes import (
    Claim,
    StorageClass,
    Volume,
    VolumePhase,
    ga_label,
)
from scheduler.placement.attach import AttachRule, attach_rules
from scheduler.placement.rules import Blocks, Encoding
from scheduler.placement.types import RoleLimits
from scheduler.world.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Option:
    """One way to satisfy an open claim: a static PV, or provisioning (``pv == ""``)."""

    pv: str
    reach: frozenset[str]  # nodes it works on
    size: int = 0


@dataclass(frozen=True, slots=True)
class OpenClaim:
    key: str  # namespace/name
    users: frozenset[str]  # roles mounting it
    options: tuple[Option, ...]  # static PVs smallest first, then provisioning
    request: int = 0


def matches(claim: Claim, pv: Volume) -> bool:
    """``FindMatchingVolume`` without the node: may *pv* be bound to *claim*?"""
    if pv.terminating or pv.capacity < claim.request or pv.volume_mode != claim.volume_mode:
        return False
    if pv.attributes_class != claim.attributes_class:
        return False
    ref = pv.claim_ref
    if ref is not None:
        return (ref.namespace, ref.name) == (claim.namespace, claim.name) and (
            not ref.uid or ref.uid == claim.uid)  # pre-bound to this claim
    if pv.phase is not VolumePhase.AVAILABLE or pv.storage_class != claim.storage_class:
        return False
    if claim.selector is not None and not claim.selector.matches(pv.labels):
        return False
    return claim.access_modes <= pv.access_modes


def zone_ok(pv: Volume, labels: Mapping[str, str]) -> bool:
    """VolumeZone: a node with any zone/region label must be in the PV's zones."""
    zones = pv.zones()
    if not zones or not any(k in labels for k in
                            ("failure-domain.beta.kubernetes.io/zone",
                             "failure-domain.beta.kubernetes.io/region",
                             "topology.kubernetes.io/zone", "topology.kubernetes.io/region")):
        return True
    for key, values in zones:
        have = labels.get(key, labels.get(ga_label(key)))
        if have is None or have not in values:
            return False
    return True


def _reach(snapshot: Snapshot, ok: Callable[[str, Mapping[str, str]], bool]) -> frozenset[str]:
    nodes = snapshot.nodes
    return frozenset(n for n in snapshot.node_names if ok(n, nodes[n].labels))


def _provisioning(cls: StorageClass | None, snapshot: Snapshot) -> frozenset[str]:
    if cls is None or not cls.provisions:
        return frozenset()
    return _reach(snapshot, lambda n, labels: cls.allows(labels))


@dataclass(slots=True)
class _ClaimTracker:
    rule: ClaimRule
    used: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def scope(self, node: str) -> object:
        return node

    def admits(self, role: str, node: str) -> bool:
        mine = [c for c in self.rule.claims if role in c.users and node not in self.used[c.key]]
        if not mine:
            return True
        trial = {c.key: self.used[c.key] | ({node} if c in mine else set())
                 for c in self.rule.claims}
        return _choose(self.rule.claims, trial) is not None

    def add(self, role: str, node: str, count: int) -> None:
        for c in self.rule.claims:
            if role in c.users:
                self.used[c.key].add(node)


def _choose(claims: tuple[OpenClaim, ...],
            used: Mapping[str, set[str]]) -> dict[str, Option] | None:
    """An option per claim reaching every node its members use, distinct PVs (backtracking
    over a gang's few claims, smallest PV first)."""
    out: dict[str, Option] = {}
    taken: set[str] = set()

    def go(i: int) -> bool:
        if i == len(claims):
            return True
        c = claims[i]
        nodes = used.get(c.key, set())
        for opt in c.options:
            if opt.pv and opt.pv in taken:
                continue
            if nodes <= opt.reach:
                out[c.key] = opt
                if opt.pv:
                    taken.add(opt.pv)
                if go(i + 1):
                    return True
                taken.discard(opt.pv)
        return False

    return out if go(0) else None


@dataclass(frozen=True, slots=True)
class ClaimRule:
    """Open claims get one option each, reaching all their members' nodes."""

    claims: tuple[OpenClaim, ...]

    @property
    def roles(self) -> frozenset[str]:
        return frozenset(r for c in self.claims for r in c.users)

    def tracker(self) -> _ClaimTracker:
        return _ClaimTracker(self)

    def encode(self, enc: Encoding) -> None:
        pv_users: dict[str, list[object]] = defaultdict(list)
        for c in self.claims:
            ys = []
            for opt in c.options:
                y = enc.model.new_bool_var(f"claim[{c.key},{opt.pv or '<dynamic>'}]")
                ys.append((opt, y))
                if opt.pv:
                    pv_users[opt.pv].append(y)
            enc.model.add(sum(y for _, y in ys) == 1)
            for role in sorted(c.users):
                for node in enc.nodes_of(role):
                    cap = enc.caps.get((role, node), 0)
                    ok = [y for opt, y in ys if node in opt.reach]
                    enc.model.add(enc.x[(role, node)] <= cap * sum(ok) if ok
                                  else enc.x[(role, node)] == 0)
        for ys_of_pv in pv_users.values():
            if len(ys_of_pv) > 1:
                enc.model.add(sum(ys_of_pv) <= 1)  # type: ignore[arg-type]

    def violation(self, assign: Mapping[tuple[str, str], int]) -> str | None:
        if _choose(self.claims, _used(self.claims, assign)) is None:
            names = ", ".join(c.key for c in self.claims)
            return f"claims {names}: no PV (or provisioning) reaches every member's node"
        return None

    def describe(self) -> str:
        return "volume claims: " + ", ".join(c.key for c in self.claims)


def _used(claims: Iterable[OpenClaim], assign: Mapping[tuple[str, str], int]) -> dict[
        str, set[str]]:
    out: dict[str, set[str]] = {}
    for c in claims:
        out[c.key] = {n for (r, n), k in assign.items() if k and r in c.users}
    return out


@dataclass(frozen=True, slots=True)
class ClaimTerms:
    blocked: Mapping[str, tuple[frozenset[str], tuple[tuple[str, int], ...]]]
    rules: tuple[ClaimRule | AttachRule, ...]
    impossible: str
    open_claims: tuple[OpenClaim, ...]

    def restrict(self, limits: dict[str, RoleLimits]) -> dict[str, RoleLimits]:
        out = dict(limits)
        for role, (nodes, why) in self.blocked.items():
            old = out.get(role, RoleLimits())
            out[role] = replace(old, blocked=old.blocked | nodes, why=(*old.why, *why))
        return out

    def decide(self, assign: Mapping[tuple[str, str], int]) -> tuple[PreBind, ...] | None:
        """What to do with each open claim for *assign* (None: inconsistent)."""
        used = _used(self.open_claims, assign)
        chosen = _choose(self.open_claims, used)
        if chosen is None:
            return None
        out = []
        for c in self.open_claims:
            nodes = used[c.key]
            if not nodes:
                continue  # only optional members mount it, and none was placed
            opt = chosen[c.key]
            out.append(PreBind(c.key, PreBindKind.CLAIM_REF, opt.pv) if opt.pv
                       else PreBind(c.key, PreBindKind.SELECTED_NODE, min(nodes)))
        return tuple(sorted(out))

    def provision_first(self, assign: Mapping[tuple[str, str], int],
                        decisions: Iterable[PreBind]) -> bool:
        """Must some claim be provisioned before the members bind? (A provisioned claim
        used on several nodes: where the new PV reaches is known only once it exists.)"""
        used = _used(self.open_claims, assign)
        return any(d.kind is PreBindKind.SELECTED_NODE and len(used[d.claim]) > 1
                   for d in decisions)


def compile_claims(gang: Gang, snapshot: Snapshot) -> ClaimTerms | None:
    """The gang's volume terms, or None when no member mounts a claim."""
    users: dict[str, set[str]] = defaultdict(set)
    for role in gang.roles:
        if role.count > 0:
            for use in role.requirements.constraints.claims:
                users[use.claim].add(role.name)
    if not users:
        return None
    return _Compiler(gang, snapshot, users).run()


@dataclass(slots=True)
class _Compiler:
    gang: Gang
    snapshot: Snapshot
    users: Mapping[str, set[str]]
    blocks: dict[str, Blocks] = field(default_factory=lambda: defaultdict(Blocks))
    impossible: str = ""
    open_claims: list[OpenClaim] = field(default_factory=list)

    def _wait(self, text: str) -> None:
        self.impossible = self.impossible or text

    def _block_users(self, name: str, ok: frozenset[str], reason: str) -> None:
        for role in self.users[name]:
            self.blocks[role].block(set(self.snapshot.node_names) - ok, reason)

    def run(self) -> ClaimTerms:
        catalog = self.snapshot.volumes
        ns = self.gang.namespace
        for name in sorted(self.users):
            claim = catalog.claims.get(f"{ns}/{name}")
            if claim is None:
                self._wait(f"persistentvolumeclaim {name} not found")
            elif claim.lost:
                self._wait(f"persistentvolumeclaim {name} is bound to a PV that does not exist "
                           "(Lost)")
            elif claim.terminating:
                self._wait(f"persistentvolumeclaim {name} is being deleted")
            else:
                self._claim(claim)
        self._rwop()
        rules: list[ClaimRule | AttachRule] = []
        if self.open_claims:
            rules.append(ClaimRule(tuple(self.open_claims)))
        rules.extend(attach_rules(self.gang, self.snapshot, self.users, self.blocks))
        blocked = {r: (frozenset(b.nodes), tuple(b.why.most_common()))
                   for r, b in sorted(self.blocks.items()) if b.nodes}
        return ClaimTerms(blocked, tuple(rules), self.impossible, tuple(self.open_claims))

    def _claim(self, claim: Claim) -> None:
        catalog = self.snapshot.volumes
        name = claim.name
        if claim.bound:
            bound = catalog.volumes.get(claim.volume_name)
            if bound is None:
                self._wait(f"persistentvolumeclaim {name}: its PV {claim.volume_name} does not "
                           "exist")
                return
            pv = bound
            ok = _reach(self.snapshot, lambda n, labels: pv.reaches(n, labels)
                        and zone_ok(pv, labels))
            self._block_users(name, ok, f"claim {name}: its volume {pv.name} is not reachable "
                                        "from the node (node affinity or zone)")
            return
        cls = catalog.classes.get(claim.storage_class)
        if claim.volume_name or cls is None or not cls.wait_for_consumer:
            self._wait(f"persistentvolumeclaim {name} is not bound yet (binding mode Immediate, "
                       "or binding in progress); the gang waits for it")
            return
        provision = _provisioning(cls, self.snapshot)
        if claim.selected_node:
            ok = provision & {claim.selected_node}
            self._block_users(name, ok, f"claim {name} is being provisioned for node "
                                        f"{claim.selected_node} (selected-node)")
            return
        options = []
        for vol in sorted(catalog.volumes.values(), key=lambda v: (v.capacity, v.name)):
            if matches(claim, vol):
                reach = _reach(self.snapshot, vol.reaches)
                if reach:
                    options.append(Option(vol.name, reach, vol.capacity))
        if provision:
            options.append(Option("", provision))
        ok = frozenset().union(*(o.reach for o in options)) if options else frozenset()
        self._block_users(name, ok, f"claim {name}: no available PV matches it there and "
                                    f"class {claim.storage_class} cannot provision there")
        self.open_claims.append(OpenClaim(claim.key, frozenset(self.users[name]),
                                          tuple(options), claim.request))

    def _rwop(self) -> None:
        catalog = self.snapshot.volumes
        ns = self.gang.namespace
        roles = {r.name: r for r in self.gang.roles}
        in_use: set[str] = set()
        for occ in self.snapshot.pods.all():
            if occ.namespace == ns:
                in_use.update(u.claim for u in occ.constraints.claims)
        for name, users in sorted(self.users.items()):
            claim = catalog.claims.get(f"{ns}/{name}")
            if claim is None or not claim.read_write_once_pod:
                continue
            members = sum(roles[r].count for r in users)
            if name in in_use:
                for r in users:
                    self.blocks[r].block(self.snapshot.node_names,
                                         f"ReadWriteOncePod claim {name} is in use")
            elif members > 1:
                self._wait(f"ReadWriteOncePod claim {name} is mounted by {members} members")
