"""A pod's inter-pod, port and volume fields (JSON) -> ``model.constraints.PodConstraints``.

Resolved the way kube-scheduler resolves them before it filters: a term with neither
``namespaces`` nor ``namespaceSelector`` means the pod's own namespace; ``matchLabelKeys`` /
``mismatchLabelKeys`` are merged into the label selector with the pod's own values (the
apiserver does the same at creation, and merging twice changes nothing); spread defaults
``minDomains`` 1, ``nodeAffinityPolicy`` Honor, ``nodeTaintsPolicy`` Ignore.

Fields this scheduler does not evaluate are listed in ``unsupported`` (``path: why``); the
pod is then refused with that reason instead of being bound as if they were absent.
Malformed input raises ``ValueError("spec.<path>: <reason>")``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.kube.read.pod_claims import device_claim_uses
from scheduler.model.constraints import (
    ALL_HOST_IPS,
    ClaimUse,
    HostPort,
    InclusionPolicy,
    PodAffinityTerm,
    PodConstraints,
    SpreadConstraint,
    Unsatisfiable,
    WeightedPodAffinityTerm,
)
from scheduler.model.labels import NOTHING, LabelOp, LabelRequirement, LabelSelector

#: Volume types whose node conflicts or attach limits kube-scheduler evaluates and we do not.
UNSUPPORTED_VOLUMES = {
    "ephemeral": "generic ephemeral volumes (a claim per pod) are not evaluated",
    "gcePersistentDisk": "in-tree disk volumes (node disk conflicts) are not evaluated",
    "awsElasticBlockStore": "in-tree disk volumes (node disk conflicts) are not evaluated",
    "azureDisk": "in-tree disk volumes (attach limits) are not evaluated",
    "cinder": "in-tree disk volumes (attach limits) are not evaluated",
    "rbd": "in-tree disk volumes (node disk conflicts) are not evaluated",
    "iscsi": "in-tree disk volumes (node disk conflicts) are not evaluated",
    "vsphereVolume": "in-tree disk volumes (attach limits) are not evaluated",
    "portworxVolume": "in-tree disk volumes (attach limits) are not evaluated",
}


def _fail(path: str, reason: str) -> ValueError:
    return ValueError(f"{path}: {reason}")


def _obj(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _fail(path, f"expected an object, got {type(value).__name__}")
    return value


def _items(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail(path, f"expected a list, got {type(value).__name__}")
    return value


def _strings(value: Any, path: str) -> list[str]:
    out = _items(value, path)
    for i, v in enumerate(out):
        if not isinstance(v, str):
            raise _fail(f"{path}[{i}]", f"expected a string, got {v!r}")
    return out


def _int(value: Any, path: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
            high is not None and value > high):
        span = f"{low}..{high}" if high is not None else f">= {low}"
        raise _fail(path, f"must be an integer {span}, got {value!r}")
    return value


def label_selector(raw: Any, path: str) -> LabelSelector:
    """``metav1.LabelSelector``: nil matches nothing, ``{}`` everything."""
    if raw is None:
        return NOTHING
    raw = _obj(raw, path)
    reqs = [LabelRequirement(str(k), LabelOp.IN, (str(v),))
            for k, v in _obj(raw.get("matchLabels"), f"{path}.matchLabels").items()]
    for i, e in enumerate(_items(raw.get("matchExpressions"), f"{path}.matchExpressions")):
        where = f"{path}.matchExpressions[{i}]"
        e = _obj(e, where)
        key = e.get("key")
        if not isinstance(key, str) or not key:
            raise _fail(f"{where}.key", "missing")
        try:
            op = LabelOp(str(e.get("operator")))
        except ValueError:
            raise _fail(f"{where}.operator",
                        f"unknown operator {e.get('operator')!r} (In, NotIn, Exists, "
                        "DoesNotExist)") from None
        values = tuple(sorted(set(_strings(e.get("values"), f"{where}.values"))))
        if op in (LabelOp.IN, LabelOp.NOT_IN) and not values:
            raise _fail(f"{where}.values", f"{op} needs at least one value")
        if op in (LabelOp.EXISTS, LabelOp.DOES_NOT_EXIST) and values:
            raise _fail(f"{where}.values", f"{op} takes no values")
        reqs.append(LabelRequirement(key, op, values))
    return LabelSelector.of(reqs)


def _label_keys(raw: Mapping[str, Any], field: str, path: str, labels: Mapping[str, str],
                op: LabelOp) -> list[LabelRequirement]:
    """``matchLabelKeys`` (In) / ``mismatchLabelKeys`` (NotIn) with the pod's own values."""
    return [LabelRequirement(k, op, (labels[k],))
            for k in _strings(raw.get(field), f"{path}.{field}") if k in labels]


