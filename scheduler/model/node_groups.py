"""Node groups an autoscaler can grow: a template of the node it adds, and how many more.

The cluster-autoscaler's ProvisioningRequest (class ``best-effort-atomic-scale-up``) adds the
nodes for a whole gang or none, so gang-scheduler only has to choose *whether* to ask and in which
group: a gang that fits no current node, whose pods a new node of the group would take. A
``NodeGroup`` is that group as the decision sees it: its template is an ordinary ``Node`` (labels,
taints, allocatable with its ``pods`` slots, pool), so whether a pod may use a new node is the
same rule as for a node that exists (``PodRequirements.allows``). It is built from the
autoscaler's configuration at the edge; nothing here knows where it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from scheduler.model.nodes import Node


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """One group of identical nodes: ``size`` exist now and it may grow to ``max_size``."""

    name: str
    template: Node  # a node the group adds, as the autoscaler's template describes it
    size: int
    max_size: int

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("node group: name is empty")
        if self.size < 0:
            raise ValueError(f"node group {self.name}: size {self.size} is negative")
        if self.max_size < self.size:
            raise ValueError(f"node group {self.name}: max_size {self.max_size} is below "
                             f"its size {self.size}")

    @property
    def pool(self) -> str:
        return self.template.pool

    @property
    def headroom(self) -> int:
        """How many nodes the autoscaler may still add to this group."""
        return self.max_size - self.size


class Stage(StrEnum):
    """Where a gang's ProvisioningRequest stands (``scheduler.kube.read.provisioning_state``)."""

    ASKED = "Asked"  # no answer yet
    PROVISIONED = "Provisioned"
    NOT_FOUND = "NotFound"  # Provisioned=False: the autoscaler keeps trying
    FAILED = "Failed"
    EXPIRED = "Expired"  # BookingExpired or CapacityRevoked: ask again


@dataclass(frozen=True, slots=True)
class ProvisioningState:
    """A gang's request as the autoscaler last answered it: what the decision reads."""

    stage: Stage
    message: str = ""  # the deciding condition's message
