"""The domain model: resources, nodes, pod requirements and gangs (frozen values, no I/O).

Import the package and use qualified names (``model.Gang``); the submodules are split only
to keep each one readable.
"""

from scheduler.model.demand import Demand, gpus_of
from scheduler.model.gangs import (
    Gang,
    PodRef,
    Role,
    RunningGang,
    Tier,
    TopologyConstraint,
    TopologyMode,
)
from scheduler.model.nodes import (
    DEFAULT_POOL_LABEL,
    DEFAULT_TOPOLOGY_LABELS,
    GPU_PRODUCT_LABEL,
    HOSTNAME_LABEL,
    Node,
    NodeLabelConfig,
    Taint,
    TaintEffect,
)
from scheduler.model.pods import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodRequirements,
    SelectorOperator,
    Toleration,
    describe_selector,
    requests_from_pod_spec,
    requirements_from_pod_spec,
)
from scheduler.model.resources import GPU, Resources

__all__ = [
    "DEFAULT_POOL_LABEL", "DEFAULT_TOPOLOGY_LABELS", "GPU", "GPU_PRODUCT_LABEL", "HOSTNAME_LABEL",
    "Demand", "Gang", "Node", "NodeLabelConfig", "NodeSelectorRequirement", "NodeSelectorTerm",
    "PodRef", "PodRequirements", "Resources", "Role", "RunningGang", "SelectorOperator", "Taint",
    "TaintEffect", "Tier", "Toleration", "TopologyConstraint", "TopologyMode", "describe_selector",
    "gpus_of", "requests_from_pod_spec", "requirements_from_pod_spec",
]