def _term(raw: Any, path: str, namespace: str, labels: Mapping[str, str]) -> PodAffinityTerm:
    raw = _obj(raw, path)
    key = raw.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise _fail(f"{path}.topologyKey", "must not be empty")
    selector = label_selector(raw.get("labelSelector"), f"{path}.labelSelector")
    extra = (_label_keys(raw, "matchLabelKeys", path, labels, LabelOp.IN)
             + _label_keys(raw, "mismatchLabelKeys", path, labels, LabelOp.NOT_IN))
    if extra:
        selector = selector.with_requirements(extra)
    names = frozenset(_strings(raw.get("namespaces"), f"{path}.namespaces"))
    ns_raw = raw.get("namespaceSelector")
    ns_selector = label_selector(ns_raw, f"{path}.namespaceSelector")
    if not names and ns_raw is None:
        names = frozenset((namespace,))
    return PodAffinityTerm(selector, key, names, ns_selector)


def _terms(block: Mapping[str, Any], path: str, namespace: str,
           labels: Mapping[str, str]) -> tuple[tuple[PodAffinityTerm, ...],
                                               tuple[WeightedPodAffinityTerm, ...]]:
    req_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
    required = tuple(_term(t, f"{req_path}[{i}]", namespace, labels)
                     for i, t in enumerate(_items(
                         block.get("requiredDuringSchedulingIgnoredDuringExecution"), req_path)))
    pref_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    preferred = []
    for i, w in enumerate(_items(block.get("preferredDuringSchedulingIgnoredDuringExecution"),
                                 pref_path)):
        where = f"{pref_path}[{i}]"
        w = _obj(w, where)
        preferred.append(WeightedPodAffinityTerm(
            _int(w.get("weight"), f"{where}.weight", 1, 100),
            _term(w.get("podAffinityTerm"), f"{where}.podAffinityTerm", namespace, labels)))
    return required, tuple(preferred)


def _policy(raw: Mapping[str, Any], field: str, path: str,
            default: InclusionPolicy) -> InclusionPolicy:
    value = raw.get(field)
    if value is None:
        return default
    try:
        return InclusionPolicy(value)
    except ValueError:
        raise _fail(f"{path}.{field}", f"must be Honor or Ignore, got {value!r}") from None


def _spread(raw: Any, path: str, labels: Mapping[str, str]) -> SpreadConstraint:
    raw = _obj(raw, path)
    key = raw.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise _fail(f"{path}.topologyKey", "must not be empty")
    try:
        when = Unsatisfiable(raw.get("whenUnsatisfiable"))
    except ValueError:
        raise _fail(f"{path}.whenUnsatisfiable", "must be DoNotSchedule or ScheduleAnyway, "
                    f"got {raw.get('whenUnsatisfiable')!r}") from None
    min_domains = 1
    if raw.get("minDomains") is not None:
        min_domains = _int(raw.get("minDomains"), f"{path}.minDomains", 1)
        if when is not Unsatisfiable.DO_NOT_SCHEDULE:
            raise _fail(f"{path}.minDomains", "only allowed with whenUnsatisfiable "
                                              "DoNotSchedule")
    selector = label_selector(raw.get("labelSelector"), f"{path}.labelSelector")
    extra = _label_keys(raw, "matchLabelKeys", path, labels, LabelOp.IN)
    if extra:
        selector = selector.with_requirements(extra)
    return SpreadConstraint(
        max_skew=_int(raw.get("maxSkew"), f"{path}.maxSkew", 1),
        topology_key=key, when_unsatisfiable=when, selector=selector,
        min_domains=min_domains,
        node_affinity_policy=_policy(raw, "nodeAffinityPolicy", path, InclusionPolicy.HONOR),
        node_taints_policy=_policy(raw, "nodeTaintsPolicy", path, InclusionPolicy.IGNORE))


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """Host ports of the containers and of the sidecars (restartable init containers)."""
    ports: set[HostPort] = set()
    for field in ("initContainers", "containers"):
        for i, c in enumerate(_items(spec.get(field), f"spec.{field}")):
            c = _obj(c, f"spec.{field}[{i}]")
            if field == "initContainers" and c.get("restartPolicy") != "Always":
                continue
            for j, p in enumerate(_items(c.get("ports"), f"spec.{field}[{i}].ports")):
                where = f"spec.{field}[{i}].ports[{j}]"
                p = _obj(p, where)
                if not p.get("hostPort"):
                    continue
                ports.add(HostPort(_int(p.get("hostPort"), f"{where}.hostPort", 1, 65535),
                                   str(p.get("protocol") or "TCP"),
                                   str(p.get("hostIP") or ALL_HOST_IPS)))
    return tuple(sorted(ports))


