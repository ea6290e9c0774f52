"""Writing a ResourceClaim's allocation and reservation (``PreBindKind.DEVICES``), and taking
them back: the apiserver side of Dynamic Resource Allocation for whole gangs (issue 35).

The writes are those kube-scheduler's DynamicResources plugin makes in PreBind (its
``bindClaim``), once per claim for every member of the gang that uses it rather than once per
pod:

- a claim to allocate first gets the ``resource.kubernetes.io/delete-protection`` finalizer,
  in an update of the claim itself (the status subresource cannot change metadata): a claim
  deleted while allocated then stays until the resourceclaim controller has seen no pod
  uses it, and removes the finalizer (also when the status write below fails);
- then one merge patch of its ``/status``: ``allocation`` (devices, the config copied from
  classes and claim, the node selector) and ``reservedFor`` with the gang's pods added. A claim
  allocated already (shared, or allocated by an earlier attempt of this gang) gets only its
  ``reservedFor`` entries.

Each write is conditional on the resourceVersion read just before, and a claim being deleted,
allocated meanwhile to other devices, or that would exceed 256 consumers fails the gang's
pre-bind writes (no retry here: the next cycle places the gang again from what the watch
shows, as kube-scheduler retries the pod). ``allocationTimestamp`` is not written:
kube-scheduler sets it only with the alpha binding-conditions gates, for devices with binding
conditions, which are not offered here (``scheduler.model.devices``); the API says it may be
unset.

Undo (the gang's bind failed and nothing of it was kept) removes the gang's pods from
``reservedFor`` and, when the decision allocated and nobody else uses the claim, clears the
allocation too (kube-scheduler's Unreserve leaves that to the resourceclaim controller; doing
it here frees the devices at once, and the controller still removes the finalizer of the
claim no pod uses).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from scheduler.kube.client import path_segment
from scheduler.kube.write.conditional import CONFLICT, GONE, Api
from scheduler.model.devices import (
    MAX_RESERVED_FOR,
    AllocatedConfig,
    Allocation,
    Consumer,
)
from scheduler.model.pods import NodeSelectorRequirement, NodeSelectorTerm, SelectorOperator
from scheduler.model.prebind import PreBind

#: The finalizer an allocated claim carries (``resourceapi.Finalizer``).
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
#: Tries of an undo whose patch meets a newer resourceVersion (best effort).
UNDO_ATTEMPTS = 3


def claim_path(key: str) -> str:
    """``namespace/name`` -> the ResourceClaim's path."""
    ns, name = key.split("/", 1)
    return (f"/apis/resource.k8s.io/v1/namespaces/{path_segment(ns)}/resourceclaims/"
            f"{path_segment(name)}")


# The v1 JSON ------------------------------------------------------------------------------
def requirement_json(r: NodeSelectorRequirement) -> dict[str, Any]:
    out: dict[str, Any] = {"key": r.key, "operator": str(r.operator)}
    if r.operator not in (SelectorOperator.EXISTS, SelectorOperator.DOES_NOT_EXIST):
        out["values"] = list(r.values)
    return out


def term_json(term: NodeSelectorTerm) -> dict[str, Any]:
    """A ``NodeSelectorTerm`` (empty lists omitted, as the API's ``omitempty`` does)."""
    out: dict[str, Any] = {}
    if term.match_expressions:
        out["matchExpressions"] = [requirement_json(r) for r in term.match_expressions]
    if term.match_fields:
        out["matchFields"] = [requirement_json(r) for r in term.match_fields]
    return out


def config_json(c: AllocatedConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"source": str(c.source)}
    if c.config.requests:
        out["requests"] = list(c.config.requests)
    out["opaque"] = {"driver": c.config.driver, "parameters": json.loads(c.config.parameters)}
    return out


def capacity_name(name: str, driver: str) -> str:
    """A capacity's name as a slice of *driver* writes it: without the driver's own domain
    (the model qualifies names; kube-scheduler sums a device's shares by the slice's key)."""
    prefix = f"{driver}/"
    return name[len(prefix):] if name.startswith(prefix) else name


def quantity_text(amount: Fraction) -> str:
    """An exact amount as a Kubernetes quantity: whole numbers as they are, else in
    thousandths (``m``), which every share of a byte count or core count can be written in
    when it is one; anything finer is rounded up (never claims less than it took)."""
    if amount.denominator == 1:
        return str(amount.numerator)
    return f"{math.ceil(amount * 1000)}m"


def allocation_json(allocation: Allocation,
                    config: tuple[AllocatedConfig, ...] = ()) -> dict[str, Any]:
    """``status.allocation`` as ``resource.k8s.io/v1`` has it."""
    results = []
    for r in allocation.results:
        entry: dict[str, Any] = {"request": r.request, "driver": r.device.driver,
                                 "pool": r.device.pool, "device": r.device.device}
        if r.admin_access:
            entry["adminAccess"] = True
        if r.share_id:
            entry["shareID"] = r.share_id
            entry["consumedCapacity"] = {capacity_name(name, r.device.driver): quantity_text(v)
                                         for name, v in r.consumed}
        results.append(entry)
    devices: dict[str, Any] = {"results": results}
    if config:
        devices["config"] = [config_json(c) for c in config]
    out: dict[str, Any] = {"devices": devices}
    if allocation.node_selector is not None:
        out["nodeSelector"] = {"nodeSelectorTerms": [term_json(allocation.node_selector)]}
    return out


