"""CSI attach limits (kube-scheduler's NodeVolumeLimits): a node takes new volumes of a
driver only within the count its CSINode reports, less the volumes its pods already use.

A role's members share their claims, so a role adds its claims once per node; where one
node may take members of several roles adding volumes of one driver, ``AttachRule`` keeps
their sum within the free slots (counting shared claims once per role: conservative).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.model import Gang
from scheduler.model.volumes import VolumeCatalog
from scheduler.placement.rules import Blocks, Encoding
from scheduler.world.snapshot import Snapshot


@dataclass(slots=True)
class _AttachTracker:
    rule: AttachRule
    on: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def scope(self, node: str) -> object:
        return node

    def admits(self, role: str, node: str) -> bool:
        rule = self.rule
        new = rule.new.get(role, 0)
        if not new or role in self.on[node] or node not in rule.free:
            return True
        return sum(rule.new[r] for r in self.on[node]) + new <= rule.free[node]

    def add(self, role: str, node: str, count: int) -> None:
        if role in self.rule.new:
            self.on[node].add(role)


@dataclass(frozen=True, slots=True)
class AttachRule:
    """New volumes of one CSI driver on a node stay within its free attach slots."""

    driver: str
    new: Mapping[str, int]  # role -> volumes of the driver it adds to a node
    free: Mapping[str, int]  # node -> free slots (nodes with a limit only)

    @property
    def roles(self) -> frozenset[str]:
        return frozenset(self.new)

    def tracker(self) -> _AttachTracker:
        return _AttachTracker(self)

    def encode(self, enc: Encoding) -> None:
        for node, free in sorted(self.free.items()):
            terms = []
            for role, k in sorted(self.new.items()):
                if (role, node) in enc.x:
                    b = enc.uses(role, (node,))
                    if b is not None:
                        terms.append(k * b)
            if len(terms) > 1:
                enc.model.add(sum(terms) <= free)

    def violation(self, assign: Mapping[tuple[str, str], int]) -> str | None:
        for node, free in sorted(self.free.items()):
            used = sum(k for r, k in self.new.items() if assign.get((r, node), 0))
            if used > free:
                return f"node {node}: {used} new {self.driver} volumes, {free} slots free"
        return None

    def describe(self) -> str:
        return f"attach limit of {self.driver}"


def attach_rules(gang: Gang, snapshot: Snapshot, users: Mapping[str, set[str]],
                 blocks: dict[str, Blocks]) -> list[AttachRule]:
    """Roles' new CSI volumes against the nodes' free attach slots: nodes ruled out for a
    role that alone exceeds them (in *blocks*), rules where several roles add volumes."""
    catalog = snapshot.volumes
    if not catalog.attach_limits:
        return []
    ns = gang.namespace
    mine: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for name, roles in users.items():
        vol = _volume_id(catalog, ns, name)
        if vol is not None:
            for r in roles:
                mine[r][vol[0]].add(vol[1])
    attached: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for occ in snapshot.pods.all():
        for use in occ.constraints.claims:
            vol = _volume_id(catalog, occ.namespace, use.claim)
            if vol is not None:
                attached[occ.node][vol[0]].add(vol[1])
    rules = []
    drivers = sorted({d for per in mine.values() for d in per})
    for driver in drivers:
        free: dict[str, int] = {}
        new: dict[str, int] = {}
        for node, limits in catalog.attach_limits.items():
            if driver in limits:
                free[node] = limits[driver] - len(attached[node][driver])
        for role, per in mine.items():
            if driver not in per:
                continue
            new[role] = len(per[driver])
            for node, slots in free.items():
                extra = len(per[driver] - attached[node][driver])
                if extra > slots:
                    blocks[role].block((node,), f"node can attach no more "
                                                     f"{driver} volumes")
        if len(new) > 1:
            rules.append(AttachRule(driver, new, free))
    return rules


def _volume_id(catalog: VolumeCatalog, namespace: str,
               claim_name: str) -> tuple[str, str] | None:
    """(CSI driver, unique volume) of a claim, as NodeVolumeLimits counts it."""
    claim = catalog.claims.get(f"{namespace}/{claim_name}")
    if claim is None:
        return None
    if claim.volume_name:
        pv = catalog.volumes.get(claim.volume_name)
        if pv is not None and pv.csi_driver and pv.csi_handle:
            return pv.csi_driver, pv.csi_handle
        if pv is not None:
            return None
    cls = catalog.classes.get(claim.storage_class)
    if cls is not None and cls.provisioner:
        return cls.provisioner, f"{namespace}/{claim_name}"
    return None
