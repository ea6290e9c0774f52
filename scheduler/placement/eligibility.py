"""Which nodes each role of a gang may use at all, and why none when there are none.

Eligibility (selectors, affinity, taints, cordons, readiness) does not depend on what is
running, so the snapshot caches it per requirements; this module adds the per-solve
``excluded_nodes`` / ``allowed_nodes`` and the nodes the gang's pod-level constraints rule
out (``terms``), and packages the result as a ``Problem`` for the greedy and CP-SAT stages.
A role using a field the scheduler does not evaluate is refused here. The explanation for
an empty set is computed only on that path.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.kit.memo import Slot
from scheduler.model import Gang, PodRequirements, Role, describe_selector
from scheduler.model.demand import gpus_of
from scheduler.model.resources import (
    GPU,
    PODS,
    Resources,
    format_amount,
)
from scheduler.placement.index import SelectionKey, selection_key
from scheduler.placement.terms import NO_LIMITS, NO_TERMS, RoleLimits, Terms, compile_terms
from scheduler.placement.types import PlacementParams, Unplaceable, UnplaceableReason
from scheduler.world.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class RoleView:
    """A role as the solver sees it: per-pod effective requests and its usable nodes."""

    name: str
    required: int
    optional: int
    request: Resources  # per pod, including the ``pods`` slot
    nodes: tuple[str, ...]  # eligible, allowed by the params and not ruled out, sorted
    eligible: tuple[str, ...]  # eligible regardless of the params (what the index covers)
    key: SelectionKey  # for the free-GPU index of ``eligible``
    #: GPUs one pod requests as a resource (``nvidia.com/gpu``): what the free-GPU
    #: pre-filters and the placement order compare with the nodes' free GPUs. GPUs that come
    #: from device claims are devices, not node resources: the device rule places them
    #: (``device_terms``), and quota counts them through ``Role.demand``.
    gpus: int
    #: GPUs one member's device claims count for (``Role.device_gpus``): with ``gpus``, how
    #: much of a node's ``Snapshot.free_gpus`` a member takes, for the best-fit order only.
    devices: int = 0
    #: What the gang's pod-level constraints leave (blocked nodes, a per-node cap, scores).
    limits: RoleLimits = NO_LIMITS
    #: Eligible and allowed by the params, before the constraints rule nodes out: what
    #: "never fits" is judged on (running pods that rule nodes out may go).
    open: tuple[str, ...] = ()

    def allowed(self, node: str) -> bool:
        """Not ruled out by the constraints (the params are checked by ``Problem.usable``)."""
        return node not in self.limits.blocked

    def cap(self, pods: int) -> int:
        """*pods* that fit on a node, limited by the constraints' per-node cap."""
        cap = self.limits.cap
        return pods if not cap or pods < cap else cap

    @property
    def request_text(self) -> str:
        """The per-pod request for messages, without the implicit ``pods`` slot."""
        request = self.request
        names = sorted((k for k in request if k != PODS), key=lambda k: (k != GPU, k))
        return ", ".join(f"{format_amount(k, request[k])} {k}" for k in names) or "nothing"


@dataclass(frozen=True, slots=True)
class Problem:
    """One solve's input, with roles in placement order (biggest pods first)."""

    gang: Gang
    snapshot: Snapshot
    params: PlacementParams
    roles: tuple[RoleView, ...]
    terms: Terms = NO_TERMS

    @property
    def coupled(self) -> bool:
        """Do rules couple members across nodes, or preferences order nodes? Then the
        constructive pass places members one at a time (``constrained``)."""
        return bool(self.terms.rules) or any(rv.limits.score for rv in self.roles)

    @property
    def packs(self) -> bool:
        """Do only device claims couple members (no other rule, no preference)? Then the
        packing greedy's answer is tried first, checked against the device rule (which
        allocates the whole gang), and the constructive pass runs only when it fails: best
        fit for pods whose GPUs are devices, as for integer GPUs."""
        terms = self.terms
        return (terms.devices is not None and terms.rules == (terms.devices,)
                and not any(rv.limits.score for rv in self.roles))

    @property
    def filtered(self) -> bool:
        """Whether the params restrict nodes beyond eligibility."""
        return bool(self.params.excluded_nodes) or self.params.allowed_nodes is not None

    def usable(self, node: str) -> bool:
        params = self.params
        if node in params.excluded_nodes:
            return False
        return params.allowed_nodes is None or node in params.allowed_nodes

    @property
    def required_total(self) -> Resources:
        out: dict[str, int] = {}
        for rv in self.roles:
            for k, v in rv.request.items():
                out[k] = out.get(k, 0) + v * rv.required
        return Resources(out)


