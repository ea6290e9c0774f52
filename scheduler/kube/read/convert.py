"""Apiserver JSON -> the project's model: pure functions over plain dicts.

Why dicts: the informer parses watch lines with ``client.decode`` and hands the dicts straight
here; the client's model objects would cost an order of magnitude more per object.

Why strict errors: one malformed object (a PodGroup with ``minResources.cpu: 12x``) must not
stop the scheduler. Every problem raises ``ConversionError`` naming the object and the field
path; the caller logs it and keeps the object's last good state.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from scheduler import model
from scheduler.kit.memo import Slot, Slots
from scheduler.kube.read import hami_convert, pod_claims, pod_failure, podspec
from scheduler.kube.read.fields import (
    ConversionError,
    FieldError,
    converted,
    object_key,
    parse_time,
    read_int,
    read_list,
    read_map,
    read_name,
    read_owner,
    read_str_map,
)
from scheduler.model import hami, workloads
from scheduler.model.nodes import Node, NodeLabelConfig, Taint, TaintEffect
from scheduler.model.pods import PreemptionPolicy
from scheduler.model.resources import QuantityError, Resources, parse_quantity
from scheduler.model.shortfall import parse_indexes

__all__ = ["ConversionError", "object_key", "parse_time"]  # (read here by the callers)


@dataclass(frozen=True, slots=True)
class PriorityClassInfo:
    """A ``scheduling.k8s.io/v1`` PriorityClass: resolves ``priorityClassName`` to a value."""

    name: str
    value: int
    global_default: bool = False


def _resources(quantities: Mapping[str, Any], path: str) -> Resources:
    out: dict[str, int] = {}
    for name, text in quantities.items():
        try:
            out[name] = parse_quantity(text, name)
        except QuantityError as exc:
            reason = str(exc).removeprefix(f"{name}: ")
            raise FieldError(f"{path}.{name}", reason) from None
    return Resources(out)


# Nodes -------------------------------------------------------------------------------------
def _taint(raw: Any, path: str) -> Taint:
    if not isinstance(raw, Mapping) or not raw.get("key"):
        raise FieldError(f"{path}.key", "missing")
    try:
        effect = TaintEffect(str(raw.get("effect")))
    except ValueError:
        raise FieldError(f"{path}.effect", f"unknown effect {raw.get('effect')!r}") from None
    return Taint(key=str(raw["key"]), value=str(raw.get("value") or ""), effect=effect)


def _node(obj: Mapping[str, Any], label_config: NodeLabelConfig | None = None) -> Node:
    """A ``v1/Node``: allocatable (exact), labels, taints, cordon and the Ready condition.

    A node without a Ready=True condition is not ready: kubelets always report it, and the dev
    cluster's fake kubelet does too.
    """
    meta, spec = read_map(obj, "metadata", "metadata"), read_map(obj, "spec", "spec")
    status = read_map(obj, "status", "status")
    taints = tuple(_taint(t, f"spec.taints[{i}]")
                   for i, t in enumerate(read_list(spec, "taints", "spec.taints")))
    ready = any(isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
                for c in read_list(status, "conditions", "status.conditions"))
    return Node.build(
        read_name(meta),
        _resources(read_map(status, "allocatable", "status.allocatable"), "status.allocatable"),
        labels=read_str_map(meta, "labels", "metadata.labels"),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
        config=label_config,
        ready=ready,
    )


# Pods --------------------------------------------------------------------------------------
def _locate_spec_error(spec: Mapping[str, Any], error: Exception) -> FieldError:
    """Find the field behind an error from ``requirements_from_pod_spec`` (slow path only)."""
    for field in ("containers", "initContainers"):
        for i, c in enumerate(read_list(spec, field, f"spec.{field}")):
            resources = read_map(c, "resources", f"spec.{field}[{i}].resources")
            for part in ("limits", "requests"):
                where = f"spec.{field}[{i}].resources.{part}"
                _resources(read_map(resources, part, where), where)
    _resources(read_map(spec, "overhead", "spec.overhead"), "spec.overhead")
    for i, t in enumerate(read_list(spec, "tolerations", "spec.tolerations")):
        if isinstance(t, Mapping) and t.get("effect"):
            try:
                TaintEffect(t["effect"])
            except ValueError:
                return FieldError(f"spec.tolerations[{i}].effect",
                                  f"unknown effect {t['effect']!r}")
    text = str(error)
    if text.startswith("spec."):  # node affinity errors already carry their path
        path, _, reason = text.partition(": ")
        return FieldError(path, reason)
    return FieldError("spec", text)


#: The spec fields ``requirements_from_pod_spec`` reads.
_REQUIREMENT_FIELDS = ("containers", "initContainers", "overhead", "nodeSelector", "affinity",
                       "tolerations")
#: What of a container decides requests and host ports.
_CONTAINER_FIELDS = ("resources", "restartPolicy", "ports")
#: What of a volume decides placement (claims; volume types we refuse).
_VOLUME_FIELDS = ("persistentVolumeClaim", *podspec.UNSUPPORTED_VOLUMES)


#: A pod's spec shape (``_requirements``: the fields read, with its namespace and labels where
#: they matter, as JSON) -> its requirements: a pure function of its key. One entry per shape.
REQUIREMENTS: Slot[str, model.PodRequirements] = Slot("convert.requirements")
_MEMO = Slots()  # the process's: a shape means the same for as long as it runs
_REQUIREMENTS = _MEMO.table(REQUIREMENTS)


def _requirements_of(shape: str) -> model.PodRequirements:
    """The requirements of a spec shape, kept on the first ask (a shape that raises is not)."""
    hit = _REQUIREMENTS.get(shape)
    if hit is None:
        hit = _MEMO.put(REQUIREMENTS, shape, _requirements_built(shape))
    return hit


def _requirements_built(shape: str) -> model.PodRequirements:
    spec, namespace, labels = json.loads(shape)
    spec, shares = hami_convert.without_shared_gpus(spec)
    requirements = model.requirements_from_pod_spec(spec)
    constraints = podspec.pod_constraints(spec, namespace, labels)
    if shares:  # GPU shares through HAMi's device plugin: a claim of the pod's own
        constraints = replace(constraints,
                              device_claims=(*constraints.device_claims, hami.USE))
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
    text = _compact(shape)
    # Namespace and labels matter only to pod affinity terms and label-key merging. The key
    # is ``_compact([shape, namespace, labels])`` spelled out, so the shape (the bulk of a
    # pod) is serialised once.
    uses_ns = "podAffinity" in text or "podAntiAffinity" in text
    uses_labels = "LabelKeys" in text
    # Most pods use neither: their parts are the constants, not two more encodings.
    ns = _compact(namespace) if uses_ns else '""'
    keyed = _compact(dict(labels)) if uses_labels else "{}"
    return _requirements_of(f"[{text},{ns},{keyed}]")


#: One encoder for every shape: ``json.dumps`` with options builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


def _compact(value: Any) -> str:
    return _ENCODER.encode(value)



def _started_at(status: Mapping[str, Any]) -> float | None:
    """``status.startTime`` (kubelet), else when PodScheduled turned True (bound, no kubelet)."""
    if status.get("startTime"):
        return parse_time(status["startTime"], "status.startTime")
    for i, c in enumerate(read_list(status, "conditions", "status.conditions")):
        if (isinstance(c, Mapping) and c.get("type") == "PodScheduled"
                and c.get("status") == "True" and c.get("lastTransitionTime")):
            return parse_time(c["lastTransitionTime"], f"status.conditions[{i}].lastTransitionTime")
    return None


def _disruption(status: Mapping[str, Any]) -> str:
    """The reason of the pod's ``DisruptionTarget=True`` condition, "" without one."""
    for c in read_list(status, "conditions", "status.conditions"):
        if (isinstance(c, Mapping) and c.get("type") == "DisruptionTarget"
                and c.get("status") == "True"):
            return str(c.get("reason") or "")
    return ""


