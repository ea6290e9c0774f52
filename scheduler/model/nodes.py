"""Nodes as the scheduler sees them: labels, taints, allocatable, pool and topology position.

The node pool and the topology position are derived from labels once, when the node enters
the cache, through a ``NodeLabelConfig``; the solver then works with plain strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from scheduler.model.resources import Resources

DEFAULT_POOL_LABEL = "gangscheduler.io/pool"
#: Outermost level first. ``kubernetes.io/hostname`` is always the innermost (host) level.
DEFAULT_TOPOLOGY_LABELS: tuple[str, ...] = (
    "topology.gangscheduler.io/block",
    "topology.gangscheduler.io/rack",
)
HOSTNAME_LABEL = "kubernetes.io/hostname"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: TaintEffect = TaintEffect.NO_SCHEDULE

    def __str__(self) -> str:
        if self.value:
            return f"{self.key}={self.value}:{self.effect}"
        return f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class NodeLabelConfig:
    """Which labels carry the node pool and the topology levels (outermost first)."""

    pool_label: str = DEFAULT_POOL_LABEL
    topology_labels: tuple[str, ...] = DEFAULT_TOPOLOGY_LABELS
    #: Labels tried, in order, when ``pool_label`` is absent (e.g. the GPU model).
    pool_fallback_labels: tuple[str, ...] = (GPU_PRODUCT_LABEL,)
    default_pool: str = "default"

    def pool_of(self, labels: Mapping[str, str]) -> str:
        for key in (self.pool_label, *self.pool_fallback_labels):
            if labels.get(key):
                return labels[key]
        return self.default_pool

    def topology_of(self, labels: Mapping[str, str], node_name: str) -> tuple[str, ...]:
        """Domain names per level, outermost first, made globally unique by prefixing parents.

        A node without a label at some level gets its own singleton domain at that level, so
        a "within one rack" constraint never lumps unlabelled nodes together.
        """
        path: list[str] = []
        for key in self.topology_labels:
            value = labels.get(key) or f"<none:{node_name}>"
            path.append(f"{path[-1]}/{value}" if path else value)
        return tuple(path)


@dataclass(frozen=True, slots=True)
class Node:
    """A schedulable node: immutable, rebuilt by the cache when the Node object changes."""

    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    pool: str = "default"
    #: Topology domain per configured level, outermost first (see ``NodeLabelConfig``).
    topology: tuple[str, ...] = ()
    ready: bool = True

    def __hash__(self) -> int:
        return hash(self.name)

    @classmethod
    def build(
        cls,
        name: str,
        allocatable: Resources,
        labels: Mapping[str, str] | None = None,
        taints: tuple[Taint, ...] = (),
        unschedulable: bool = False,
        config: NodeLabelConfig | None = None,
        ready: bool = True,
    ) -> Node:
        """Make a node, deriving pool and topology from its labels."""
        config = config or NodeLabelConfig()
        labels = dict(labels or {})
        labels.setdefault(HOSTNAME_LABEL, name)
        return cls(
            name=name,
            allocatable=allocatable,
            labels=labels,
            taints=taints,
            unschedulable=unschedulable,
            pool=config.pool_of(labels),
            topology=config.topology_of(labels, name),
            ready=ready,
        )
