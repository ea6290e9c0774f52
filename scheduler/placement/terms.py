"""A gang's pod-level constraints compiled for one solve: node filters, caps, rules, scores.

What depends only on the running pods and the nodes becomes a per-role node filter
(``blocked``): running pods' anti-affinity selecting the role, the role's anti-affinity
against running pods, affinity satisfied by running pods, nodes without a spread key,
host ports in use, and the volume checks of ``claims``. A per-node cap covers what
couples a role only with itself on one node (host ports, self anti-affinity per node).
What couples members across nodes is a rule (``rules``, ``affinity``, ``spread``) that
greedy, CP-SAT and the final check share. Preferences become node scores.

Gangs without any of these fields, on a cluster where no running pod has required
anti-affinity, skip all of it (``compile_terms`` returns ``NO_TERMS`` at once).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from scheduler.kit.memo import Slot
from scheduler.model import Gang, Role
from scheduler.model.constraints import PodAffinityTerm, SpreadConstraint
from scheduler.model.labels import LabelSelector
from scheduler.placement import claims as claim_terms
from scheduler.placement import device_terms
from scheduler.placement import ports as host_ports
from scheduler.placement.affinity import AffinityRule, AntiRule
from scheduler.placement.index import selection_key
from scheduler.placement.rules import Blocks, Rule
from scheduler.placement.scores import static_scores
from scheduler.placement.spread import SpreadRule
from scheduler.placement.types import RoleLimits, UnplaceableReason
from scheduler.world.occupancy import Occupant
from scheduler.world.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Terms:
    limits: Mapping[str, RoleLimits] = field(default_factory=dict)
    rules: tuple[Rule, ...] = ()
    #: Role names in the order the constructive pass places them (anchors first).
    order: tuple[str, ...] = ()
    #: Why the gang cannot be placed whatever the capacity (a role's terms unsatisfiable,
    #: a claim missing or unbound).
    impossible: tuple[UnplaceableReason, str] | None = None
    claims: claim_terms.ClaimTerms | None = None
    #: The gang's device claims (Dynamic Resource Allocation), when a member names one.
    devices: device_terms.DeviceRule | None = None

    @property
    def active(self) -> bool:
        return bool(self.limits or self.rules or self.impossible or self.claims
                     or self.devices)

    @property
    def capped(self) -> bool:
        return any(lim.cap for lim in self.limits.values())

    def limits_of(self, role: str) -> RoleLimits:
        return self.limits.get(role, NO_LIMITS)


NO_LIMITS = RoleLimits()
NO_TERMS = Terms()
_T = TypeVar("_T")
_K = TypeVar("_K")


#: Node-derived values kept in the snapshot's node index (node labels, taints and
#: eligibility do not change while it lives): label key -> node -> its value, for the nodes
#: that have it; label keys -> node -> its values of them, for nodes with all (pod affinity);
#: label keys -> the nodes that have them all / that lack one (spread); (selection, key,
#: policies, keyed nodes) -> the nodes a spread constraint counts.
DOMAINS: Slot[str, dict[str, str]] = Slot("terms.domains")
COMPOSITE: Slot[tuple[str, ...], dict[str, tuple[str, ...]]] = Slot("terms.composite")
KEYED: Slot[frozenset[str], tuple[str, ...]] = Slot("terms.keyed")
UNKEYED: Slot[frozenset[str], frozenset[str]] = Slot("terms.unkeyed")
SPREAD_NODES: Slot[tuple[object, ...], dict[str, str]] = Slot("terms.spread_nodes")


def domains(snapshot: Snapshot, key: str) -> Mapping[str, str]:
    """node -> its value of label *key*, for the nodes that have it (kept in the node
    index: node labels do not change while it lives)."""
    slots = snapshot.index.slots
    hit = slots.table(DOMAINS).get(key)
    if hit is None:
        nodes = snapshot.nodes
        hit = slots.put(DOMAINS, key, {n: nodes[n].labels[key] for n in snapshot.node_names
                                       if key in nodes[n].labels})
    return hit


def _surely(role: Role, selector: LabelSelector) -> bool:
    return not (role.mixed_labels & selector.keys) and selector.matches(role.labels)


def _maybe(role: Role, selector: LabelSelector) -> bool:
    if role.mixed_labels & selector.keys:
        return not selector.nothing
    return selector.matches(role.labels)


def _values_of(snapshot: Snapshot, key: str, nodes: Iterable[str]) -> set[str]:
    dom = domains(snapshot, key)
    return {dom[n] for n in nodes if n in dom}


def _in_values(snapshot: Snapshot, key: str, values: set[str]) -> list[str]:
    return [n for n, v in domains(snapshot, key).items() if v in values]


def _existing_anti(gang: Gang, role: Role, snapshot: Snapshot, blocks: Blocks) -> None:
    """Running pods whose required anti-affinity selects this role's pods."""
    ns_labels = snapshot.namespace_labels(gang.namespace)
    for occ in snapshot.pods.with_anti_affinity():
        for term in occ.constraints.anti_affinity:
            if (gang.namespace in term.namespaces or term.namespace_selector.matches(ns_labels)) \
                    and _maybe(role, term.selector):
                values = _values_of(snapshot, term.topology_key, (occ.node,))
                blocks.block(_in_values(snapshot, term.topology_key, values),
                             "running pods' anti-affinity selects it", True)


