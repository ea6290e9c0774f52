"""Carrying out claim decisions on the apiserver, before a gang binds, and undoing them.

The same two writes kube-scheduler's VolumeBinding makes (``bindAPIUpdate``): a static PV
gets the claim in ``spec.claimRef`` (the PV controller then binds the claim to it), and a
claim to provision gets the ``volume.kubernetes.io/selected-node`` annotation (its
provisioner then creates a PV reachable from that node). Each write reads the object first
and is conditional on its resourceVersion, so a PV taken meanwhile fails the write instead
of being stolen. If any write of a gang fails, or the gang's bind fails afterwards, the
writes already made are undone where nothing has acted on them yet (the PV still
unbound, the claim still unbound); a claim the controller has bound stays bound, as it
does in kube-scheduler, and the gang's next placement honours it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from scheduler.kube.client import MERGE_PATCH, Requester, TransportError, path_segment
from scheduler.model.volumes import SELECTED_NODE_ANNOTATION, ClaimAction, ClaimDecision

log = structlog.get_logger()

BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"


def _claim_path(key: str) -> str:
    ns, name = key.split("/", 1)
    return f"/api/v1/namespaces/{path_segment(ns)}/persistentvolumeclaims/{path_segment(name)}"


def _pv_path(name: str) -> str:
    return f"/api/v1/persistentvolumes/{path_segment(name)}"


@dataclass(frozen=True, slots=True)
class ClaimOutcome:
    done: tuple[ClaimDecision, ...] = ()
    failure: str = ""  # why a write failed (the done ones are undone already)

    @property
    def ok(self) -> bool:
        return not self.failure


class ClaimWriter:
    def __init__(self, client: Requester, timeout: tuple[float, float] = (5.0, 30.0)) -> None:
        self.client = client
        self.timeout = timeout

    def _get(self, path: str) -> dict[str, Any] | str:
        try:
            resp = self.client.request("GET", path, timeout=self.timeout)
        except TransportError as exc:
            return f"no reply from the apiserver: {exc}"
        if not resp.ok:
            return f"HTTP {resp.status}: {resp.message()}"
        body = resp.json()
        return body if isinstance(body, dict) else "unreadable reply"

    def _patch(self, path: str, body: dict[str, Any]) -> str:
        try:
            resp = self.client.request("PATCH", path, body=body, content_type=MERGE_PATCH,
                                       timeout=self.timeout)
        except TransportError as exc:
            return f"no reply from the apiserver: {exc}"
        if resp.ok:
            return ""
        if resp.status == 409:
            return f"changed meanwhile ({resp.message()})"
        return f"HTTP {resp.status}: {resp.message()}"

    def _apply_one(self, d: ClaimDecision) -> str:
        claim = self._get(_claim_path(d.claim))
        if isinstance(claim, str):
            return f"claim {d.claim}: {claim}"
        meta, spec = claim.get("metadata") or {}, claim.get("spec") or {}
        if spec.get("volumeName"):
            return f"claim {d.claim} is bound already (to {spec['volumeName']})"
        if d.action is ClaimAction.PROVISION:
            selected = (meta.get("annotations") or {}).get(SELECTED_NODE_ANNOTATION)
            if selected == d.target:
                return ""
            why = self._patch(_claim_path(d.claim), {"metadata": {
                "resourceVersion": meta.get("resourceVersion"),
                "annotations": {SELECTED_NODE_ANNOTATION: d.target}}})
            return f"claim {d.claim}: {why}" if why else ""
        pv = self._get(_pv_path(d.target))
        if isinstance(pv, str):
            return f"PV {d.target}: {pv}"
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        ns, name = d.claim.split("/", 1)
        if ref and (ref.get("namespace"), ref.get("name")) != (ns, name):
            return f"PV {d.target} is taken by {ref.get('namespace')}/{ref.get('name')}"
        why = self._patch(_pv_path(d.target), {
            "metadata": {"resourceVersion": (pv.get("metadata") or {}).get("resourceVersion"),
                         "annotations": {BOUND_BY_CONTROLLER: "yes"}},
            "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                  "namespace": ns, "name": name, "uid": meta.get("uid"),
                                  "resourceVersion": meta.get("resourceVersion")}}})
        return f"PV {d.target}: {why}" if why else ""

    def apply(self, decisions: Sequence[ClaimDecision], gang: str = "") -> ClaimOutcome:
        """Every write, or none (what was written is undone when one fails)."""
        done: list[ClaimDecision] = []
        for d in decisions:
            why = self._apply_one(d)
            if why:
                self.undo(done, gang)
                log.info("claims_failed", gang=gang, claim=d.claim, reason=why)
                return ClaimOutcome((), why)
            done.append(d)
        return ClaimOutcome(tuple(done))

    def undo(self, decisions: Iterable[ClaimDecision], gang: str = "") -> None:
        """Take back the writes nothing has acted on yet (best effort, logged)."""
        for d in decisions:
            claim = self._get(_claim_path(d.claim))
            if isinstance(claim, str) or (claim.get("spec") or {}).get("volumeName"):
                continue  # gone, unreadable, or bound already: leave it as it is
            meta = claim.get("metadata") or {}
            if d.action is ClaimAction.PROVISION:
                if (meta.get("annotations") or {}).get(SELECTED_NODE_ANNOTATION) == d.target:
                    why = self._patch(_claim_path(d.claim), {"metadata": {
                        "resourceVersion": meta.get("resourceVersion"),
                        "annotations": {SELECTED_NODE_ANNOTATION: None}}})
                    if why:
                        log.warning("claim_undo_failed", gang=gang, claim=d.claim, reason=why)
                continue
            pv = self._get(_pv_path(d.target))
            if isinstance(pv, str):
                continue
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            if ref.get("uid") == meta.get("uid") and (pv.get("status") or {}).get(
                    "phase") != "Bound":
                why = self._patch(_pv_path(d.target), {
                    "metadata": {"resourceVersion": (pv.get("metadata") or {}).get(
                        "resourceVersion"), "annotations": {BOUND_BY_CONTROLLER: None}},
                    "spec": {"claimRef": None}})
                if why:
                    log.warning("claim_undo_failed", gang=gang, claim=d.claim, reason=why)
