"""Apiserver JSON -> the project's model: pure functions over plain dicts.

Why dicts: the informer parses watch lines with ``json.loads`` and hands the dicts straight
here; the client's model objects would cost an order of magnitude more per object.

Why strict errors: one malformed object (a PodGroup with ``minResources.cpu: 12x``) must not
stop the scheduler. Every problem raises ``ConversionError`` naming the object and the field
path; the caller logs it and keeps the object's last good state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar

from scheduler import model
from scheduler.kube.read import podspec
from scheduler.model import workloads
from scheduler.model.nodes import Node, NodeLabelConfig, Taint, TaintEffect
from scheduler.model.pods import PreemptionPolicy
from scheduler.model.resources import QuantityError, Resources, parse_quantity
from scheduler.model.shortfall import parse_indexes

T = TypeVar("T")

class ConversionError(ValueError):
    """An object the scheduler cannot use: ``pod ns/name: spec.x[0].y: reason``."""

    def __init__(self, kind: str, key: str, path: str, reason: str) -> None:
        self.kind, self.key, self.path, self.reason = kind, key, path, reason
        super().__init__(f"{kind} {key}: {path}: {reason}" if path else f"{kind} {key}: {reason}")


@dataclass(frozen=True, slots=True)
class PriorityClassInfo:
    """A ``scheduling.k8s.io/v1`` PriorityClass: resolves ``priorityClassName`` to a value."""

    name: str
    value: int
    global_default: bool = False


class _Fail(Exception):
    """Internal: a field problem before the object's identity is attached."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path, self.reason = path, reason


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects); ``?`` when missing."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    name, ns = meta.get("name") or "?", meta.get("namespace")
    return f"{ns}/{name}" if ns else str(name)


def _convert(kind: str, obj: Any, build: Callable[[], T]) -> T:
    """Run *build*, turning any failure into a ``ConversionError`` naming the object."""
    try:
        if not isinstance(obj, Mapping):
            raise _Fail("", f"expected an object, got {type(obj).__name__}")
        return build()
    except _Fail as exc:
        raise ConversionError(kind, object_key(obj), exc.path, exc.reason) from None
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise ConversionError(kind, object_key(obj), "", f"malformed object: {exc}") from exc


