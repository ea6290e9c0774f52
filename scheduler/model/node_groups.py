"""Node groups an autoscaler can grow: what a new node of the group offers, and how many more.

The cluster-autoscaler's ProvisioningRequest (class ``best-effort-atomic-scale-up``) adds the
nodes for a whole gang or none, so gang-scheduler only has to choose *whether* to ask and in which
group: a gang that fits no current node, in a pool whose group could add enough nodes for all of
its members. A ``NodeGroup`` is that group as the decision sees it, built from the autoscaler's
configuration (its node template) at the edge; nothing here knows where it came from.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.model.resources import Resources


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """One group of identical nodes: ``size`` exist now and it may grow to ``max_size``."""

    name: str
    pool: str  # the pool its nodes join (the gangs' pool selector names it)
    #: What one new node offers pods: its template's allocatable, with its ``pods`` slots.
    node_allocatable: Resources
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
    def headroom(self) -> int:
        """How many nodes the autoscaler may still add to this group."""
        return self.max_size - self.size
