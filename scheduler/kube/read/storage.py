"""Apiserver JSON -> volume and namespace facts: PVCs, PVs, StorageClasses, CSINodes,
Namespaces (the part of the cluster kube-scheduler's volume and affinity plugins read).

Same contract as ``convert``: pure functions over dicts; a malformed object raises
``ConversionError`` naming the object and the field, and the feed keeps its last good state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.kube.read.fields import (
    FieldError,
    converted,
    read_list,
    read_map,
    read_name,
    read_str_map,
)
from scheduler.kube.read.podspec import label_selector
from scheduler.model.labels import Labels
from scheduler.model.pods import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    SelectorOperator,
    node_selector_term,
)
from scheduler.model.resources import QuantityError, parse_quantity
from scheduler.model.volumes import (
    BIND_COMPLETED_ANNOTATION,
    SELECTED_NODE_ANNOTATION,
    Claim,
    ClaimRef,
    StorageClass,
    Volume,
    VolumePhase,
)

#: The beta annotation naming a claim's or PV's class; it wins over spec.storageClassName.
CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"


def _obj(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise FieldError(path, f"expected an object, got {type(value).__name__}")
    return value


def _storage(raw: Any, path: str) -> int:
    if raw is None:
        return 0
    try:
        return parse_quantity(raw, "storage")
    except QuantityError as exc:
        raise FieldError(path, str(exc).removeprefix("storage: ")) from None


def _modes(spec: Mapping[str, Any], path: str) -> frozenset[str]:
    return frozenset(str(m) for m in read_list(spec, "accessModes", path))


def _class(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    annotations = read_str_map(meta, "annotations", "metadata.annotations")
    if CLASS_ANNOTATION in annotations:
        return annotations[CLASS_ANNOTATION]
    return str(spec.get("storageClassName") or "")


def _claim(obj: Mapping[str, Any]) -> Claim:
    meta, spec = read_map(obj, "metadata", "metadata"), read_map(obj, "spec", "spec")
    status = read_map(obj, "status", "status")
    annotations = read_str_map(meta, "annotations", "metadata.annotations")
    requests = read_map(read_map(spec, "resources", "spec.resources"), "requests",
                    "spec.resources.requests")
    selector = (label_selector(spec["selector"], "spec.selector")
                if spec.get("selector") is not None else None)
    return Claim(
        namespace=str(meta.get("namespace") or "default"), name=read_name(meta),
        uid=str(meta.get("uid") or ""), storage_class=_class(meta, spec),
        volume_name=str(spec.get("volumeName") or ""),
        bind_completed=BIND_COMPLETED_ANNOTATION in annotations,
        lost=status.get("phase") == "Lost",
        request=_storage(requests.get("storage"), "spec.resources.requests.storage"),
        access_modes=_modes(spec, "spec.accessModes"),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"), selector=selector,
        selected_node=annotations.get(SELECTED_NODE_ANNOTATION, ""),
        terminating=bool(meta.get("deletionTimestamp")),
        attributes_class=str(spec.get("volumeAttributesClassName") or ""),
        resource_version=str(meta.get("resourceVersion") or ""))


def _volume(obj: Mapping[str, Any]) -> Volume:
    meta, spec = read_map(obj, "metadata", "metadata"), read_map(obj, "spec", "spec")
    status = read_map(obj, "status", "status")
    required = read_map(read_map(spec, "nodeAffinity", "spec.nodeAffinity"), "required",
                    "spec.nodeAffinity.required")
    where = "spec.nodeAffinity.required.nodeSelectorTerms"
    try:
        terms = tuple(node_selector_term(t, f"{where}[{i}]")
                      for i, t in enumerate(read_list(required, "nodeSelectorTerms", where)))
    except ValueError as exc:
        path, _, reason = str(exc).partition(": ")
        raise FieldError(path, reason) from None
    ref_raw = spec.get("claimRef")
    ref = None
    if isinstance(ref_raw, Mapping) and ref_raw.get("name"):
        ref = ClaimRef(str(ref_raw.get("namespace") or ""), str(ref_raw["name"]),
                       str(ref_raw.get("uid") or ""))
    try:
        phase = VolumePhase(status.get("phase") or "Pending")
    except ValueError:
        raise FieldError("status.phase", f"unknown phase {status.get('phase')!r}") from None
    csi = read_map(spec, "csi", "spec.csi")
    return Volume(
        name=read_name(meta),
        capacity=_storage(read_map(spec, "capacity", "spec.capacity").get("storage"),
                          "spec.capacity.storage"),
        access_modes=_modes(spec, "spec.accessModes"), storage_class=_class(meta, spec),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"), node_affinity=terms,
        labels=Labels(read_str_map(meta, "labels", "metadata.labels")), claim_ref=ref, phase=phase,
        csi_driver=str(csi.get("driver") or ""), csi_handle=str(csi.get("volumeHandle") or ""),
        terminating=bool(meta.get("deletionTimestamp")),
        attributes_class=str(spec.get("volumeAttributesClassName") or ""),
        resource_version=str(meta.get("resourceVersion") or ""))


def _storage_class(obj: Mapping[str, Any]) -> StorageClass:
    meta = read_map(obj, "metadata", "metadata")
    mode = obj.get("volumeBindingMode") or "Immediate"
    if mode not in ("Immediate", "WaitForFirstConsumer"):
        raise FieldError("volumeBindingMode", f"unknown mode {mode!r}")
    terms = []
    for i, t in enumerate(read_list(obj, "allowedTopologies", "allowedTopologies")):
        where = f"allowedTopologies[{i}].matchLabelExpressions"
        exprs = []
        for j, e in enumerate(read_list(_obj(t, f"allowedTopologies[{i}]"),
                                    "matchLabelExpressions", where)):
            e = _obj(e, f"{where}[{j}]")
            if not e.get("key"):
                raise FieldError(f"{where}[{j}].key", "missing")
            values = tuple(str(v) for v in read_list(e, "values", f"{where}[{j}].values"))
            exprs.append(NodeSelectorRequirement(str(e["key"]), SelectorOperator.IN, values))
        terms.append(NodeSelectorTerm(tuple(exprs)))
    return StorageClass(read_name(meta), str(obj.get("provisioner") or ""),
                        mode == "WaitForFirstConsumer", tuple(terms))


def _csinode(obj: Mapping[str, Any]) -> tuple[str, dict[str, int]]:
    """(node, driver -> attach limit) from a CSINode; drivers without a count are absent."""
    meta, spec = read_map(obj, "metadata", "metadata"), read_map(obj, "spec", "spec")
    limits = {}
    for i, d in enumerate(read_list(spec, "drivers", "spec.drivers")):
        d = _obj(d, f"spec.drivers[{i}]")
        count = read_map(d, "allocatable", f"spec.drivers[{i}].allocatable").get("count")
        if count is None:
            continue
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise FieldError(f"spec.drivers[{i}].allocatable.count", f"must be >= 0, got {count!r}")
        limits[str(d.get("name") or "")] = count
    return read_name(meta), limits


def _namespace(obj: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    meta = read_map(obj, "metadata", "metadata")
    return read_name(meta), read_str_map(meta, "labels", "metadata.labels")


def claim_from_json(obj: Mapping[str, Any]) -> Claim:
    return converted("persistentvolumeclaim", obj, lambda: _claim(obj))


def volume_from_json(obj: Mapping[str, Any]) -> Volume:
    return converted("persistentvolume", obj, lambda: _volume(obj))


def storage_class_from_json(obj: Mapping[str, Any]) -> StorageClass:
    return converted("storageclass", obj, lambda: _storage_class(obj))


def csinode_from_json(obj: Mapping[str, Any]) -> tuple[str, dict[str, int]]:
    return converted("csinode", obj, lambda: _csinode(obj))


def namespace_from_json(obj: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    return converted("namespace", obj, lambda: _namespace(obj))
