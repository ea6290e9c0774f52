"""Why the rules coupling a gang's members cannot be met, in words a person can act on.

Checked before the search, so a gang that cannot be placed is told at once and by name:
members of a self-selecting anti-affinity need as many domains as members; members that
share one affinity domain need a domain that fits them all. Against allocatable first
(``NEVER_FITS``: no preemption helps), then against the free candidates (``POD_CONSTRAINTS``
when running pods rule nodes out, else ``INSUFFICIENT_CAPACITY``).
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.kit.memo import Slot
from scheduler.placement.affinity import AffinityRule, AntiRule
from scheduler.placement.candidates import Candidates
from scheduler.placement.device_terms import DeviceRule
from scheduler.placement.eligibility import Problem, RoleView
from scheduler.placement.types import Unplaceable, UnplaceableReason

#: (affinity rule's domains by identity, role view) -> the rule's domains (kept so the id is
#: not reused) and the most members one domain fits against allocatable (node index).
GROUPS: Slot[tuple[object, ...], tuple[object, int]] = Slot("diagnose.groups")

def _view(problem: Problem, role: str) -> RoleView | None:
    return next((rv for rv in problem.roles if rv.name == role), None)


def _now(rv: RoleView) -> UnplaceableReason:
    return (UnplaceableReason.POD_CONSTRAINTS if rv.limits.by_running
            else UnplaceableReason.INSUFFICIENT_CAPACITY)


def _fits(problem: Problem, rv: RoleView, nodes: Iterable[str]) -> int:
    """Members of *rv* the allocatable of *nodes* could take (per-node caps applied)."""
    allocatable = problem.snapshot.nodes
    total = 0
    for n in nodes:
        c = rv.request.copies_in(allocatable[n].allocatable)
        total += min(c, rv.limits.cap) if rv.limits.cap else c
    return total


def _anti(problem: Problem, cands: Candidates, rule: AntiRule) -> Unplaceable | None:
    rv = _view(problem, rule.owner)
    if rv is None or rule.owner not in rule.matching or not rv.required:
        return None
    gang, dom = problem.gang.id, rule.domain_of
    head = f"role {rv.name}: anti-affinity {rule.term}: {rv.required} members need " \
           f"{rv.required} domains"
    # Members on a node without the key are not kept apart: no conclusion then.
    if all(n in dom for n in rv.open):
        ever = {dom[n] for n in rv.open if _fits(problem, rv, (n,))}
        if len(ever) < rv.required:
            return Unplaceable(gang, UnplaceableReason.NEVER_FITS,
                               f"{head}, {len(ever)} eligible (never fits)")
    room = cands.caps[rv.name]
    if all(n in dom for n in room):
        now = {dom[n] for n in room}
        if len(now) < rv.required:
            return Unplaceable(gang, _now(rv), f"{head}, {len(now)} have room")
    return None


def _group(problem: Problem, cands: Candidates, rule: AffinityRule) -> Unplaceable | None:
    rv = _view(problem, rule.owner)
    if rv is None or not rv.required or rule.anchors:
        # With anchors, members go to any domain an anchor member is in: not one domain.
        return None
    by_domain: dict[tuple[str, ...], list[str]] = {}
    for n in rv.open:
        d = rule.domain_of.get(n)
        if d is not None:
            by_domain.setdefault(d, []).append(n)
    # Against allocatable: the same for every snapshot of the node index (kept in it; the
    # domains by identity, kept with the answer so that the id cannot be reused).
    slots = problem.snapshot.index.slots
    key = (id(rule.domain_of), rv.key, rv.request, rv.limits.cap, rv.open)
    best_ever = slots.kept_for(GROUPS, key, rule.domain_of, lambda _: max(
        (_fits(problem, rv, ns) for ns in by_domain.values()), default=0))
    what = f"role {rv.name}: affinity {rule.term}: all {rv.required} members in one domain"
    if best_ever < rv.required:
        return Unplaceable(problem.gang.id, UnplaceableReason.NEVER_FITS,
                           f"{what}; the largest holds {best_ever} (never fits)")
    caps = cands.caps[rv.name]
    best_now = max((sum(caps.get(n, 0) for n in ns) for ns in by_domain.values()), default=0)
    if best_now < rv.required:
        return Unplaceable(problem.gang.id, _now(rv),
                           f"{what}; the roomiest has room for {best_now} now")
    return None


def _devices(problem: Problem, cands: Candidates, rule: DeviceRule) -> Unplaceable | None:
    """A role whose nodes with room give devices to fewer members than it needs: each
    node's free devices against its members' claims alone (a bound: members of other roles
    take from the same devices), counted until enough are found."""
    for rv in problem.roles:
        if not rv.required or rv.name not in rule.members:
            continue
        found = 0
        short: tuple[str, int] | None = None  # a node with room that gives fewest
        for node, room in sorted(cands.caps.get(rv.name, {}).items()):
            got = rule.alone(rv.name, node, min(room, rv.required - found))
            if got < room and (short is None or got < short[1]):
                short = (node, got)
            found += got
            if found >= rv.required:
                break
        if found < rv.required:
            example = ""
            if short is not None:
                example = "; for example " + rule.why_not(rv.name, short[0], short[1] + 1)
            return Unplaceable(problem.gang.id, UnplaceableReason.DEVICES,
                               f"role {rv.name}: {rv.required} members need devices for "
                               f"their claims, the free devices of the nodes with room serve "
                               f"{found}{example}")
    return None


def rule_shortfall(problem: Problem, cands: Candidates) -> Unplaceable | None:
    """The first rule that cannot be met whatever the search does, or None."""
    for rule in problem.terms.rules:
        found = None
        if isinstance(rule, AntiRule):
            found = _anti(problem, cands, rule)
        elif isinstance(rule, AffinityRule):
            found = _group(problem, cands, rule)
        elif isinstance(rule, DeviceRule):
            found = _devices(problem, cands, rule)
        if found is not None:
            return found
    return None
