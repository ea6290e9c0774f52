"""Carrying out pre-bind decisions on the apiserver, before a gang binds, and undoing them.

One row per ``PreBindKind`` in ``WRITES``: how the decision is written, and how it is taken
back. The volume kinds are the two writes kube-scheduler's VolumeBinding makes
(``bindAPIUpdate``): a static PV gets the claim in ``spec.claimRef`` (``CLAIM_REF``: the PV
controller then binds the claim to it), and a claim to provision gets the
``volume.kubernetes.io/selected-node`` annotation (``SELECTED_NODE``: its provisioner then
creates a PV reachable from that node). Each write reads the object first and is
conditional on its resourceVersion, so a PV taken meanwhile fails the write instead of being
stolen. If any write of a gang fails, or the gang's bind fails afterwards, the writes
already made are undone where nothing has acted on them yet (the PV still unbound, the claim
still unbound); a claim the controller has bound stays bound, as it does in kube-scheduler,
and the gang's next placement honours it. ``DEVICES`` (a ResourceClaim's allocation and
reservation, issue 35) is written as kube-scheduler's DynamicResources writes it:
``scheduler.kube.write.claim_allocation``; a pod's HAMi share claim (a ``~hami.io``
claim no apiserver holds) is written as the pod's annotations HAMi's device plugin reads:
``scheduler.kube.write.hami_annotations``.

The writes go through the actuator's client, the binder's, which is fenced: a write refused
because this replica no longer leads raises ``Fenced``, which fails the gang's pre-bind
writes as fenced (``PreBindOutcome.fenced``: the gang does not bind and is not backed off)
and takes nothing back: what was written stays for the leader, as a fenced bind's members do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from scheduler.kube.client import Requester, path_segment
from scheduler.kube.lead.fence import Fenced
from scheduler.kube.write import hami_annotations
from scheduler.kube.write.claim_allocation import undo_devices, write_devices
from scheduler.kube.write.conditional import Api
from scheduler.model.prebind import PreBind, PreBindKind
from scheduler.model.volumes import SELECTED_NODE_ANNOTATION

log = structlog.get_logger()

BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"


def _claim_path(key: str) -> str:
    ns, name = key.split("/", 1)
    return f"/api/v1/namespaces/{path_segment(ns)}/persistentvolumeclaims/{path_segment(name)}"


def _pv_path(name: str) -> str:
    return f"/api/v1/persistentvolumes/{path_segment(name)}"


@dataclass(frozen=True, slots=True)
class PreBindOutcome:
    done: tuple[PreBind, ...] = ()
    failure: str = ""  # why a write failed (the done ones are undone already)
    #: The failure was the leader fence's: nothing was taken back (not ours to write).
    fenced: bool = False

    @property
    def ok(self) -> bool:
        return not self.failure


@dataclass(frozen=True, slots=True)
class KindWrites:
    """How one kind of pre-bind decision is written (returns why not, "" when done) and
    taken back (best effort: returns why the undo failed, "" when done or not needed)."""

    apply: Callable[[Api, PreBind], str]
    undo: Callable[[Api, PreBind], str]


def _unbound_claim(api: Api, d: PreBind) -> dict[str, Any] | str:
    """The claim of a volume decision, or why it cannot be written (unreadable, bound)."""
    claim = api.get(_claim_path(d.claim))
    if isinstance(claim, str):
        return f"claim {d.claim}: {claim}"
    spec = claim.get("spec") or {}
    if spec.get("volumeName"):
        return f"claim {d.claim} is bound already (to {spec['volumeName']})"
    return claim


def _write_selected_node(api: Api, d: PreBind) -> str:
    claim = _unbound_claim(api, d)
    if isinstance(claim, str):
        return claim
    meta = claim.get("metadata") or {}
    if (meta.get("annotations") or {}).get(SELECTED_NODE_ANNOTATION) == d.target:
        return ""
    why = api.patch(_claim_path(d.claim), {"metadata": {
        "resourceVersion": meta.get("resourceVersion"),
        "annotations": {SELECTED_NODE_ANNOTATION: d.target}}})
    return f"claim {d.claim}: {why}" if why else ""


def _write_claim_ref(api: Api, d: PreBind) -> str:
    claim = _unbound_claim(api, d)
    if isinstance(claim, str):
        return claim
    meta = claim.get("metadata") or {}
    pv = api.get(_pv_path(d.target))
    if isinstance(pv, str):
        return f"PV {d.target}: {pv}"
    ref = (pv.get("spec") or {}).get("claimRef") or {}
    ns, name = d.claim.split("/", 1)
    if ref and (ref.get("namespace"), ref.get("name")) != (ns, name):
        return f"PV {d.target} is taken by {ref.get('namespace')}/{ref.get('name')}"
    why = api.patch(_pv_path(d.target), {
        "metadata": {"resourceVersion": (pv.get("metadata") or {}).get("resourceVersion"),
                     "annotations": {BOUND_BY_CONTROLLER: "yes"}},
        "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                              "namespace": ns, "name": name, "uid": meta.get("uid"),
                              "resourceVersion": meta.get("resourceVersion")}}})
    return f"PV {d.target}: {why}" if why else ""


def _undo_selected_node(api: Api, d: PreBind) -> str:
    claim = _unbound_claim(api, d)
    if isinstance(claim, str):
        return ""  # gone, unreadable, or bound already: leave it as it is
    meta = claim.get("metadata") or {}
    if (meta.get("annotations") or {}).get(SELECTED_NODE_ANNOTATION) != d.target:
        return ""
    return api.patch(_claim_path(d.claim), {"metadata": {
        "resourceVersion": meta.get("resourceVersion"),
        "annotations": {SELECTED_NODE_ANNOTATION: None}}})


def _undo_claim_ref(api: Api, d: PreBind) -> str:
    claim = _unbound_claim(api, d)
    if isinstance(claim, str):
        return ""  # gone, unreadable, or bound already: leave it as it is
    meta = claim.get("metadata") or {}
    pv = api.get(_pv_path(d.target))
    if isinstance(pv, str):
        return ""
    ref = (pv.get("spec") or {}).get("claimRef") or {}
    if ref.get("uid") != meta.get("uid") or (pv.get("status") or {}).get("phase") == "Bound":
        return ""
    return api.patch(_pv_path(d.target), {
        "metadata": {"resourceVersion": (pv.get("metadata") or {}).get("resourceVersion"),
                     "annotations": {BOUND_BY_CONTROLLER: None}},
        "spec": {"claimRef": None}})


WRITES: Mapping[PreBindKind, KindWrites] = {
    PreBindKind.CLAIM_REF: KindWrites(_write_claim_ref, _undo_claim_ref),
    PreBindKind.SELECTED_NODE: KindWrites(_write_selected_node, _undo_selected_node),
    PreBindKind.DEVICES: KindWrites(
        lambda api, d: (hami_annotations.write if hami_annotations.is_share_claim(d.claim)
                        else write_devices)(api, d),
        lambda api, d: (hami_annotations.undo if hami_annotations.is_share_claim(d.claim)
                        else undo_devices)(api, d)),
}


class PreBindWriter:
    def __init__(self, client: Requester, timeout: tuple[float, float] = (5.0, 30.0)) -> None:
        self.api = Api(client, timeout)

    def apply(self, decisions: Sequence[PreBind], gang: str = "") -> PreBindOutcome:
        """Every write, or none (what was written is undone when one fails; not when the
        fence refused one: then this replica may not write, nor take back)."""
        done: list[PreBind] = []
        for d in decisions:
            try:
                why = WRITES[d.kind].apply(self.api, d)
            except Fenced as exc:
                log.warning("claims_fenced", gang=gang, claim=d.claim, written=len(done),
                            reason=str(exc))
                return PreBindOutcome((), f"fenced: {exc}", fenced=True)
            if why:
                self.undo(done, gang)
                log.info("claims_failed", gang=gang, claim=d.claim, reason=why)
                return PreBindOutcome((), why)
            done.append(d)
        return PreBindOutcome(tuple(done))

    def undo(self, decisions: Iterable[PreBind], gang: str = "") -> None:
        """Take back the writes nothing has acted on yet (best effort, logged)."""
        for d in decisions:
            try:
                why = WRITES[d.kind].undo(self.api, d)
            except Fenced as exc:  # every other write would be refused as well
                log.warning("claim_undo_fenced", gang=gang, claim=d.claim, reason=str(exc))
                return
            if why:
                log.warning("claim_undo_failed", gang=gang, claim=d.claim, reason=why)