def consumer_json(c: Consumer) -> dict[str, Any]:
    out = {"resource": c.resource, "name": c.name, "uid": c.uid}
    if c.api_group:
        out["apiGroup"] = c.api_group
    return out


def _held(allocation: Mapping[str, Any]) -> list[str]:
    """driver/pool/device of each result of an allocation's JSON, sorted."""
    results = (allocation.get("devices") or {}).get("results") or []
    return sorted(f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in results
                  if isinstance(r, Mapping))


def _entries(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [e for e in status.get("reservedFor") or [] if isinstance(e, dict)]


# Apply and undo -----------------------------------------------------------------------------
def _allocation_to_write(claim: Mapping[str, Any], d: PreBind) -> dict[str, Any] | str | None:
    """The allocation to write (None: the claim holds the decision's already), or why the
    decision cannot be carried out on *claim* as it is now."""
    present = (claim.get("status") or {}).get("allocation")
    if present is None:
        if d.allocation is None:
            return f"claim {d.claim} is not allocated any more"
        return allocation_json(d.allocation, d.config)
    if d.allocation is not None and _held(present) != sorted(d.devices):
        return (f"claim {d.claim} was allocated meanwhile to "
                f"{', '.join(_held(present)) or 'no device'}")
    return None  # allocated already, or by an earlier attempt of this decision: reserve only


def write_devices(api: Api, d: PreBind) -> str:
    """Carry out a ``DEVICES`` decision: why not, "" when done (or nothing was left to do)."""
    path = claim_path(d.claim)
    claim = api.get(path)
    if isinstance(claim, str):
        return f"claim {d.claim}: {claim}"
    meta = claim.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return f"claim {d.claim} is being deleted"
    allocation = _allocation_to_write(claim, d)
    if isinstance(allocation, str):
        return allocation
    reserved = _entries(claim.get("status") or {})
    uids = {e.get("uid") for e in reserved}
    added: list[dict[str, Any]] = []
    for c in d.consumers:
        if c.uid not in uids:
            uids.add(c.uid)
            added.append(consumer_json(c))
    if allocation is None and not added:
        return ""
    if len(reserved) + len(added) > MAX_RESERVED_FOR:
        return (f"claim {d.claim} would be reserved for {len(reserved) + len(added)} "
                f"consumers, at most {MAX_RESERVED_FOR}")
    rv = meta.get("resourceVersion")
    finalizers = list(meta.get("finalizers") or [])
    if allocation is not None and DELETE_PROTECTION not in finalizers:
        patched = api.patch_object(path, {"metadata": {
            "resourceVersion": rv, "finalizers": [*finalizers, DELETE_PROTECTION]}})
        if isinstance(patched, str):
            return f"claim {d.claim}: adding its finalizer: {patched}"
        rv = (patched.get("metadata") or {}).get("resourceVersion")
        if not rv:
            return f"claim {d.claim}: adding its finalizer: unreadable reply"
    status: dict[str, Any] = {"reservedFor": reserved + added}
    if allocation is not None:
        status = {"allocation": allocation, **status}
    why = api.patch(f"{path}/status", {"metadata": {"resourceVersion": rv}, "status": status})
    return f"claim {d.claim}: {why}" if why else ""


def _undo_body(claim: Mapping[str, Any], d: PreBind) -> dict[str, Any] | None:
    """The status patch that takes *d* back from *claim* (None: nothing of it is left)."""
    status = claim.get("status") or {}
    ours = {c.uid for c in d.consumers}
    reserved = _entries(status)
    kept = [e for e in reserved if e.get("uid") not in ours]
    present = status.get("allocation")
    clear = (d.allocation is not None and present is not None and not kept
             and _held(present) == sorted(d.devices))
    if len(kept) == len(reserved) and not clear:
        return None
    body: dict[str, Any] = {"reservedFor": kept or None}
    if clear:
        body["allocation"] = None
    return {"metadata": {"resourceVersion": (claim.get("metadata") or {}).get(
        "resourceVersion")}, "status": body}


def undo_devices(api: Api, d: PreBind) -> str:
    """Take a ``DEVICES`` decision back (best effort): why not, "" when done or when there
    is nothing to take back (the claim gone, or changed by others past it)."""
    path = claim_path(d.claim)
    why = ""
    for _ in range(UNDO_ATTEMPTS):
        claim = api.get(path)
        if isinstance(claim, str):
            return "" if claim.startswith(GONE) else f"claim {d.claim}: {claim}"
        body = _undo_body(claim, d)
        if body is None:
            return ""
        why = api.patch(f"{path}/status", body)
        if not why.startswith(CONFLICT):
            break
    return f"claim {d.claim}: {why}" if why else ""
