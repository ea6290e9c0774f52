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

from dataclasses import dataclass

from scheduler.model.gangs import Gang
from scheduler.model.node_groups import NodeGroup

#: The autoscaler's class for "all of these nodes or none" (cluster-autoscaler 1.30+).
ATOMIC_SCALE_UP_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"


@dataclass(frozen=True, slots=True)
class PodSet:
    """``count`` members alike: one role, the unit a ProvisioningRequest names a template for."""

    role: str
    count: int


@dataclass(frozen=True, slots=True)
class ScaleUp:
    """Ask ``group`` for ``nodes`` new nodes that take the whole gang ``gang_id``."""

    gang_id: str
    group: str
    nodes: int
    pod_sets: tuple[PodSet, ...]
    class_name: str = ATOMIC_SCALE_UP_CLASS

    @property
    def message(self) -> str:
        """What the gang's pending reason says while the nodes are being added."""
        noun = "node" if self.nodes == 1 else "nodes"
        return f"waiting for {self.nodes} new {noun} of node group {self.group} (autoscaler)"


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
    pod_sets = tuple(PodSet(role.name, role.required) for role in gang.roles if role.required)
    return ScaleUp(gang.id, best[1].name, best[0], pod_sets)
