"""PreBindWriter: pre-bind decisions written conditionally before a gang binds, undone when the
gang cannot bind, and never taking a PV someone else has meanwhile."""

from __future__ import annotations

import copy
import json
from typing import Any

from scheduler.kube.client import Response
from scheduler.kube.write.prebind import PreBindWriter
from scheduler.model.prebind import PreBind, PreBindKind
from scheduler.model.volumes import SELECTED_NODE_ANNOTATION

BIND = PreBind("ns/ckpt", PreBindKind.CLAIM_REF, "pv-1")
PROVISION = PreBind("ns/data", PreBindKind.SELECTED_NODE, "node-1")


class FakeApi:
    """Objects by path; GET returns them, PATCH merges (honouring resourceVersion) and
    returns the object; a ``/status`` subresource is its object's."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {
            "/api/v1/namespaces/ns/persistentvolumeclaims/ckpt": {
                "metadata": {"name": "ckpt", "uid": "c1", "resourceVersion": "1"}, "spec": {}},
            "/api/v1/namespaces/ns/persistentvolumeclaims/data": {
                "metadata": {"name": "data", "uid": "d1", "resourceVersion": "1"}, "spec": {}},
            "/api/v1/persistentvolumes/pv-1": {
                "metadata": {"name": "pv-1", "resourceVersion": "5"}, "spec": {},
                "status": {"phase": "Available"}},
        }
        self.refuse: set[str] = set()
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Response:
        obj = self.objects.get(path.removesuffix("/status"))
        if obj is None:
            return Response(404, b'{"message": "not found"}')
        if method == "GET":
            return Response(200, json.dumps(obj).encode())
        if path in self.refuse:
            return Response(409, b'{"message": "conflict"}')
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if rv is not None and rv != obj["metadata"]["resourceVersion"]:
            return Response(409, b'{"message": "stale"}')
        self.patches.append((path, copy.deepcopy(body)))
        _merge(obj, body)
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
        return Response(200, json.dumps(obj).encode())


def _merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
    for k, v in patch.items():
        if v is None:
            into.pop(k, None)
        elif isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = copy.deepcopy(v)


def test_writes_the_pv_claim_ref_and_the_selected_node() -> None:
    api = FakeApi()
    out = PreBindWriter(api).apply([BIND, PROVISION], "ns/g")  # type: ignore[arg-type]
    assert out.ok and out.done == (BIND, PROVISION)
    pv = api.objects["/api/v1/persistentvolumes/pv-1"]
    assert pv["spec"]["claimRef"]["name"] == "ckpt" and pv["spec"]["claimRef"]["uid"] == "c1"
    data = api.objects["/api/v1/namespaces/ns/persistentvolumeclaims/data"]
    assert data["metadata"]["annotations"][SELECTED_NODE_ANNOTATION] == "node-1"


def test_a_failed_write_undoes_the_ones_made() -> None:
    api = FakeApi()
    api.refuse.add("/api/v1/namespaces/ns/persistentvolumeclaims/data")
    out = PreBindWriter(api).apply([BIND, PROVISION], "ns/g")  # type: ignore[arg-type]
    assert not out.ok and "conflict" in out.failure and out.done == ()
    assert "claimRef" not in api.objects["/api/v1/persistentvolumes/pv-1"]["spec"]


def test_a_pv_taken_by_another_claim_is_not_stolen() -> None:
    api = FakeApi()
    api.objects["/api/v1/persistentvolumes/pv-1"]["spec"]["claimRef"] = {
        "namespace": "other", "name": "x"}
    out = PreBindWriter(api).apply([BIND], "ns/g")  # type: ignore[arg-type]
    assert not out.ok and "taken by other/x" in out.failure and api.patches == []


def test_undo_after_a_failed_bind_leaves_what_the_controller_completed() -> None:
    api = FakeApi()
    writer = PreBindWriter(api)  # type: ignore[arg-type]
    assert writer.apply([BIND, PROVISION]).ok
    # The PV binder completed the checkpoint claim meanwhile; the provisioner did nothing.
    api.objects["/api/v1/namespaces/ns/persistentvolumeclaims/ckpt"]["spec"]["volumeName"] = \
        "pv-1"
    writer.undo([BIND, PROVISION])
    assert api.objects["/api/v1/persistentvolumes/pv-1"]["spec"]["claimRef"]["name"] == "ckpt"
    data = api.objects["/api/v1/namespaces/ns/persistentvolumeclaims/data"]
    assert SELECTED_NODE_ANNOTATION not in data["metadata"].get("annotations", {})