def _pod(obj: Mapping[str, Any]) -> workloads.PodInfo:
    """A ``v1/Pod`` reduced to scheduling facts; ``spec.priority`` is set by admission."""
    meta, spec = read_map(obj, "metadata", "metadata"), read_map(obj, "spec", "spec")
    status = read_map(obj, "status", "status")
    namespace = str(meta.get("namespace") or "default")
    labels = read_str_map(meta, "labels", "metadata.labels")
    # A bad GPU-share ask is named by its field (checked here: requirements are memoised).
    shares = hami_convert.share_requests(read_list(spec, "containers", "spec.containers"))
    claims = pod_claims.claim_statuses(status)
    if shares:
        claims = (*claims, (hami.USE.entry, hami_convert.claim_name(read_name(meta))))
    try:
        requirements = _requirements(spec, namespace, labels)
        gates = podspec.scheduling_gates(spec)
    except (QuantityError, ValueError, TypeError, AttributeError) as exc:
        raise _locate_spec_error(spec, exc) from None
    try:
        phase = workloads.PodPhase(status.get("phase") or "Pending")
    except ValueError:
        raise FieldError("status.phase", f"unknown phase {status.get('phase')!r}") from None
    try:
        preemption = PreemptionPolicy(spec.get("preemptionPolicy") or "PreemptLowerPriority")
    except ValueError:
        raise FieldError("spec.preemptionPolicy",
                    f"unknown policy {spec.get('preemptionPolicy')!r}") from None
    return workloads.PodInfo(
        uid=str(meta.get("uid") or ""),
        namespace=namespace,
        name=read_name(meta),
        requirements=requirements,
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        node_name=str(spec.get("nodeName") or ""),
        phase=phase,
        priority=read_int(spec, "priority", "spec.priority", 0) or 0,
        creation_time=parse_time(meta.get("creationTimestamp")),
        labels=labels,
        annotations=read_str_map(meta, "annotations", "metadata.annotations"),
        owner=read_owner(meta),
        terminating=bool(meta.get("deletionTimestamp")),
        resource_version=str(meta.get("resourceVersion") or ""),
        started_at=_started_at(status),
        preemption_policy=preemption,
        scheduling_gates=gates,
        pod_group_name=_scheduling_group(spec),
        grace_period_seconds=read_int(spec, "terminationGracePeriodSeconds",
                                  "spec.terminationGracePeriodSeconds", None, minimum=0),
        disruption=_disruption(status),
        claim_statuses=claims,
        failure=pod_failure.pod_failure(obj) if phase is workloads.PodPhase.FAILED else None,
    )


