"""Soft preferences as node scores: what kube-scheduler's scoring plugins prefer.

Preferred node affinity (NodeAffinity, weight 2), preferred pod affinity and anti-affinity
towards running pods (InterPodAffinity, weight 2) and untolerated ``PreferNoSchedule``
taints (TaintToleration, weight 3), each normalised to 0..100 over the nodes as
kube-scheduler normalises them. Placement uses the sum before its own packing order, so a
preference decides between nodes that are otherwise equally good or better; it never makes
a node eligible or ineligible. Preferences among the gang's own members and
``ScheduleAnyway`` spread are scored as members are placed (``constrained``).
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.kit.memo import Slot
from scheduler.model import Gang, Role, TaintEffect
from scheduler.world.snapshot import Snapshot

NODE_AFFINITY_WEIGHT = 2
POD_AFFINITY_WEIGHT = 2
TAINT_WEIGHT = 3


def _normalised(raw: Mapping[str, int], reverse: bool = False) -> dict[str, int]:
    """kube-scheduler's ``DefaultNormalizeScore`` (max -> 100) or min-max for signed scores."""
    if not raw:
        return {}
    low, high = min(raw.values()), max(raw.values())
    if high == low:
        return {n: 0 for n in raw} if not reverse else {n: 100 for n in raw}
    if low >= 0 and not reverse:
        return {n: 100 * v // high for n, v in raw.items()}
    span = high - low
    if reverse:
        return {n: 100 * (high - v) // span for n, v in raw.items()}
    return {n: 100 * (v - low) // span for n, v in raw.items()}


def _pod_preferences(gang: Gang, role: Role, snapshot: Snapshot) -> dict[str, int]:
    c = role.requirements.constraints
    weighted = [(w.weight, w.term) for w in c.preferred_affinity]
    weighted += [(-w.weight, w.term) for w in c.preferred_anti_affinity]
    if not weighted:
        return {}
    raw: dict[str, int] = dict.fromkeys(snapshot.node_names, 0)
    nodes = snapshot.nodes
    for weight, term in weighted:
        per_value: dict[str, int] = {}
        for occ in snapshot.pods.matching(term.selector):
            if not term.matches(occ.namespace, occ.labels,
                                snapshot.namespace_labels(occ.namespace)):
                continue
            value = nodes[occ.node].labels.get(term.topology_key) if occ.node in nodes else None
            if value is not None:
                per_value[value] = per_value.get(value, 0) + occ.count
        if per_value:
            for n in snapshot.node_names:
                v = nodes[n].labels.get(term.topology_key)
                if v in per_value:
                    raw[n] += weight * per_value[v]
    return _normalised(raw) if any(raw.values()) else {}


def static_scores(gang: Gang, role: Role, snapshot: Snapshot) -> dict[str, int]:
    """Node -> preference of *role*'s members (empty when nothing is preferred)."""
    req = role.requirements
    total: dict[str, int] = {}
    if req.preferred_terms:
        raw = {n: req.preference(snapshot.nodes[n]) for n in snapshot.node_names}
        for n, v in _normalised(raw).items():
            total[n] = total.get(n, 0) + NODE_AFFINITY_WEIGHT * v
    for n, v in _pod_preferences(gang, role, snapshot).items():
        total[n] = total.get(n, 0) + POD_AFFINITY_WEIGHT * v
    soft = {n: sum(1 for t in snapshot.nodes[n].taints
                   if t.effect is TaintEffect.PREFER_NO_SCHEDULE and not req.tolerates(t))
            for n in _soft_tainted(snapshot)}
    if soft:
        raw = dict.fromkeys(snapshot.node_names, 0) | soft
        for n, v in _normalised(raw, reverse=True).items():
            total[n] = total.get(n, 0) + TAINT_WEIGHT * v
    return total if any(total.values()) and len(set(total.values())) > 1 else {}


def _soft_tainted(snapshot: Snapshot) -> tuple[str, ...]:
    """Nodes with a PreferNoSchedule taint (kept in the node index)."""
    return snapshot.index.slots.get_or_make(SOFT_TAINTED, None, lambda: tuple(
        n for n in snapshot.node_names
        if any(t.effect is TaintEffect.PREFER_NO_SCHEDULE for t in snapshot.nodes[n].taints)))


#: Nodes with a PreferNoSchedule taint (kept in the node index).
SOFT_TAINTED: Slot[None, tuple[str, ...]] = Slot("scores.soft_tainted")