def _surely_selects(snapshot: Snapshot, term: PodAffinityTerm, occ: Occupant) -> bool:
    """Do all of *occ*'s pods fall under *term* (its namespaces and its selector)?"""
    return occ.surely_matches(term.selector) and (
        occ.namespace in term.namespaces
        or term.namespace_selector.matches(snapshot.namespace_labels(occ.namespace)))


def _matching_running(snapshot: Snapshot, term: PodAffinityTerm, surely: bool) -> list[str]:
    """Nodes of running pods the term selects."""
    out = []
    for occ in snapshot.pods.matching(term.selector):
        if surely and not occ.surely_matches(term.selector):
            continue
        ns = occ.namespace
        if ns in term.namespaces or term.namespace_selector.matches(
                snapshot.namespace_labels(ns)):
            out.append(occ.node)
    return out


def _own_anti(gang: Gang, role: Role, snapshot: Snapshot, blocks: Blocks,
              rules: list[Rule], caps: dict[str, tuple[int, str]]) -> None:
    ns_labels = snapshot.namespace_labels(gang.namespace)
    for term in role.requirements.constraints.anti_affinity:
        desc = term.describe()
        hit = _values_of(snapshot, term.topology_key, _matching_running(snapshot, term, False))
        if hit:
            blocks.block(_in_values(snapshot, term.topology_key, hit),
                         f"anti-affinity {desc}: a running pod it selects is there", True)
        in_ns = gang.namespace in term.namespaces or term.namespace_selector.matches(ns_labels)
        matching = frozenset(r.name for r in gang.roles
                             if r.count > 0 and in_ns and _maybe(r, term.selector))
        if not matching:
            continue
        dom = domains(snapshot, term.topology_key)
        # Every node in a domain of its own: "one member per domain" is a cap of one per node.
        # (A node without the key is in no domain and takes any number.)
        if matching == {role.name} and len(dom) == len(snapshot.node_names) and len(
                set(dom.values())) == len(dom):
            caps[role.name] = (1, f"anti-affinity {desc}")
            continue
        rules.append(AntiRule(role.name, matching, desc, dom))


@dataclass(frozen=True, slots=True)
class _Affinity:
    """A role's required affinity terms against this snapshot."""

    role: Role
    terms: tuple[PodAffinityTerm, ...]
    describe: str
    domain_of: Mapping[str, tuple[str, ...]]  # node -> its values of the terms' keys
    fixed: frozenset[tuple[str, ...]]  # domains running pods matching all the terms satisfy
    #: Some running pod matching all the terms is on a node with one of the terms' keys
    #: (kube-scheduler's affinity counts are not empty: no "first pod" exception).
    counted: bool
    namespace_labels: Mapping[str, str]

    def selects(self, gang: Gang, r: Role) -> bool:
        """Does every term select *r*'s members?"""
        return all((gang.namespace in t.namespaces
                    or t.namespace_selector.matches(self.namespace_labels))
                   and _surely(r, t.selector) for t in self.terms)

    @property
    def bootstraps(self) -> bool:
        """No running pod counts: the first member goes anywhere if it selects itself."""
        return not self.counted


def _own_affinity(gang: Gang, role: Role, snapshot: Snapshot, blocks: Blocks) -> _Affinity | None:
    """The role's affinity terms; nodes lacking a term's key are ruled out at once."""
    terms = role.requirements.constraints.affinity
    if not terms:
        return None
    desc = " and ".join(t.describe() for t in terms)
    keys = tuple(sorted({t.topology_key for t in terms}))

    def composite() -> dict[str, tuple[str, ...]]:
        per_key = [domains(snapshot, k) for k in keys]
        return {n: tuple(d[n] for d in per_key) for n in snapshot.node_names
                if all(n in d for d in per_key)}

    domain_of = snapshot.index.slots.get_or_make(COMPOSITE, keys, composite)
    if len(domain_of) < len(snapshot.node_names):
        blocks.block(set(snapshot.node_names) - set(domain_of),
                     f"affinity {desc}: the node lacks the topology key")
    # Running pods each matching *all* the terms (kube-scheduler's affinityCounts count a
    # pod only if it matches every term: two pods on one node, each matching one, do not).
    holders = {occ.node for occ in snapshot.pods.matching(terms[0].selector)
               if all(_surely_selects(snapshot, t, occ) for t in terms)}
    # kube-scheduler counts such a pod per (key, value) of each term whose key its node has,
    # and admits a node whose value of *every* key has a count: the values may come from
    # different pods, and a pod on a node lacking some key still counts for the others.
    present = [_values_of(snapshot, k, holders) for k in keys]
    fixed = frozenset(d for d in set(domain_of.values())
                      if all(v in values for v, values in zip(d, present, strict=True))
                      ) if all(present) else frozenset()
    return _Affinity(role, terms, desc, domain_of, fixed, any(present),
                     snapshot.namespace_labels(gang.namespace))


