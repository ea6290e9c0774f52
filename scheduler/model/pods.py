"""What a pod needs from a node: resources, node selection and taint tolerations.

Node eligibility follows kube-scheduler's NodeAffinity, NodeUnschedulable and TaintToleration
filters: a cordoned node takes pods that tolerate ``node.kubernetes.io/unschedulable``, and
a node whose Ready condition is not True is treated as carrying the
``node.kubernetes.io/not-ready:NoSchedule`` taint the node lifecycle controller gives it
(kube-scheduler itself reads only the taint; the controller adds it within seconds).
What a pod asks of other pods and of volumes is in ``constraints`` (``model.constraints``).

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

from scheduler.model.constraints import NO_CONSTRAINTS, PodConstraints
from scheduler.model.nodes import Node, Taint, TaintEffect
from scheduler.model.numerals import parse_int
from scheduler.model.resources import PODS, Resources

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", TaintEffect.NO_SCHEDULE)
NOT_READY_TAINT = Taint("node.kubernetes.io/not-ready", "", TaintEffect.NO_SCHEDULE)
#: The only field a node selector term's ``matchFields`` may name.
NODE_NAME_FIELD = "metadata.name"


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
            have, want = parse_int(value or ""), parse_int(self.values[0])
        except (ValueError, IndexError):
            return False
        return have > want if op is SelectorOperator.GT else have < want

    def describe(self) -> str:
        if self.operator in (SelectorOperator.EXISTS, SelectorOperator.DOES_NOT_EXIST):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} ({', '.join(self.values)})"


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """All requirements must be met (AND); an empty term matches nothing, as in Kubernetes.

    ``match_fields`` can only name ``metadata.name`` (the node's name), as the API allows.
    """

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str], node_name: str = "") -> bool:
        exprs, fields = self.match_expressions, self.match_fields
        if not exprs and not fields:
            return False
        if fields and not all(f.matches({NODE_NAME_FIELD: node_name}) for f in fields):
            return False
        return all(r.matches(labels) for r in exprs)

    def describe(self) -> str:
        parts = [r.describe() for r in self.match_expressions]
        parts += [f"node name {r.operator} ({', '.join(r.values)})" for r in self.match_fields]
        return " and ".join(parts)


@dataclass(frozen=True, slots=True)
class PreferredNodeTerm:
    """A ``preferredDuringSchedulingIgnoredDuringExecution`` node affinity term."""

    weight: int
    term: NodeSelectorTerm


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
        # Lt / Gt are alpha (TaintTolerationComparisonOperators, off by default): no match.
        # (An empty key with Equal never passes API validation.)
        return self.operator in ("", "Equal") and bool(self.key) and self.value == taint.value


@dataclass(frozen=True, slots=True)
class PodRequirements:
    """Everything about one pod that decides which nodes it may use and how much it takes."""

    requests: Resources
    node_selector: Mapping[str, str] = field(default_factory=dict)
    #: Required node affinity terms, OR'ed; empty means no constraint.
    affinity_terms: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    #: Preferred node affinity (a score, never a filter).
    preferred_terms: tuple[PreferredNodeTerm, ...] = ()
    #: Inter-pod affinity, topology spread, host ports, volumes, unsupported fields.
    constraints: PodConstraints = NO_CONSTRAINTS
    #: The hash and ``effective_requests``, worked out on first use: requirements key the
    #: eligibility and shape memos, so they are hashed on every look-up (not fields).
    _hash: int | None = field(default=None, init=False, compare=False, repr=False)
    _effective: Resources | None = field(default=None, init=False, compare=False, repr=False)

    def __hash__(self) -> int:
        known = self._hash
        if known is None:
            known = hash((self.requests, tuple(sorted(self.node_selector.items())),
                          self.affinity_terms, self.tolerations, self.preferred_terms,
                          self.constraints))
            object.__setattr__(self, "_hash", known)
        return known

    @property
    def effective_requests(self) -> Resources:
        """Requests including the one ``pods`` slot the pod takes on its node."""
        known = self._effective
        if known is None:
            known = self.requests + {PODS: 1}
            object.__setattr__(self, "_effective", known)
        return known

    def tolerates(self, taint: Taint) -> bool:
        return any(t.tolerates(taint) for t in self.tolerations)

    def untolerated_taint(self, node: Node) -> Taint | None:
        """The first NoSchedule/NoExecute taint of *node* this pod does not tolerate
        (including the not-ready taint a node that is not Ready carries)."""
        for taint in node.taints:
            if taint.effect is TaintEffect.PREFER_NO_SCHEDULE:
                continue
            if not self.tolerates(taint):
                return taint
        if not node.ready and not self.tolerates(NOT_READY_TAINT):
            return NOT_READY_TAINT
        return None

    def selects(self, node: Node) -> bool:
        """nodeSelector and required node affinity, ignoring taints and capacity."""
        labels = node.labels
        if any(labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        return not self.affinity_terms or any(t.matches(labels, node.name)
                                              for t in self.affinity_terms)

    def cordon_allows(self, node: Node) -> bool:
        """NodeUnschedulable: a cordoned node only takes pods tolerating its taint."""
        return not node.unschedulable or self.tolerates(UNSCHEDULABLE_TAINT)

    def allows(self, node: Node) -> bool:
        """May this pod run on *node* at all (capacity and other pods aside)?"""
        return (self.cordon_allows(node) and self.selects(node)
                and self.untolerated_taint(node) is None)

    def preference(self, node: Node) -> int:
        """The summed weights of the preferred node affinity terms *node* matches."""
        return sum(p.weight for p in self.preferred_terms
                   if p.term.matches(node.labels, node.name))


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


def node_selector_term(raw: Mapping[str, Any], where: str) -> NodeSelectorTerm:
    """One ``nodeSelectorTerms`` entry (pods' node affinity, PVs' node affinity)."""
    exprs = tuple(_requirement(r, f"{where}.matchExpressions[{j}]")
                  for j, r in enumerate(raw.get("matchExpressions") or ()))
    fields = tuple(_requirement(r, f"{where}.matchFields[{j}]")
                   for j, r in enumerate(raw.get("matchFields") or ()))
    for j, f in enumerate(fields):
        if f.key != NODE_NAME_FIELD:
            raise ValueError(f"{where}.matchFields[{j}].key: only {NODE_NAME_FIELD} is a "
                             f"node field, got {f.key!r}")
    return NodeSelectorTerm(exprs, fields)


def requirements_from_pod_spec(spec: Mapping[str, Any]) -> PodRequirements:
    """Build ``PodRequirements`` from a pod's JSON spec (plain dicts, as the apiserver sends).

    Node-level fields only; ``scheduler.kube.read.podspec`` adds the ``constraints``.
    """
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = tuple(node_selector_term(term, f"spec.affinity.nodeAffinity.required."
                                           f"nodeSelectorTerms[{i}]")
                  for i, term in enumerate(required.get("nodeSelectorTerms") or ()))
    preferred: list[PreferredNodeTerm] = []
    for i, raw in enumerate(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
                            or ()):
        where = f"spec.affinity.nodeAffinity.preferred[{i}]"
        weight = raw.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise ValueError(f"{where}.weight: must be an integer in 1..100, got {weight!r}")
        preferred.append(PreferredNodeTerm(weight, node_selector_term(
            raw.get("preference") or {}, f"{where}.preference")))
    tolerations = tuple(_toleration(t, f"spec.tolerations[{i}]")
                        for i, t in enumerate(spec.get("tolerations") or ()))
    return PodRequirements(
        requests=requests_from_pod_spec(spec),
        node_selector=_selector(spec.get("nodeSelector"), "spec.nodeSelector"),
        affinity_terms=terms,
        tolerations=tolerations,
        preferred_terms=tuple(preferred),
    )


def describe_selector(req: PodRequirements) -> Sequence[str]:
    """Human fragments for reasons: ``nodeSelector pool=a100``, ``affinity gpu In (h100)``."""
    parts = [f"nodeSelector {k}={v}" for k, v in sorted(req.node_selector.items())]
    for term in req.affinity_terms:
        parts.append("affinity " + term.describe())
    return parts