def _order_key(rv: RoleView) -> tuple[int, int, int, str]:
    # First-fit decreasing: big pods are the hard ones to fit, small ones fill the gaps.
    return (-rv.gpus - rv.devices, -rv.request.get("cpu", 0), -rv.request.get("memory", 0), rv.name)


def prepare(gang: Gang, snapshot: Snapshot, params: PlacementParams) -> Problem | Unplaceable:
    """Eligible nodes per role, or why the gang cannot be placed at all: a field it uses is
    not supported, its device claims keep it waiting, a constraint cannot be met, or
    nothing excludes no node."""
    for role in gang.roles:
        unsupported = role.requirements.constraints.unsupported
        if role.count > 0 and unsupported:
            return Unplaceable(gang.id, UnplaceableReason.UNSUPPORTED,
                               f"role {role.name}: {unsupported[0]}; gang-scheduler refuses the "
                               "gang rather than bind it as if the field were absent")
    terms = compile_terms(gang, snapshot)
    if terms.impossible:
        reason, message = terms.impossible
        return Unplaceable(gang.id, reason, message)
    views: list[RoleView] = []
    for role in gang.roles:
        if role.count <= 0:
            continue
        limits = terms.limits_of(role.name)
        eligible = nodes = snapshot.eligible_nodes(role.requirements)
        if params.excluded_nodes or params.allowed_nodes is not None:
            nodes = _usable(snapshot, role.requirements, eligible, params)
        open_nodes = nodes
        if limits.blocked:
            nodes = tuple(n for n in nodes if n not in limits.blocked)
        if not nodes and role.required > 0:  # a role of optional members only may go unplaced
            if open_nodes:
                return _ruled_out(gang, role, limits, len(open_nodes), snapshot)
            return Unplaceable(gang.id, UnplaceableReason.NO_ELIGIBLE_NODES,
                               explain_no_eligible(role, snapshot, params))
        views.append(RoleView(
            name=role.name, required=max(role.required, 0),
            optional=max(role.count - max(role.required, 0), 0),
            request=role.requests, nodes=nodes, eligible=eligible,
            key=selection_key(role.requirements), gpus=gpus_of(role.requests), limits=limits,
            open=open_nodes, devices=role.device_gpus))
    return Problem(gang, snapshot, params, tuple(sorted(views, key=_order_key)), terms)


#: (requirements, nodes excluded, nodes allowed or None) -> the eligible nodes a solve with
#: those params may use: most solves of a cycle share the few sets of nominated or reserved
#: nodes (kept in the node index).
USABLE: Slot[tuple[PodRequirements, frozenset[str], frozenset[str] | None],
             tuple[str, ...]] = Slot("eligibility.usable")


def _usable(snapshot: Snapshot, requirements: PodRequirements, eligible: tuple[str, ...],
            params: PlacementParams) -> tuple[str, ...]:
    """*eligible* (the nodes *requirements* allow) without the params' excluded nodes and
    within its allowed ones, kept in the node index: the sets are frozen, so equal params
    give an equal answer (and their hashes are computed once per set)."""
    allowed, excluded = params.allowed_nodes, params.excluded_nodes
    slots = snapshot.index.slots
    key = (requirements, excluded, allowed)
    hit = slots.table(USABLE).get(key)
    if hit is None:
        hit = slots.put(USABLE, key, tuple(n for n in eligible if n not in excluded
                                           and (allowed is None or n in allowed)))
    return hit


def _ruled_out(gang: Gang, role: Role, limits: RoleLimits, count: int,
               snapshot: Snapshot) -> Unplaceable:
    """Every usable node is ruled out by the role's constraints; the nodes its selectors pick
    that it may not use at all (an untolerated taint, a cordon) are named too: the node a
    constraint points to may be one of them (pods it must run beside are on a node whose
    taint it does not tolerate), and the message would otherwise hide it."""
    parts = "; ".join(f"{n} by {why}" for why, n in limits.why)
    reason = (UnplaceableReason.DEVICE_CLAIMS if limits.by_devices
              else UnplaceableReason.POD_CONSTRAINTS if limits.by_running
              else UnplaceableReason.NO_ELIGIBLE_NODES)
    shut = _Shut.of(role, snapshot)
    beyond = shut.describe(snapshot)
    more = f"; besides, of the nodes it selects, {beyond}" if beyond else ""
    return Unplaceable(gang.id, reason, f"role {role.name}: all {count} eligible nodes are "
                                        f"ruled out: {parts}{more}")