def _affinity_rules(gang: Gang, affinities: list[_Affinity], order: tuple[str, ...],
                    rules: list[Rule], blocked: dict[str, Blocks]) -> str:
    """Rules sound for binding in ``order``: a role's members go where running pods match
    (``fixed``) or where a member of an earlier role its terms select is (its anchors);
    with neither, it must select itself and its members share the first one's domain.
    Returns why a role can do none of that ("" if all can)."""
    roles = {r.name: r for r in gang.roles}
    position = {name: i for i, name in enumerate(order)}
    for a in affinities:
        anchors = frozenset(name for name in order[:position[a.role.name]]
                            if roles[name].required > 0 and a.selects(gang, roles[name]))
        if not anchors and a.counted:
            # Running pods count, so there is no "first pod" exception, even when they sit
            # where no node has all the keys (then ``fixed`` is empty: no node is left).
            blocked[a.role.name].block(
                (n for n, d in a.domain_of.items() if d not in a.fixed),
                f"affinity {a.describe}: no running pod it selects is in the node's domain")
        elif not anchors and not a.selects(gang, a.role):
            return (f"role {a.role.name}: pod affinity {a.describe}: no running pod matches it "
                    "and the gang's members do not match it themselves")
        else:
            rules.append(AffinityRule(a.role.name, anchors, a.describe, a.domain_of, a.fixed))
    return ""


def _spread(role: Role, snapshot: Snapshot, blocks: Blocks,
            spreads: list[tuple[Role, SpreadConstraint, tuple[str, ...]]]) -> None:
    required = role.requirements.constraints.required_spread
    if not required:
        return
    keys = frozenset(c.topology_key for c in required)
    keyed = snapshot.index.slots.get_or_make(KEYED, keys, lambda: tuple(
        n for n in snapshot.node_names if keys <= snapshot.nodes[n].labels.keys()))
    missing = snapshot.index.slots.get_or_make(UNKEYED, keys, lambda: frozenset(
        snapshot.node_names) - frozenset(keyed))
    blocks.block(missing, f"topology spread: the node lacks {', '.join(sorted(keys))}")
    spreads.extend((role, c, keyed) for c in required)


def _spread_rule(gang: Gang, role: Role, snapshot: Snapshot, c: SpreadConstraint,
                 keyed: tuple[str, ...], before: Collection[str]) -> SpreadRule:
    """The rule for one constraint; members of the roles in *before* (bound before this
    role's, in the gang's binding order) and its own are counted, later ones are not: a pod
    bound later does not make an earlier bind invalid (IgnoredDuringExecution)."""
    req = role.requirements

    def counted() -> dict[str, str]:
        dom = domains(snapshot, c.topology_key)
        return {n: dom[n] for n in keyed
                if (c.node_affinity_policy == "Ignore" or req.selects(snapshot.nodes[n]))
                and (c.node_taints_policy == "Ignore"
                     or req.untolerated_taint(snapshot.nodes[n]) is None)}

    domain_of = snapshot.index.slots.get_or_make(
        SPREAD_NODES, (selection_key(req), c.topology_key, c.node_affinity_policy,
                       c.node_taints_policy, keyed), counted)
    existing = dict.fromkeys(sorted(set(domain_of.values())), 0)
    if not c.selector.empty:
        for occ in snapshot.pods.matching(c.selector):
            if (occ.namespace == gang.namespace and not occ.terminating
                    and occ.node in domain_of and occ.surely_matches(c.selector)):
                existing[domain_of[occ.node]] += occ.count
    matching = frozenset(r.name for r in gang.roles if r.count > 0 and not c.selector.empty
                         and (r.name in before or r.name == role.name)
                         and _surely(r, c.selector))
    return SpreadRule(role.name, matching, c.describe(), c.max_skew, c.min_domains,
                      domain_of, existing)


def _ports(role: Role, snapshot: Snapshot, blocks: Blocks,
           caps: dict[str, tuple[int, str]]) -> None:
    ports = role.requirements.constraints.host_ports
    if not ports:
        return
    caps.setdefault(role.name, (1, f"host port {ports[0]}"))  # two members, one port
    blocks.block(host_ports.blocked_nodes(role, snapshot), f"host port {ports[0]} in use", True)


