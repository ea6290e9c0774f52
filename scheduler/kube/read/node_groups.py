"""The node groups of the cluster-autoscaler's kwok cloud provider, as the provision step sees
them (``scheduler.model.node_groups.NodeGroup``).

The kwok provider describes each group by a template Node (its ``kwok-provider-config``
ConfigMap's templates, or nodes of the cluster) whose annotations give the group's name and its
size limits; the nodes it creates carry the group's name in the same annotation, which is how a
group's current size is counted here. The template's labels, taints and allocatable are the new
nodes', so gang-scheduler judges a group with the rules it applies to existing nodes. A template
is a node that will be Ready, whatever its own status says.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from scheduler.kube.read.convert import node_from_json
from scheduler.model.node_groups import NodeGroup
from scheduler.model.nodes import NodeLabelConfig

GROUP_NAME_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/name"
MAX_COUNT_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/max-count"
#: The kwok provider's maximum for a group whose template names none.
DEFAULT_MAX_COUNT = 200


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _count(template: str, annotations: Mapping[str, str], key: str, default: int) -> int:
    raw = annotations.get(key)
    if raw is None:
        return default
    if not raw.isdigit():
        raise ValueError(f"node group template {template}: metadata.annotations[{key}] must be "
                         f"a whole number >= 0, got {raw!r}")
    return int(raw)


def node_groups(templates: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]],
                label_config: NodeLabelConfig | None = None, *,
                group_label: str | None = None) -> tuple[NodeGroup, ...]:
    """One group per template, sized by the nodes that carry its name; sorted by name. The name
    is the template's *group_label* (the provider's ``nodegroups.fromNodeLabelKey``) when
    given, else its group-name annotation, else the template's own name. A bad count is refused
    naming the template and the annotation."""
    sizes = Counter(_annotations(n).get(GROUP_NAME_ANNOTATION) for n in nodes)
    groups = []
    for obj in templates:
        template = replace(node_from_json(obj, label_config), ready=True)
        notes = _annotations(obj)
        labelled = template.labels.get(group_label) if group_label else None
        name = labelled or notes.get(GROUP_NAME_ANNOTATION) or template.name
        max_size = _count(template.name, notes, MAX_COUNT_ANNOTATION, DEFAULT_MAX_COUNT)
        size = sizes.get(name, 0)
        # A group above its maximum (lowered since) may add nothing: headroom 0.
        groups.append(NodeGroup(name, template, size, max(size, max_size)))
    return tuple(sorted(groups, key=lambda g: g.name))