def _scheduling_group(spec: Mapping[str, Any]) -> str:
    """``spec.schedulingGroup.podGroupName`` (Kubernetes' own gang API), "" when unset."""
    name = read_map(spec, "schedulingGroup", "spec.schedulingGroup").get("podGroupName")
    if name is not None and (not isinstance(name, str) or not name):
        raise FieldError("spec.schedulingGroup.podGroupName", f"expected a name, got {name!r}")
    return name or ""


# Workloads ---------------------------------------------------------------------------------
def _podgroup(obj: Mapping[str, Any]) -> workloads.PodGroupInfo:
    """A scheduler-plugins ``scheduling.x-k8s.io/v1alpha1`` PodGroup (a CRD: checked closely)."""
    meta, spec = read_map(obj, "metadata", "metadata"), read_map(obj, "spec", "spec")
    min_member = read_int(spec, "minMember", "spec.minMember", 1)
    if min_member is None or min_member < 0:
        raise FieldError("spec.minMember", f"must be >= 0, got {min_member}")
    raw_min = spec.get("minResources")
    min_resources = None if raw_min is None else _resources(
        read_map(spec, "minResources", "spec.minResources"), "spec.minResources")
    timeout = read_int(spec, "scheduleTimeoutSeconds", "spec.scheduleTimeoutSeconds", None)
    if timeout is not None and timeout < 0:
        raise FieldError("spec.scheduleTimeoutSeconds", f"must be >= 0, got {timeout}")
    return workloads.PodGroupInfo(
        namespace=str(meta.get("namespace") or "default"),
        name=read_name(meta),
        uid=str(meta.get("uid") or ""),
        min_member=max(min_member, 1),
        min_resources=min_resources,
        schedule_timeout_seconds=timeout,
        creation_time=parse_time(meta.get("creationTimestamp")),
        labels=read_str_map(meta, "labels", "metadata.labels"),
        annotations=read_str_map(meta, "annotations", "metadata.annotations"),
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def _job(obj: Mapping[str, Any]) -> workloads.JobInfo:
    """A ``batch/v1`` Job; ``parallelism`` defaults to 1 as in the API."""
    meta, spec, status = (read_map(obj, key, key) for key in ("metadata", "spec", "status"))
    try:
        done = parse_indexes(str(status.get("completedIndexes") or ""))
    except ValueError as e:
        raise FieldError("status.completedIndexes", str(e)) from None
    return workloads.JobInfo(
        namespace=str(meta.get("namespace") or "default"),
        name=read_name(meta),
        uid=str(meta.get("uid") or ""),
        parallelism=read_int(spec, "parallelism", "spec.parallelism", 1, minimum=0) or 0,
        completions=read_int(spec, "completions", "spec.completions", None, minimum=0),
        succeeded=read_int(status, "succeeded", "status.succeeded", 0, minimum=0) or 0,
        active_deadline_seconds=read_int(spec, "activeDeadlineSeconds",
                                     "spec.activeDeadlineSeconds", None, minimum=1),
        creation_time=parse_time(meta.get("creationTimestamp")),
        labels=read_str_map(meta, "labels", "metadata.labels"),
        annotations=read_str_map(meta, "annotations", "metadata.annotations"),
        indexed=spec.get("completionMode") == "Indexed", completed_indexes=done,
        backoff_limit_per_index=read_int(spec, "backoffLimitPerIndex", "spec.backoffLimitPerIndex",
                                     None, minimum=0),
        backoff_limit=read_int(spec, "backoffLimit", "spec.backoffLimit", None, minimum=0),
        failure_rules=pod_failure.failure_rules(spec),
        suspended=spec.get("suspend") is True,
        **pod_failure.job_failures(status),
    )


def _priority_class(obj: Mapping[str, Any]) -> PriorityClassInfo:
    """A ``scheduling.k8s.io/v1`` PriorityClass (``value`` is required by the API)."""
    meta = read_map(obj, "metadata", "metadata")
    value = read_int(obj, "value", "value", None)
    if value is None:
        raise FieldError("value", "missing")
    return PriorityClassInfo(name=read_name(meta), value=value,
                             global_default=bool(obj.get("globalDefault")))


# Public converters ---------------------------------------------------------------------------
def node_from_json(obj: Mapping[str, Any], label_config: NodeLabelConfig | None = None) -> Node:
    return converted("node", obj, lambda: _node(obj, label_config))


def pod_from_json(obj: Mapping[str, Any]) -> workloads.PodInfo:
    return converted("pod", obj, lambda: _pod(obj))


def podgroup_from_json(obj: Mapping[str, Any]) -> workloads.PodGroupInfo:
    return converted("podgroup", obj, lambda: _podgroup(obj))


def job_from_json(obj: Mapping[str, Any]) -> workloads.JobInfo:
    return converted("job", obj, lambda: _job(obj))


def priority_class_from_json(obj: Mapping[str, Any]) -> PriorityClassInfo:
    return converted("priorityclass", obj, lambda: _priority_class(obj))


def default_priority(classes: Mapping[str, PriorityClassInfo]) -> int:
    """The value of the ``globalDefault`` class (highest if several), else 0, as admission does."""
    return max((c.value for c in classes.values() if c.global_default), default=0)
