"""A pod's ResourceClaims (Dynamic Resource Allocation): its ``spec.resourceClaims`` entries
and, for those made from a template, the claims its ``status.resourceClaimStatuses`` names.

Why two halves: the entries are the same for every pod of a role (they go into its
requirements, memoised per spec shape), while the claim the resourceclaim controller makes
from a template is each pod's own (``PodInfo.claim_statuses``). A malformed entry raises
``ValueError("spec.resourceClaims[i].<field>: why")`` (a malformed status field
``FieldError``): the pod is skipped and, if it is this scheduler's, warned about by that
field, never placed as if it claimed nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.kube.read.fields import FieldError, read_list
from scheduler.model.constraints import DeviceClaimUse

_SOURCES = ("resourceClaimName", "resourceClaimTemplateName")


def _entry(raw: Any, path: str) -> DeviceClaimUse:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{path}: expected an object, got {type(raw).__name__}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{path}.name: missing")
    given = [f for f in _SOURCES if raw.get(f) not in (None, "")]
    if len(given) != 1:
        raise ValueError(f"{path}: exactly one of resourceClaimName and "
                         f"resourceClaimTemplateName must be set, {len(given)} are")
    value = raw[given[0]]
    if not isinstance(value, str):
        raise ValueError(f"{path}.{given[0]}: expected a name, got {value!r}")
    if given[0] == "resourceClaimName":
        return DeviceClaimUse(name, claim=value)
    return DeviceClaimUse(name, template=value)


def device_claim_uses(spec: Mapping[str, Any],
                      path: str = "spec.resourceClaims") -> tuple[DeviceClaimUse, ...]:
    """The ``resourceClaims`` entries of a pod's spec (or a PodGroup's: *path*), in their
    order (names unique)."""
    raw = spec.get("resourceClaims")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValueError(f"{path}: expected a list, got {type(raw).__name__}")
    uses = tuple(_entry(r, f"{path}[{i}]") for i, r in enumerate(raw))
    seen: set[str] = set()
    for i, use in enumerate(uses):
        if use.entry in seen:
            raise ValueError(f"{path}[{i}].name: {use.entry} given twice")
        seen.add(use.entry)
    return uses


def claim_statuses(status: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """``status.resourceClaimStatuses`` (a pod's, or a PodGroup's): (entry, claim made for
    it; "" when none was needed), sorted by entry."""
    out: dict[str, str] = {}
    path = "status.resourceClaimStatuses"
    for i, raw in enumerate(read_list(status, "resourceClaimStatuses", path)):
        where = f"{path}[{i}]"
        if not isinstance(raw, Mapping):
            raise FieldError(where, f"expected an object, got {type(raw).__name__}")
        entry, claim = raw.get("name"), raw.get("resourceClaimName")
        if not isinstance(entry, str) or not entry:
            raise FieldError(f"{where}.name", "missing")
        if claim is not None and not isinstance(claim, str):
            raise FieldError(f"{where}.resourceClaimName", f"expected a name, got {claim!r}")
        out[entry] = claim or ""
    return tuple(sorted(out.items()))