@dataclass(frozen=True, slots=True)
class _Shut:
    """The nodes a role's selectors pick that it may not use at all, by cause."""

    selected: list[str]
    cordoned: list[str]
    not_ready: list[str]
    tainted: dict[str, list[str]]  # untolerated taint -> nodes

    @classmethod
    def of(cls, role: Role, snapshot: Snapshot) -> _Shut:
        req = role.requirements
        selected = [n for n in snapshot.node_names if req.selects(snapshot.nodes[n])]
        cordoned = [n for n in selected if snapshot.nodes[n].unschedulable]
        not_ready = [n for n in selected if not snapshot.nodes[n].ready
                     and not snapshot.nodes[n].unschedulable]
        tainted: dict[str, list[str]] = {}
        for n in selected:
            node = snapshot.nodes[n]
            if node.unschedulable or not node.ready:
                continue
            taint = req.untolerated_taint(node)
            if taint is not None:
                tainted.setdefault(str(taint), []).append(n)
        return cls(selected, cordoned, not_ready, tainted)

    @property
    def taint_count(self) -> int:
        return sum(len(ns) for ns in self.tainted.values())

    def taint_text(self, snapshot: Snapshot) -> str:
        """``k=v:NoSchedule (pool a100, 2 nodes) or ...``, most nodes first."""
        return " or ".join(
            f"{t} ({_pools(snapshot, ns)}, {len(ns)} node{'s' if len(ns) > 1 else ''})"
            for t, ns in sorted(self.tainted.items(), key=lambda kv: (-len(kv[1]), kv[0])))

    def describe(self, snapshot: Snapshot) -> str:
        """``1 cordoned (unschedulable); 2 with untolerated taints: ...`` ("" if none)."""
        parts = []
        if self.cordoned:
            parts.append(f"{len(self.cordoned)} cordoned (unschedulable)")
        if self.not_ready:
            parts.append(f"{len(self.not_ready)} not ready")
        if self.tainted:
            parts.append(f"{self.taint_count} with untolerated taints: "
                         f"{self.taint_text(snapshot)}")
        return "; ".join(parts)


def _pools(snapshot: Snapshot, names: list[str]) -> str:
    pools = sorted({snapshot.nodes[n].pool for n in names})
    return ("pool " if len(pools) == 1 else "pools ") + ", ".join(pools)


def _selector_miss(role: Role, snapshot: Snapshot) -> str:
    req = role.requirements
    nodes = snapshot.nodes.values()
    if req.node_selector:
        sel_only = PodRequirements(req.requests, node_selector=req.node_selector)
        if not any(sel_only.selects(n) for n in nodes):
            pairs = ", ".join(f"{k}={v}" for k, v in sorted(req.node_selector.items()))
            return f"role {role.name}: nodeSelector {pairs} matches no node"
    affinity = [p for p in describe_selector(req) if p.startswith("affinity")]
    scope = " among the nodes matching its nodeSelector" if req.node_selector else ""
    return f"role {role.name}: node {' or '.join(affinity)} matches no node{scope}"


def explain_no_eligible(role: Role, snapshot: Snapshot, params: PlacementParams) -> str:
    """Why *role* has no usable node: the selector, the taints, cordons, or the params."""
    req = role.requirements
    shut = _Shut.of(role, snapshot)
    if not shut.selected:
        return _selector_miss(role, snapshot)
    eligible = (len(shut.selected) - len(shut.cordoned) - len(shut.not_ready)
                - shut.taint_count)
    if eligible > 0:
        return (f"role {role.name}: all {eligible} eligible nodes are excluded by this solve "
                f"(reserved, nominated or outside the allowed set)")
    if shut.tainted and not shut.cordoned and not shut.not_ready:
        if len(shut.tainted) == 1:
            only, names = next(iter(shut.tainted.items()))
            return (f"role {role.name}: no node in {_pools(snapshot, names)} "
                    f"tolerates taint {only}")
        return f"role {role.name}: no node tolerates its taints: {shut.taint_text(snapshot)}"
    scope = "matching its selectors" if req.node_selector or req.affinity_terms else "in total"
    return f"role {role.name}: of {len(shut.selected)} nodes {scope}, {shut.describe(snapshot)}"