def _order(gang: Gang, affinities: Sequence[_Affinity]) -> tuple[str, ...]:
    """The order the members are bound in, which the rules are stated for: first roles
    whose affinity only they themselves can satisfy (they go anywhere), then roles free of
    affinity (they can anchor the rest), then roles with affinity that running pods
    satisfy somewhere, then roles needing an anchor; within each, roles with a spread
    constraint first (later matching pods do not count against them), then the gang's
    order."""
    kind = {a.role.name: (0 if a.selects(gang, a.role) else 3) if a.bootstraps else 2
            for a in affinities}
    names = [r for r in gang.roles if r.count > 0]
    ranked = sorted(range(len(names)), key=lambda i: (
        kind.get(names[i].name, 1), not names[i].requirements.constraints.required_spread, i))
    return tuple(names[i].name for i in ranked)


def context_key(gang: Gang, snapshot: Snapshot) -> tuple[object, ...]:
    """What a placement depends on besides the roles' requirements: nothing for most
    gangs; the namespace and the members' labels when constraints (theirs, or running pods'
    anti-affinity) can read them, and the claims made for its pods from templates. Two
    gangs equal in shape and in this place alike."""
    if not gang.constrained and not snapshot.pods.has_anti_affinity:
        return ()
    # The claims made for its pods from templates are each pod's own (``device_claims``).
    made = tuple(p.claims for r in gang.roles if r.requirements.constraints.device_claims
                 for p in r.pods)
    return (gang.namespace, tuple((r.labels, r.mixed_labels) for r in gang.roles), made)


def compile_terms(gang: Gang, snapshot: Snapshot) -> Terms:
    """The gang's constraints against *snapshot* (``NO_TERMS`` when it has none)."""
    own = any(not r.requirements.constraints.empty or r.requirements.preferred_terms
              for r in gang.roles)
    if not own and not snapshot.pods.has_anti_affinity:
        return NO_TERMS
    limits: dict[str, RoleLimits] = {}
    rules: list[Rule] = []
    caps: dict[str, tuple[int, str]] = {}
    impossible: tuple[UnplaceableReason, str] | None = None
    affinities: list[_Affinity] = []
    spreads: list[tuple[Role, SpreadConstraint, tuple[str, ...]]] = []
    blocked: dict[str, Blocks] = {}
    devices = device_terms.compile_devices(gang, snapshot)
    for role in gang.roles:
        if role.count <= 0:
            continue
        blocks = blocked[role.name] = (devices.blocked.get(role.name, Blocks())
                                       if devices is not None else Blocks())
        if snapshot.pods.has_anti_affinity:
            _existing_anti(gang, role, snapshot, blocks)
        _own_anti(gang, role, snapshot, blocks, rules, caps)
        affinity = _own_affinity(gang, role, snapshot, blocks)
        if affinity is not None:
            affinities.append(affinity)
        _spread(role, snapshot, blocks, spreads)
        _ports(role, snapshot, blocks, caps)
    order = _order(gang, affinities)
    for role, c, keyed in spreads:
        rules.append(_spread_rule(gang, role, snapshot, c, keyed,
                                  order[:order.index(role.name)]))
    unsatisfiable = _affinity_rules(gang, affinities, order, rules, blocked)
    if unsatisfiable:
        impossible = (UnplaceableReason.NO_ELIGIBLE_NODES, unsatisfiable)
    for role in gang.roles:
        if role.count <= 0:
            continue
        blocks = blocked[role.name]
        score = static_scores(gang, role, snapshot)
        if blocks.nodes or role.name in caps or score:
            cap, cap_why = caps.get(role.name, (0, ""))
            limits[role.name] = RoleLimits(
                frozenset(blocks.nodes), tuple(blocks.why.most_common()), blocks.by_running,
                blocks.by_devices, cap, cap_why, score)
    rules.extend(host_ports.PortRule(roles) for roles in host_ports.conflicting_roles(gang))
    claims = claim_terms.compile_claims(gang, snapshot)
    if claims is not None:
        limits = claims.restrict(limits)
        rules.extend(claims.rules)
        if claims.impossible and impossible is None:
            impossible = (UnplaceableReason.VOLUMES, claims.impossible)
    rule = None
    if devices is not None:
        if devices.impossible:
            impossible = (UnplaceableReason.DEVICE_CLAIMS, devices.impossible)
        rule = devices.rule
        if rule is not None:
            rules.append(rule)
    if not limits and not rules and impossible is None and claims is None:
        return NO_TERMS
    return Terms(limits, tuple(rules), order, impossible, claims, rule)