def _volumes(spec: Mapping[str, Any]) -> tuple[tuple[ClaimUse, ...], list[str]]:
    claims: dict[str, ClaimUse] = {}
    unsupported: list[str] = []
    for i, v in enumerate(_items(spec.get("volumes"), "spec.volumes")):
        where = f"spec.volumes[{i}]"
        v = _obj(v, where)
        for kind, why in UNSUPPORTED_VOLUMES.items():
            if v.get(kind) is not None:
                unsupported.append(f"{where}.{kind}: {why}")
        pvc = v.get("persistentVolumeClaim")
        if pvc is None:
            continue
        pvc = _obj(pvc, f"{where}.persistentVolumeClaim")
        name = pvc.get("claimName")
        if not isinstance(name, str) or not name:
            raise _fail(f"{where}.persistentVolumeClaim.claimName", "missing")
        read_only = bool(pvc.get("readOnly")) and claims.get(name, ClaimUse(name, True)).read_only
        claims[name] = ClaimUse(name, read_only)
    return tuple(claims[k] for k in sorted(claims)), unsupported


def pod_constraints(spec: Mapping[str, Any], namespace: str,
                    labels: Mapping[str, str]) -> PodConstraints:
    """The ``PodConstraints`` of a pod spec in *namespace* with *labels*."""
    affinity = _obj(spec.get("affinity"), "spec.affinity")
    required, preferred = _terms(_obj(affinity.get("podAffinity"), "spec.affinity.podAffinity"),
                                 "spec.affinity.podAffinity", namespace, labels)
    anti, anti_preferred = _terms(
        _obj(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity"),
        "spec.affinity.podAntiAffinity", namespace, labels)
    spread = tuple(_spread(c, f"spec.topologySpreadConstraints[{i}]", labels)
                   for i, c in enumerate(_items(spec.get("topologySpreadConstraints"),
                                                "spec.topologySpreadConstraints")))
    claims, unsupported = _volumes(spec)
    resources = _obj(spec.get("resources"), "spec.resources")
    if resources.get("requests") or resources.get("limits"):
        unsupported.append("spec.resources: pod-level resources are not evaluated (only "
                           "container requests are)")
    return PodConstraints(
        affinity=required, anti_affinity=anti, preferred_affinity=preferred,
        preferred_anti_affinity=anti_preferred, spread=spread, host_ports=_host_ports(spec),
        claims=claims, device_claims=device_claim_uses(spec), unsupported=tuple(unsupported))


def scheduling_gates(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """Names of the pod's ``schedulingGates``: while any is left, no scheduler may place it."""
    gates = []
    for i, g in enumerate(_items(spec.get("schedulingGates"), "spec.schedulingGates")):
        name = _obj(g, f"spec.schedulingGates[{i}]").get("name")
        if not isinstance(name, str) or not name:
            raise _fail(f"spec.schedulingGates[{i}].name", "missing")
        gates.append(name)
    return tuple(gates)


#: The spec fields ``pod_constraints`` reads (for the converter's memo key).
CONSTRAINT_FIELDS = ("affinity", "topologySpreadConstraints", "volumes", "resourceClaims",
                     "resources", "containers", "initContainers")
