"""The "provision" step: ask the autoscaler for a whole gang's nodes, or say why not.

A gang that fits no current node would wait forever in a pool that is scaled down to nothing.
Where its pool has a node group the cluster-autoscaler may grow, the scheduler can instead ask
for the nodes of the whole gang at once (a ProvisioningRequest of class
``best-effort-atomic-scale-up``: all of them or none, so no partial scale-up strands GPUs). The
decision is pure: which group, how many nodes and which pod sets, or a reason a person can act
on when no group can take the gang. Writing the request and reading its conditions back are the
edge's (``scheduler.kube.write``); placing the gang once its nodes are Ready is the usual cycle.

The node count is a bound, not a packing: members of one role are packed onto identical new
nodes, roles never share a node. The autoscaler does its own simulation before it adds nodes;
this count only decides whether asking can succeed (within the group's ``headroom``) and lets
the pending reason say how many nodes are coming.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from scheduler.decide.plan import Bind, PendingReason, PodSet, ReasonCategory, ScaleUp
from scheduler.model.gangs import Gang
from scheduler.model.node_groups import NodeGroup, ProvisioningState, Stage


@dataclass(frozen=True, slots=True)
class NoScaleUp:
    """No node group can take the gang: why, for its pending reason."""

    gang_id: str
    message: str


def takes(group: NodeGroup, gang: Gang) -> bool:
    """Would every role's pods be allowed on a new node of *group* (selectors, required
    affinity, taints), capacity aside? The same rule as for an existing node."""
    return all(role.requirements.allows(group.template) for role in gang.roles)


def nodes_for(gang: Gang, group: NodeGroup) -> int | None:
    """New nodes of *group* that the gang's required members need, or None if a member does
    not fit on even an empty node of the group."""
    total = 0
    for role in gang.roles:
        if role.required == 0:
            continue
        per_node = role.requests.copies_in(group.template.allocatable)
        if per_node == 0:
            return None
        total += -(-role.required // per_node)
    return total


def plan_scale_up(gang: Gang, groups: tuple[NodeGroup, ...]) -> ScaleUp | NoScaleUp:
    """The scale-up for *gang*: of the groups whose new nodes its pods may use, the one that
    needs the fewest new nodes (then by name, so the choice is stable), or a reason naming
    each group's miss.

    Call only for a gang that fits no current node: this step does not look at them."""
    candidates = sorted((g for g in groups if takes(g, gang)), key=lambda g: g.name)
    if not candidates:
        return NoScaleUp(gang.id, "no node group the autoscaler can grow takes its pods "
                                  "(node selector, affinity or taints)")
    best: tuple[int, NodeGroup] | None = None
    too_big: list[str] = []
    for group in candidates:
        needed = nodes_for(gang, group)
        if needed is None:
            too_big.append(f"a member does not fit on one node of group {group.name}")
        elif needed > group.headroom:
            too_big.append(f"group {group.name} can add {group.headroom} of the {needed} "
                           f"nodes needed (max size {group.max_size})")
        elif best is None or needed < best[0]:
            best = (needed, group)
    if best is None:
        return NoScaleUp(gang.id, "no node group can add the whole gang: " + "; ".join(too_big))
    pod_sets = tuple(PodSet(role.name, role.required, role.pods[0] if role.pods else None)
                     for role in gang.roles if role.required)
    return ScaleUp(gang.id, best[1].name, best[0], pod_sets)


@dataclass(frozen=True, slots=True)
class ScaleUps:
    """What the provision step adds to a cycle's plan: the requests to keep (create if absent)
    and the pending reasons it rewrites."""

    requests: tuple[ScaleUp, ...] = ()
    pending: Mapping[str, PendingReason] | None = None  # None: unchanged
    #: Pending gangs a group of an enabled pool would take but that have no request: whatever
    #: they wait for (quota, a group too small), the autoscaler must not add nodes for their
    #: pods one by one (its scale-up for unschedulable pods knows no gangs).
    held: tuple[str, ...] = ()


def provision(gangs: Iterable[Gang], pending: Mapping[str, PendingReason],
              groups: tuple[NodeGroup, ...], pools: frozenset[str],
              asked: Mapping[str, ProvisioningState]) -> ScaleUps:
    """Scale-ups for the gangs left pending for want of room (``PLACEMENT``) whose pods a node
    group of a pool in *pools* would take; *asked*: the state of the requests made earlier.

    A gang already asked for keeps its request while the autoscaler tries, and its reason
    quotes the autoscaler's words; a failed request is not asked again (the reason says why, and
    deleting the request is how a person retries); an expired one is asked again. Gangs in no
    such pool keep their reason: with no pools (the default) nothing changes."""
    enabled = tuple(g for g in groups if g.pool in pools)
    if not enabled:
        return ScaleUps()
    requests: list[ScaleUp] = []
    held: list[str] = []
    reasons = dict(pending)
    for gang in sorted(gangs, key=lambda g: g.id):
        reason = pending.get(gang.id)
        if reason is None:
            continue
        usable = tuple(g for g in enabled if takes(g, gang))
        if not usable:
            continue
        if reason.category is not ReasonCategory.PLACEMENT:
            held.append(gang.id)
            continue
        state = asked.get(gang.id)
        plan = plan_scale_up(gang, usable)
        if state is not None and state.stage is not Stage.EXPIRED:
            said = _STAGE_WORDS[state.stage]
            note = f"{said}: {state.message}" if state.message else said
            if state.stage is not Stage.FAILED and isinstance(plan, ScaleUp):
                requests.append(plan)
        else:
            note = plan.message
            if isinstance(plan, ScaleUp):
                requests.append(plan)
        reasons[gang.id] = replace(reason, message=f"{reason.message}; {note}")
        if not requests or requests[-1].gang_id != gang.id:
            held.append(gang.id)
    return ScaleUps(tuple(requests), reasons, tuple(held))


#: How the reason introduces the autoscaler's answer to a request made earlier.
_STAGE_WORDS = {
    Stage.ASKED: "asked the autoscaler for new nodes, no answer yet",
    Stage.PROVISIONED: "the autoscaler is adding its nodes",
    Stage.NOT_FOUND: "the autoscaler cannot add its nodes yet",
    Stage.FAILED: "the autoscaler gave up on its nodes",
}


def guard_from_scale_down(binds: Iterable[Bind], sizes: Mapping[str, int],
                          pool_of: Callable[[str], str], pools: frozenset[str]
                          ) -> tuple[Bind, ...]:
    """*binds*, those of gangs of more than one member (by gang id in *sizes*) placed on a
    node of a pool in *pools* marked ``keep_from_scale_down``.

    The cluster-autoscaler's scale-down drains an underused node by evicting its pods to
    repack them elsewhere; it knows no gangs, so it would take one member of a running gang
    away and stall the others (an all-reduce waits for it forever). Its per-pod opt-out
    (``safe-to-evict: "false"``) keeps that node. Only pools that may scale up are marked:
    the autoscaler runs where the policy lets the scheduler ask it for nodes, and elsewhere
    the mark would be one more write per member for nothing. Every member of an elastic gang
    is marked, its optional ones too: evicting one of those is survivable, but a gang's
    collective still stalls until it notices, and a node kept is cheaper than a stalled job.
    A lone pod is left to the autoscaler: moving it breaks nothing but itself."""
    if not pools:
        return tuple(binds)
    return tuple(
        replace(b, keep_from_scale_down=True)
        if sizes.get(b.gang_id, 0) > 1
        and any(pool_of(a.node) in pools for a in b.placement.assignments)
        else b for b in binds)
