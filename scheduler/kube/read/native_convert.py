"""``scheduling.k8s.io`` Workload and PodGroup JSON (v1alpha2 and v1beta1) -> ``model.native``.

Why the version is passed in, not read from the object: list replies may omit an item's
``apiVersion``; the informer knows which version it lists. Both versions land on the same
records; the differences are spelled out here and nowhere else:

=================  ====================================  ==================================
idea               v1alpha2 (Kubernetes 1.36)             v1beta1 (1.37)
=================  ====================================  ==================================
template ref       ``podGroupTemplateRef.workload.       ``workloadRef.{workloadName,
                   {workloadName,podGroupTemplateName}``  templateName}``
disruption         ``disruptionMode: Pod | PodGroup``     ``disruptionMode: {single: {}} |
                                                          {all: {}}``
scheduled          condition ``PodGroupScheduled``        ``PodGroupInitiallyScheduled``
preemption policy  (none)                                 ``preemptionPolicy``
=================  ====================================  ==================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.kube.read.fields import (
    FieldError,
    converted,
    parse_time,
    read_int,
    read_list,
    read_map,
    read_name,
    read_owner,
    read_str_map,
)
from scheduler.kube.read.pod_claims import claim_statuses, device_claim_uses
from scheduler.model import native
from scheduler.model.pods import PreemptionPolicy

#: The PodGroup condition kube-scheduler writes, by API version.
SCHEDULED_CONDITION: Mapping[str, str] = {native.V1ALPHA2: "PodGroupScheduled",
                                          native.V1BETA1: "PodGroupInitiallyScheduled"}


def _check_version(api_version: str) -> None:
    if api_version not in native.VERSIONS:
        raise ValueError(f"unknown gang API version {api_version!r} "
                         f"(known: {', '.join(native.VERSIONS)})")


def _min_count(policy: Mapping[str, Any], path: str) -> int | None:
    """``gang.minCount`` (>= 1), None for ``basic``; exactly one of the two must be set."""
    gang, basic = policy.get("gang"), policy.get("basic")
    if gang is not None and basic is not None:
        raise FieldError(path, "both basic and gang are set; exactly one must be")
    if gang is None:
        if basic is None:
            raise FieldError(path, "neither basic nor gang is set; exactly one must be")
        return None
    if not isinstance(gang, Mapping):
        raise FieldError(f"{path}.gang", f"expected an object, got {type(gang).__name__}")
    count = read_int(gang, "minCount", f"{path}.gang.minCount", None, minimum=1)
    if count is None:
        raise FieldError(f"{path}.gang.minCount", "missing")
    return count


def _disruption(raw: Any, path: str, api_version: str) -> native.DisruptionMode:
    if raw is None:
        return native.DisruptionMode.POD
    if api_version == native.V1ALPHA2:
        try:
            return native.DisruptionMode(str(raw))
        except ValueError:
            raise FieldError(path, f"unknown mode {raw!r} (Pod or PodGroup)") from None
    if not isinstance(raw, Mapping) or set(raw) - {"single", "all"} or len(raw) != 1:
        raise FieldError(path, f"expected exactly one of single or all, got {raw!r}")
    return native.DisruptionMode.POD_GROUP if "all" in raw else native.DisruptionMode.POD


def _topology_key(spec: Mapping[str, Any], path: str) -> str | None:
    constraints = read_map(spec, "schedulingConstraints", path)
    topology = read_list(constraints, "topology", f"{path}.topology")
    if len(topology) > 1:
        raise FieldError(f"{path}.topology", f"at most one constraint, got {len(topology)}")
    if not topology:
        return None
    entry = topology[0]
    key = entry.get("key") if isinstance(entry, Mapping) else None
    if not isinstance(key, str) or not key:
        raise FieldError(f"{path}.topology[0].key", "missing")
    return key


def _policy(spec: Mapping[str, Any], path: str, api_version: str) -> native.GroupPolicy:
    """The policy fields shared by a PodGroup's spec and a Workload's PodGroupTemplate."""
    prefix = f"{path}." if path else ""
    try:
        claims = device_claim_uses(spec, f"{prefix}resourceClaims")
    except ValueError as exc:
        where, _, why = str(exc).partition(": ")
        raise FieldError(where, why) from None
    preemption = None
    if spec.get("preemptionPolicy") is not None:
        try:
            preemption = PreemptionPolicy(str(spec["preemptionPolicy"]))
        except ValueError:
            raise FieldError(f"{prefix}preemptionPolicy",
                        f"unknown policy {spec['preemptionPolicy']!r}") from None
    class_name = spec.get("priorityClassName")
    return native.GroupPolicy(
        min_count=_min_count(read_map(spec, "schedulingPolicy", f"{prefix}schedulingPolicy"),
                             f"{prefix}schedulingPolicy"),
        priority=read_int(spec, "priority", f"{prefix}priority", None),
        priority_class_name=class_name if isinstance(class_name, str) else "",
        disruption=_disruption(spec.get("disruptionMode"), f"{prefix}disruptionMode",
                               api_version),
        topology_key=_topology_key(spec, f"{prefix}schedulingConstraints"),
        resource_claims=claims,
        preemption_policy=preemption,
    )


def _template_ref(spec: Mapping[str, Any], api_version: str) -> tuple[str | None, str | None]:
    if api_version == native.V1ALPHA2:
        path = "spec.podGroupTemplateRef.workload"
        ref = read_map(read_map(spec, "podGroupTemplateRef", "spec.podGroupTemplateRef"),
                       "workload", path)
        template_key = "podGroupTemplateName"
    else:
        path, ref, template_key = "spec.workloadRef", read_map(spec, "workloadRef",
                                                           "spec.workloadRef"), "templateName"
    if not ref:
        return None, None
    workload, template = ref.get("workloadName"), ref.get(template_key)
    if not isinstance(workload, str) or not workload:
        raise FieldError(f"{path}.workloadName", "missing")
    return workload, str(template) if template else None


def _scheduled(status: Mapping[str, Any], api_version: str) -> bool:
    kind = SCHEDULED_CONDITION[api_version]
    return any(isinstance(c, Mapping) and c.get("type") == kind and c.get("status") == "True"
               for c in read_list(status, "conditions", "status.conditions"))


def _podgroup(obj: Mapping[str, Any], api_version: str) -> native.NativeGroupInfo:
    meta, spec = read_map(obj, "metadata", "metadata"), read_map(obj, "spec", "spec")
    if spec.get("parentCompositePodGroupName"):
        raise FieldError("spec.parentCompositePodGroupName",
                    "composite pod groups (CompositePodGroup, alpha) are not supported")
    workload, template = _template_ref(spec, api_version)
    owner = read_owner(meta)
    return native.NativeGroupInfo(
        namespace=str(meta.get("namespace") or "default"),
        name=read_name(meta),
        policy=_policy(spec, "spec", api_version),
        uid=str(meta.get("uid") or ""),
        api_version=api_version,
        generation=read_int(meta, "generation", "metadata.generation", 0) or 0,
        workload=workload,
        template=template,
        owner_kind=owner.kind if owner else None,
        owner_name=owner.name if owner else None,
        creation_time=parse_time(meta.get("creationTimestamp")),
        labels=read_str_map(meta, "labels", "metadata.labels"),
        annotations=read_str_map(meta, "annotations", "metadata.annotations"),
        resource_version=str(meta.get("resourceVersion") or ""),
        scheduled=_scheduled(read_map(obj, "status", "status"), api_version),
        claim_statuses=claim_statuses(read_map(obj, "status", "status")),
    )


def _workload(obj: Mapping[str, Any], api_version: str) -> native.WorkloadInfo:
    meta, spec = read_map(obj, "metadata", "metadata"), read_map(obj, "spec", "spec")
    templates: dict[str, native.GroupPolicy] = {}
    for i, raw in enumerate(read_list(spec, "podGroupTemplates", "spec.podGroupTemplates")):
        path = f"spec.podGroupTemplates[{i}]"
        if not isinstance(raw, Mapping):
            raise FieldError(path, f"expected an object, got {type(raw).__name__}")
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise FieldError(f"{path}.name", "missing")
        templates[name] = _policy(raw, path, api_version)
    return native.WorkloadInfo(
        namespace=str(meta.get("namespace") or "default"),
        name=read_name(meta),
        uid=str(meta.get("uid") or ""),
        api_version=api_version,
        templates=templates,
        labels=read_str_map(meta, "labels", "metadata.labels"),
        annotations=read_str_map(meta, "annotations", "metadata.annotations"),
    )


def podgroup_from_json(obj: Mapping[str, Any], api_version: str) -> native.NativeGroupInfo:
    """A ``scheduling.k8s.io`` PodGroup of *api_version*; ``ConversionError`` names the field."""
    _check_version(api_version)
    return converted("podgroup", obj, lambda: _podgroup(obj, api_version))


def workload_from_json(obj: Mapping[str, Any], api_version: str) -> native.WorkloadInfo:
    """A ``scheduling.k8s.io`` Workload of *api_version*."""
    _check_version(api_version)
    return converted("workload", obj, lambda: _workload(obj, api_version))
