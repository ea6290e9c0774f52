"""What a pod needs from a node: resources, node selection and taint tolerations.

Requests follow Kubernetes' own rule (``resourcehelper.PodRequests``): app containers and
restartable ("sidecar") init containers are summed, each ordinary init container is maxed
against that sum plus the sidecars started before it, then ``spec.overhead`` is added.
Every pod also consumes one unit of the node's ``pods`` allocatable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from scheduler.model.nodes import Node, Taint, TaintEffect
from scheduler.resources import PODS, Resources


class SelectorOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


class PreemptionPolicy(StrEnum):
    """A pod's ``spec.preemptionPolicy`` (set from its PriorityClass at admission).

    ``Never``: the pod still goes ahead of lower-priority pods in the queue, but it never
    evicts anyone to make room (a "non-preempting" priority class).
    """

    PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
    NEVER = "Never"


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: SelectorOperator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op is SelectorOperator.EXISTS:
            return self.key in labels
        if op is SelectorOperator.DOES_NOT_EXIST:
            return self.key not in labels
        value = labels.get(self.key)
        if op is SelectorOperator.IN:
            return value is not None and value in self.values
        if op is SelectorOperator.NOT_IN:
            return value is None or value not in self.values
        # Gt / Lt compare integers; a missing or non-integer label never matches.
        try:
            have, want = int(value or ""), int(self.values[0])
        except (ValueError, IndexError):
            return False
        return have > want if op is SelectorOperator.GT else have < want

    def describe(self) -> str:
        if self.operator in (SelectorOperator.EXISTS, SelectorOperator.DOES_NOT_EXIST):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} ({', '.join(self.values)})"


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """All requirements must hold (AND); an empty term matches nothing, as in Kubernetes."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        exprs = self.match_expressions
        return bool(exprs) and all(r.matches(labels) for r in exprs)


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""  # empty with operator Exists tolerates every taint
    operator: str = "Equal"  # "Equal" | "Exists"
    value: str = ""
    effect: TaintEffect | None = None  # None tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return bool(self.key) and self.value == taint.value