# Field readers ------------------------------------------------------------------------------
def _map(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _Fail(path, f"expected an object, got {type(value).__name__}")
    return value


def _list(obj: Mapping[str, Any], key: str, path: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Fail(path, f"expected a list, got {type(value).__name__}")
    return value


def _str_map(obj: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in _map(obj, key, path).items()}


def _int(obj: Mapping[str, Any], key: str, path: str, default: int | None,
         minimum: int | None = None) -> int | None:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Fail(path, f"expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise _Fail(path, f"must be >= {minimum}, got {value}")
    return value


def _name(meta: Mapping[str, Any]) -> str:
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise _Fail("metadata.name", "missing")
    return name


def parse_time(text: Any, path: str = "metadata.creationTimestamp") -> float:
    """RFC 3339 (``2024-05-01T12:00:00Z``) -> epoch seconds; absent -> 0.0."""
    if not text:
        return 0.0
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        raise _Fail(path, f"malformed time {text!r}") from None


def _resources(quantities: Mapping[str, Any], path: str) -> Resources:
    out: dict[str, int] = {}
    for name, text in quantities.items():
        try:
            out[name] = parse_quantity(text, name)
        except QuantityError as exc:
            reason = str(exc).removeprefix(f"{name}: ")
            raise _Fail(f"{path}.{name}", reason) from None
    return Resources(out)


# Nodes -------------------------------------------------------------------------------------
def _taint(raw: Any, path: str) -> Taint:
    if not isinstance(raw, Mapping) or not raw.get("key"):
        raise _Fail(f"{path}.key", "missing")
    try:
        effect = TaintEffect(str(raw.get("effect")))
    except ValueError:
        raise _Fail(f"{path}.effect", f"unknown effect {raw.get('effect')!r}") from None
    return Taint(key=str(raw["key"]), value=str(raw.get("value") or ""), effect=effect)


def _node(obj: Mapping[str, Any], label_config: NodeLabelConfig | None = None) -> Node:
    """A ``v1/Node``: allocatable (exact), labels, taints, cordon and the Ready condition.

    A node without a Ready=True condition is not ready: kubelets always report it, and the dev
    cluster's fake kubelet does too.
    """
    meta, spec = _map(obj, "metadata", "metadata"), _map(obj, "spec", "spec")
    status = _map(obj, "status", "status")
    taints = tuple(_taint(t, f"spec.taints[{i}]")
                   for i, t in enumerate(_list(spec, "taints", "spec.taints")))
    ready = any(isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
                for c in _list(status, "conditions", "status.conditions"))
    return Node.build(
        _name(meta),
        _resources(_map(status, "allocatable", "status.allocatable"), "status.allocatable"),
        labels=_str_map(meta, "labels", "metadata.labels"),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
        config=label_config,
        ready=ready,
    )


# Pods --------------------------------------------------------------------------------------
def _locate_spec_error(spec: Mapping[str, Any], error: Exception) -> _Fail:
    """Find the field behind an error from ``requirements_from_pod_spec`` (slow path only)."""
    for field in ("containers", "initContainers"):
        for i, c in enumerate(_list(spec, field, f"spec.{field}")):
            resources = _map(c, "resources", f"spec.{field}[{i}].resources")
            for part in ("limits", "requests"):
                where = f"spec.{field}[{i}].resources.{part}"
                _resources(_map(resources, part, where), where)
    _resources(_map(spec, "overhead", "spec.overhead"), "spec.overhead")
    for i, t in enumerate(_list(spec, "tolerations", "spec.tolerations")):
        if isinstance(t, Mapping) and t.get("effect"):
            try:
                TaintEffect(t["effect"])
            except ValueError:
                return _Fail(f"spec.tolerations[{i}].effect", f"unknown effect {t['effect']!r}")
    text = str(error)
    if text.startswith("spec."):  # node affinity errors already carry their path
        path, _, reason = text.partition(": ")
        return _Fail(path, reason)
    return _Fail("spec", text)


#: The spec fields ``requirements_from_pod_spec`` reads.
_REQUIREMENT_FIELDS = ("containers", "initContainers", "overhead", "nodeSelector", "affinity",
                       "tolerations")
#: What of a container decides requests and host ports.
_CONTAINER_FIELDS = ("resources", "restartPolicy", "ports")
#: What of a volume decides placement (claims; volume types we refuse).
_VOLUME_FIELDS = ("persistentVolumeClaim", *podspec.UNSUPPORTED_VOLUMES)


@lru_cache(maxsize=4096)
def _requirements_of(shape: str) -> model.PodRequirements:
    spec, namespace, labels = json.loads(shape)
    requirements = model.requirements_from_pod_spec(spec)
    constraints = podspec.pod_constraints(spec, namespace, labels)
    return replace(requirements, constraints=constraints) if not constraints.empty \
        else requirements


def _requirements(spec: Mapping[str, Any], namespace: str,
                  labels: Mapping[str, str]) -> model.PodRequirements:
    """``requirements_from_pod_spec`` plus ``podspec.pod_constraints``, memoised on the
    fields they read.

    Why: the members of a gang (and every watch update of one pod) share one spec shape, and
    building requirements costs several times what serialising the shape does.
    """
    shape = {k: spec[k] for k in (*_REQUIREMENT_FIELDS, *podspec.CONSTRAINT_FIELDS)
             if k in spec}
    for key in ("containers", "initContainers"):
        if isinstance(shape.get(key), list):
            # Only what requests and ports come from: the ServiceAccount admission plugin gives
            # every pod's containers a volumeMount of its own name, which would defeat the memo.
            shape[key] = [{f: c.get(f) for f in _CONTAINER_FIELDS if f in c}
                          if isinstance(c, Mapping) else c for c in shape[key]]
    if isinstance(shape.get("volumes"), list):
        # Positions are kept (errors name them); the per-pod token volume's name is dropped.
        shape["volumes"] = [{f: v[f] for f in _VOLUME_FIELDS if f in v}
                            if isinstance(v, Mapping) else v for v in shape["volumes"]]
    text = json.dumps(shape, separators=(",", ":"), sort_keys=True)
    # Namespace and labels matter only to pod affinity terms and label-key merging.
    uses_ns = "podAffinity" in text or "podAntiAffinity" in text
    uses_labels = "LabelKeys" in text
    return _requirements_of(json.dumps([shape, namespace if uses_ns else "",
                                        dict(labels) if uses_labels else {}],
                                       separators=(",", ":"), sort_keys=True))


def _owner(meta: Mapping[str, Any]) -> workloads.OwnerRef | None:
    for i, ref in enumerate(_list(meta, "ownerReferences", "metadata.ownerReferences")):
        if isinstance(ref, Mapping) and ref.get("controller"):
            if not ref.get("kind") or not ref.get("name"):
                raise _Fail(f"metadata.ownerReferences[{i}]", "controller without kind or name")
            return workloads.OwnerRef(kind=str(ref["kind"]), name=str(ref["name"]),
                                      uid=str(ref.get("uid") or ""))
    return None


def _started_at(status: Mapping[str, Any]) -> float | None:
    """``status.startTime`` (kubelet), else when PodScheduled turned True (bound, no kubelet)."""
    if status.get("startTime"):
        return parse_time(status["startTime"], "status.startTime")
    for i, c in enumerate(_list(status, "conditions", "status.conditions")):
        if (isinstance(c, Mapping) and c.get("type") == "PodScheduled"
                and c.get("status") == "True" and c.get("lastTransitionTime")):
            return parse_time(c["lastTransitionTime"], f"status.conditions[{i}].lastTransitionTime")
    return None


def _disruption(status: Mapping[str, Any]) -> str:
    """The reason of the pod's ``DisruptionTarget=True`` condition, "" without one."""
    for c in _list(status, "conditions", "status.conditions"):
        if (isinstance(c, Mapping) and c.get("type") == "DisruptionTarget"
                and c.get("status") == "True"):
            return str(c.get("reason") or "")
    return ""


def _pod(obj: Mapping[str, Any]) -> workloads.PodInfo:
    """A ``v1/Pod`` reduced to scheduling facts; ``spec.priority`` is set by admission."""
    meta, spec = _map(obj, "metadata", "metadata"), _map(obj, "spec", "spec")
    status = _map(obj, "status", "status")
    namespace = str(meta.get("namespace") or "default")
    labels = _str_map(meta, "labels", "metadata.labels")
    try:
        requirements = _requirements(spec, namespace, labels)
        gates = podspec.scheduling_gates(spec)
    except (QuantityError, ValueError, TypeError, AttributeError) as exc:
        raise _locate_spec_error(spec, exc) from None
    try:
        phase = workloads.PodPhase(status.get("phase") or "Pending")
    except ValueError:
        raise _Fail("status.phase", f"unknown phase {status.get('phase')!r}") from None
    try:
        preemption = PreemptionPolicy(spec.get("preemptionPolicy") or "PreemptLowerPriority")
    except ValueError:
        raise _Fail("spec.preemptionPolicy",
                    f"unknown policy {spec.get('preemptionPolicy')!r}") from None
    return workloads.PodInfo(
        uid=str(meta.get("uid") or ""),
        namespace=namespace,
        name=_name(meta),
        requirements=requirements,
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        node_name=str(spec.get("nodeName") or ""),
        phase=phase,
        priority=_int(spec, "priority", "spec.priority", 0) or 0,
        creation_time=parse_time(meta.get("creationTimestamp")),
        labels=labels,
        annotations=_str_map(meta, "annotations", "metadata.annotations"),
        owner=_owner(meta),
        terminating=bool(meta.get("deletionTimestamp")),
        resource_version=str(meta.get("resourceVersion") or ""),
        started_at=_started_at(status),
        preemption_policy=preemption,
        scheduling_gates=gates,
        pod_group_name=_scheduling_group(spec),
        grace_period_seconds=_int(spec, "terminationGracePeriodSeconds",
                                  "spec.terminationGracePeriodSeconds", None, minimum=0),
        disruption=_disruption(status),
    )


def _scheduling_group(spec: Mapping[str, Any]) -> str:
    """``spec.schedulingGroup.podGroupName`` (Kubernetes' own gang API), "" when unset."""
    name = _map(spec, "schedulingGroup", "spec.schedulingGroup").get("podGroupName")
    if name is not None and (not isinstance(name, str) or not name):
        raise _Fail("spec.schedulingGroup.podGroupName", f"expected a name, got {name!r}")
    return name or ""


# Workloads ---------------------------------------------------------------------------------
def _podgroup(obj: Mapping[str, Any]) -> workloads.PodGroupInfo:
    """A scheduler-plugins ``scheduling.x-k8s.io/v1alpha1`` PodGroup (a CRD: checked closely)."""
    meta, spec = _map(obj, "metadata", "metadata"), _map(obj, "spec", "spec")
    min_member = _int(spec, "minMember", "spec.minMember", 1)
    if min_member is None or min_member < 0:
        raise _Fail("spec.minMember", f"must be >= 0, got {min_member}")
    raw_min = spec.get("minResources")
    min_resources = None if raw_min is None else _resources(
        _map(spec, "minResources", "spec.minResources"), "spec.minResources")
    timeout = _int(spec, "scheduleTimeoutSeconds", "spec.scheduleTimeoutSeconds", None)
    if timeout is not None and timeout < 0:
        raise _Fail("spec.scheduleTimeoutSeconds", f"must be >= 0, got {timeout}")
    return workloads.PodGroupInfo(
        namespace=str(meta.get("namespace") or "default"),
        name=_name(meta),
        uid=str(meta.get("uid") or ""),
        min_member=max(min_member, 1),
        min_resources=min_resources,
        schedule_timeout_seconds=timeout,
        creation_time=parse_time(meta.get("creationTimestamp")),
        labels=_str_map(meta, "labels", "metadata.labels"),
        annotations=_str_map(meta, "annotations", "metadata.annotations"),
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def _job(obj: Mapping[str, Any]) -> workloads.JobInfo:
    """A ``batch/v1`` Job; ``parallelism`` defaults to 1 as in the API."""
    meta, spec, status = (_map(obj, key, key) for key in ("metadata", "spec", "status"))
    try:
        done = parse_indexes(str(status.get("completedIndexes") or ""))
    except ValueError as e:
        raise _Fail("status.completedIndexes", str(e)) from None
    return workloads.JobInfo(
        namespace=str(meta.get("namespace") or "default"),
        name=_name(meta),
        uid=str(meta.get("uid") or ""),
        parallelism=_int(spec, "parallelism", "spec.parallelism", 1, minimum=0) or 0,
        completions=_int(spec, "completions", "spec.completions", None, minimum=0),
        succeeded=_int(status, "succeeded", "status.succeeded", 0, minimum=0) or 0,
        active_deadline_seconds=_int(spec, "activeDeadlineSeconds",
                                     "spec.activeDeadlineSeconds", None, minimum=1),
        creation_time=parse_time(meta.get("creationTimestamp")),
        labels=_str_map(meta, "labels", "metadata.labels"),
        annotations=_str_map(meta, "annotations", "metadata.annotations"),
        indexed=spec.get("completionMode") == "Indexed", completed_indexes=done,
        backoff_limit_per_index=_int(spec, "backoffLimitPerIndex", "spec.backoffLimitPerIndex",
                                     None, minimum=0),
    )


def _priority_class(obj: Mapping[str, Any]) -> PriorityClassInfo:
    """A ``scheduling.k8s.io/v1`` PriorityClass (``value`` is required by the API)."""
    meta = _map(obj, "metadata", "metadata")
    value = _int(obj, "value", "value", None)
    if value is None:
        raise _Fail("value", "missing")
    return PriorityClassInfo(name=_name(meta), value=value,
                             global_default=bool(obj.get("globalDefault")))


# Public converters ---------------------------------------------------------------------------
def node_from_json(obj: Mapping[str, Any], label_config: NodeLabelConfig | None = None) -> Node:
    return _convert("node", obj, lambda: _node(obj, label_config))


def pod_from_json(obj: Mapping[str, Any]) -> workloads.PodInfo:
    return _convert("pod", obj, lambda: _pod(obj))


def podgroup_from_json(obj: Mapping[str, Any]) -> workloads.PodGroupInfo:
    return _convert("podgroup", obj, lambda: _podgroup(obj))


def job_from_json(obj: Mapping[str, Any]) -> workloads.JobInfo:
    return _convert("job", obj, lambda: _job(obj))


def priority_class_from_json(obj: Mapping[str, Any]) -> PriorityClassInfo:
    return _convert("priorityclass", obj, lambda: _priority_class(obj))


def default_priority(classes: Mapping[str, PriorityClassInfo]) -> int:
    """The value of the ``globalDefault`` class (highest if several), else 0, as admission does."""
    return max((c.value for c in classes.values() if c.global_default), default=0)
