"""Apiserver JSON -> volume and namespace facts: PVCs, PVs, StorageClasses, CSINodes,
Namespaces (the part of the cluster kube-scheduler's volume and affinity plugins read).

Same contract as ``convert``: pure functions over dicts; a malformed object raises
``ConversionError`` naming the object and the field, and the feed keeps its last good state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.kube.read.convert import (
    _convert,
    _Fail,
    _list,
    _map,
    _name,
    _str_map,
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
        raise _Fail(path, f"expected an object, got {type(value).__name__}")
    return value


def _storage(raw: Any, path: str) -> int:
    if raw is None:
        return 0
    try:
        return parse_quantity(raw, "storage")
    except QuantityError as exc:
        raise _Fail(path, str(exc).removeprefix("storage: ")) from None


def _modes(spec: Mapping[str, Any], path: str) -> frozenset[str]:
    return frozenset(str(m) for m in _list(spec, "accessModes", path))


def _class(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    annotations = _str_map(meta, "annotations", "metadata.annotations")
    if CLASS_ANNOTATION in annotations:
        return annotations[CLASS_ANNOTATION]
    return str(spec.get("storageClassName") or "")


def _claim(obj: Mapping[str, Any]) -> Claim:
    meta, spec = _map(obj, "metadata", "metadata"), _map(obj, "spec", "spec")
    status = _map(obj, "status", "status")
    annotations = _str_map(meta, "annotations", "metadata.annotations")
    requests = _map(_map(spec, "resources", "spec.resources"), "requests",
                    "spec.resources.requests")
    selector = (label_selector(spec["selector"], "spec.selector")
                if spec.get("selector") is not None else None)
    return Claim(
        namespace=str(meta.get("namespace") or "default"), name=_name(meta),
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
    meta, spec = _map(obj, "metadata", "metadata"), _map(obj, "spec", "spec")
    status = _map(obj, "status", "status")
    required = _map(_map(spec, "nodeAffinity", "spec.nodeAffinity"), "required",
                    "spec.nodeAffinity.required")
    where = "spec.nodeAffinity.required.nodeSelectorTerms"
    try:
        terms = tuple(node_selector_term(t, f"{where}[{i}]")
                      for i, t in enumerate(_list(required, "nodeSelectorTerms", where)))
    except ValueError as exc:
        path, _, reason = str(exc).partition(": ")
        raise _Fail(path, reason) from None
    ref_raw = spec.get("claimRef")
    ref = None
    if isinstance(ref_raw, Mapping) and ref_raw.get("name"):
        ref = ClaimRef(str(ref_raw.get("namespace") or ""), str(ref_raw["name"]),
                       str(ref_raw.get("uid") or ""))
    try:
        phase = VolumePhase(status.get("phase") or "Pending")
    except ValueError:
        raise _Fail("status.phase", f"unknown phase {status.get('phase')!r}") from None
    csi = _map(spec, "csi", "spec.csi")
    return Volume(
        name=_name(meta),
        capacity=_storage(_map(spec, "capacity", "spec.capacity").get("storage"),
                          "spec.capacity.storage"),
        access_modes=_modes(spec, "spec.accessModes"), storage_class=_class(meta, spec),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"), node_affinity=terms,
        labels=Labels(_str_map(meta, "labels", "metadata.labels")), claim_ref=ref, phase=phase,
        csi_driver=str(csi.get("driver") or ""), csi_handle=str(csi.get("volumeHandle") or ""),
        terminating=bool(meta.get("deletionTimestamp")),
        attributes_class=str(spec.get("volumeAttributesClassName") or ""),
        resource_version=str(meta.get("resourceVersion") or ""))


def _storage_class(obj: Mapping[str, Any]) -> StorageClass:
    meta = _map(obj, "metadata", "metadata")
    mode = obj.get("volumeBindingMode") or "Immediate"
    if mode not in ("Immediate", "WaitForFirstConsumer"):
        raise _Fail("volumeBindingMode", f"unknown mode {mode!r}")
    terms = []
    for i, t in enumerate(_list(obj, "allowedTopologies", "allowedTopologies")):
        where = f"allowedTopologies[{i}].matchLabelExpressions"
        exprs = []
        for j, e in enumerate(_list(_obj(t, f"allowedTopologies[{i}]"),
                                    "matchLabelExpressions", where)):
            e = _obj(e, f"{where}[{j}]")
            if not e.get("key"):
                raise _Fail(f"{where}[{j}].key", "missing")
            values = tuple(str(v) for v in _list(e, "values", f"{where}[{j}].values"))
            exprs.append(NodeSelectorRequirement(str(e["key"]), SelectorOperator.IN, values))
        terms.append(NodeSelectorTerm(tuple(exprs)))
    return StorageClass(_name(meta), str(obj.get("provisioner") or ""),
                        mode == "WaitForFirstConsumer", tuple(terms))


def _csinode(obj: Mapping[str, Any]) -> tuple[str, dict[str, int]]:
    """(node, driver -> attach limit) from a CSINode; drivers without a count are absent."""
    meta, spec = _map(obj, "metadata", "metadata"), _map(obj, "spec", "spec")
    limits = {}
    for i, d in enumerate(_list(spec, "drivers", "spec.drivers")):
        d = _obj(d, f"spec.drivers[{i}]")
        count = _map(d, "allocatable", f"spec.drivers[{i}].allocatable").get("count")
        if count is None:
            continue
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise _Fail(f"spec.drivers[{i}].allocatable.count", f"must be >= 0, got {count!r}")
        limits[str(d.get("name") or "")] = count
    return _name(meta), limits


def _namespace(obj: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    meta = _map(obj, "metadata", "metadata")
    return _name(meta), _str_map(meta, "labels", "metadata.labels")


def claim_from_json(obj: Mapping[str, Any]) -> Claim:
    return _convert("persistentvolumeclaim", obj, lambda: _claim(obj))


def volume_from_json(obj: Mapping[str, Any]) -> Volume:
    return _convert("persistentvolume", obj, lambda: _volume(obj))


def storage_class_from_json(obj: Mapping[str, Any]) -> StorageClass:
    return _convert("storageclass", obj, lambda: _storage_class(obj))


def csinode_from_json(obj: Mapping[str, Any]) -> tuple[str, dict[str, int]]:
    return _convert("csinode", obj, lambda: _csinode(obj))


def namespace_from_json(obj: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    return _convert("namespace", obj, lambda: _namespace(obj))