@dataclass(frozen=True, slots=True)
class PodRequirements:
    """Everything about one pod that decides which nodes it may use and how much it takes."""

    requests: Resources
    node_selector: Mapping[str, str] = field(default_factory=dict)
    #: Required node affinity terms, OR'ed; empty means no constraint.
    affinity_terms: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    def __hash__(self) -> int:
        return hash((self.requests, tuple(sorted(self.node_selector.items())),
                     self.affinity_terms, self.tolerations))

    @property
    def effective_requests(self) -> Resources:
        """Requests including the one ``pods`` slot the pod takes on its node."""
        return self.requests + {PODS: 1}

    def untolerated_taint(self, node: Node) -> Taint | None:
        """The first NoSchedule/NoExecute taint of *node* this pod does not tolerate."""
        for taint in node.taints:
            if taint.effect is TaintEffect.PREFER_NO_SCHEDULE:
                continue
            if not any(t.tolerates(taint) for t in self.tolerations):
                return taint
        return None

    def selects(self, node: Node) -> bool:
        """nodeSelector and required node affinity, ignoring taints and capacity."""
        labels = node.labels
        if any(labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        return not self.affinity_terms or any(t.matches(labels) for t in self.affinity_terms)

    def allows(self, node: Node) -> bool:
        """May this pod run on *node* at all (capacity aside)?"""
        return (not node.unschedulable and node.ready and self.selects(node)
                and self.untolerated_taint(node) is None)


def _container_requests(container: Mapping[str, Any]) -> Resources:
    resources = container.get("resources") or {}
    # Kubernetes defaults requests to limits when only limits are set.
    quantities = dict(resources.get("limits") or {})
    quantities.update(resources.get("requests") or {})
    return Resources.parse(quantities)


def requests_from_pod_spec(spec: Mapping[str, Any]) -> Resources:
    """A pod's effective requests from its JSON ``spec`` (see module docstring)."""
    app = Resources()
    for c in spec.get("containers") or ():
        app = app + _container_requests(c)
    sidecars = Resources()
    init_peak = Resources()
    for c in spec.get("initContainers") or ():
        req = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            sidecars = sidecars + req
            init_peak = init_peak.max_with(sidecars)
        else:
            init_peak = init_peak.max_with(req + sidecars)
    total = (app + sidecars).max_with(init_peak)
    return total + Resources.parse(spec.get("overhead") or {})


def _requirement(raw: Mapping[str, Any], where: str) -> NodeSelectorRequirement:
    try:
        op = SelectorOperator(str(raw.get("operator")))
    except ValueError as exc:
        raise ValueError(f"{where}.operator: unknown operator {raw.get('operator')!r}") from exc
    values = tuple(str(v) for v in raw.get("values") or ())
    if op in (SelectorOperator.GT, SelectorOperator.LT) and len(values) != 1:
        raise ValueError(f"{where}.values: {op} needs exactly one integer value")
    return NodeSelectorRequirement(key=str(raw.get("key", "")), operator=op, values=values)


def _text(raw: Mapping[str, Any], key: str, where: str, default: str = "") -> str:
    value = raw.get(key)
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise ValueError(f"{where}.{key}: expected a string, got {value!r}")
    return value


def _selector(raw: Any, where: str) -> dict[str, str]:
    """A label selector map: string keys to string values, as the API defines it."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected an object of label values, got {raw!r}")
    bad = next((k for k, v in raw.items() if not isinstance(k, str) or not isinstance(v, str)),
               None)
    if bad is not None:
        raise ValueError(f"{where}.{bad}: expected a string value, got {raw[bad]!r}")
    return dict(raw)


def _toleration(raw: Any, where: str) -> Toleration:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected an object, got {raw!r}")
    key, value = _text(raw, "key", where), _text(raw, "value", where)
    operator = _text(raw, "operator", where, "Equal")
    if operator not in ("Equal", "Exists"):
        raise ValueError(f"{where}.operator: must be Equal or Exists, got {operator!r}")
    effect = _text(raw, "effect", where)
    try:
        parsed = TaintEffect(effect) if effect else None
    except ValueError:
        raise ValueError(f"{where}.effect: unknown effect {effect!r}") from None
    return Toleration(key=key, operator=operator, value=value, effect=parsed)


def requirements_from_pod_spec(spec: Mapping[str, Any]) -> PodRequirements:
    """Build ``PodRequirements`` from a pod's JSON spec (plain dicts, as the apiserver sends)."""
    terms: list[NodeSelectorTerm] = []
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for i, term in enumerate(required.get("nodeSelectorTerms") or ()):
        where = f"spec.affinity.nodeAffinity.required.nodeSelectorTerms[{i}]"
        exprs = tuple(_requirement(r, f"{where}.matchExpressions[{j}]")
                      for j, r in enumerate(term.get("matchExpressions") or ()))
        terms.append(NodeSelectorTerm(exprs))
    tolerations = tuple(_toleration(t, f"spec.tolerations[{i}]")
                        for i, t in enumerate(spec.get("tolerations") or ()))
    return PodRequirements(
        requests=requests_from_pod_spec(spec),
        node_selector=_selector(spec.get("nodeSelector"), "spec.nodeSelector"),
        affinity_terms=tuple(terms),
        tolerations=tolerations,
    )


def describe_selector(req: PodRequirements) -> Sequence[str]:
    """Human fragments for reasons: ``nodeSelector pool=a100``, ``affinity gpu In (h100)``."""
    parts = [f"nodeSelector {k}={v}" for k, v in sorted(req.node_selector.items())]
    for term in req.affinity_terms:
        parts.append("affinity " + " and ".join(r.describe() for r in term.match_expressions))
    return parts
