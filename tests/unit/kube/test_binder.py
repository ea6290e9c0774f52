"""Gang binding against an in-memory pod store that answers like the apiserver does.

Nothing is ever deleted by a bind that fails: what is bound is kept, and when every failure
is transient the rest is parked for the retry (``scheduler.kube.write.binder``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.kube.client import Response, TransportError
from scheduler.kube.lead.fence import Fenced
from scheduler.kube.write.binder import (
    FENCED,
    SKIPPED,
    UNKNOWN,
    Binder,
)
from scheduler.model import PodRef


@dataclass
class PodStore:
    """Pods by name with the apiserver's binding/delete/eviction answers, plus fault injection."""

    pods: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> {uid, node}
    lost_reply: set[str] = field(default_factory=set)  # bind happens, reply is lost
    no_reply: set[str] = field(default_factory=set)  # bind never reaches the server
    undeletable: set[str] = field(default_factory=set)
    pdb_protected: set[str] = field(default_factory=set)
    unavailable: dict[str, int] = field(default_factory=dict)  # name -> 503s before it binds
    calls: list[tuple[str, str]] = field(default_factory=list)
    patched: list[tuple[str, Any]] = field(default_factory=list)  # (name, status) per PATCH
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, *names: str, node: str = "") -> list[PodRef]:
        for n in names:
            self.pods[n] = {"uid": f"uid-{n}", "node": node}
        return [PodRef("ns", n, f"uid-{n}") for n in names]

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        parts = path.split("/")  # /api/v1/namespaces/ns/pods/<name>[/sub]
        name, sub = parts[6], (parts[7] if len(parts) > 7 else "")
        with self.lock:
            self.calls.append((method + (f" {sub}" if sub else ""), name))
            return self._answer(method, name, sub, body)

    def _answer(self, method: str, name: str, sub: str, body: Any) -> Response:
        pod = self.pods.get(name)
        if method == "POST" and sub == "binding" and name in self.no_reply:
            raise TransportError("connection reset")
        if method == "POST" and sub == "binding" and self.unavailable.get(name, 0) > 0:
            self.unavailable[name] -= 1
            return _status(503, "the server is currently unable to handle the request")
        if pod is None:
            return _status(404, f'pods "{name}" not found')
        if method == "GET":
            return Response(200, json.dumps({"metadata": {"uid": pod["uid"]},
                                             "spec": {"nodeName": pod["node"]}}).encode())
        want_uid = ((body.get("metadata") or {}).get("uid")
                    or (body.get("preconditions") or {}).get("uid")
                    or ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid"))
        if want_uid and want_uid != pod["uid"]:
            return _status(409, "Precondition failed: UID in precondition")
        if method == "PATCH" and sub == "status":
            self.patched.append((name, body["status"]))
            return _status(200, "")
        if sub == "binding":
            if pod["node"]:
                return _status(409, f'pod {name} is already assigned to node "{pod["node"]}"')
            pod["node"] = body["target"]["name"]
            if name in self.lost_reply:
                raise TransportError("read timed out")
            return _status(201, "")
        if sub == "eviction" and name in self.pdb_protected:
            return _status(429, "Cannot evict pod as it would violate the pod's disruption budget.")
        if method == "DELETE" and name in self.undeletable:
            return _status(500, "etcd is unhappy")
        del self.pods[name]
        return _status(200 if method == "DELETE" else 201, "")


def _status(code: int, message: str) -> Response:
    return Response(code, json.dumps({"kind": "Status", "code": code, "message": message}).encode())


@pytest.fixture
def store() -> PodStore:
    return PodStore()


@pytest.fixture
def binder(store: PodStore) -> Iterator[Binder]:
    b = Binder(store, concurrency=4, delete_attempts=2)  # type: ignore[arg-type]
    yield b
    b.close()


def test_a_gang_is_bound_whole(store: PodStore, binder: Binder) -> None:
    refs = store.add("w0", "w1", "w2")
    out = binder.bind_gang([(r, f"n{i}") for i, r in enumerate(refs)], "gang-scheduler", "ns/g")
    assert out.ok and len(out.bound) == 3 and out.describe() == "bound 3 pods"
    assert [store.pods[n]["node"] for n in ("w0", "w1", "w2")] == ["n0", "n1", "n2"]


def deletes(store: PodStore) -> list[str]:
    return [name for method, name in store.calls if method == "DELETE"]


def test_a_deleted_member_fails_its_gang_and_the_bound_ones_are_kept(
        store: PodStore, binder: Binder) -> None:
    refs = store.add("w0", "w1", "w2")
    del store.pods["w1"]  # deleted between decision and bind
    out = binder.bind_gang([(r, "n0") for r in refs], "gang-scheduler", "ns/g")
    assert not out.ok and not out.transient and out.parked == ()
    real = [f for f in out.failed if f.code != SKIPPED]
    assert [(f.pod.name, f.code) for f in real] == [("w1", 404)]
    assert "pod deleted before binding" in real[0].reason
    # Whatever got bound before the failure stopped the rest is kept, where it is.
    assert {ref.name: node for ref, node in out.bound} == {
        n: "n0" for n in ("w0", "w2") if store.pods[n]["node"]}
    assert deletes(store) == []
    assert out.describe() == (f"binding ns/w1: {real[0].reason} failed; {len(out.bound)} "
                              "bound members kept")


def test_a_recreated_namesake_is_never_bound(store: PodStore, binder: Binder) -> None:
    refs = store.add("w0", "w1")
    store.pods["w1"]["uid"] = "uid-w1-reborn"
    out = binder.bind_gang([(r, "n0") for r in refs], "gang-scheduler")
    assert not out.ok and not out.transient
    assert store.pods["w1"]["node"] == "" and deletes(store) == []


def test_an_already_bound_pod_is_not_rebound_it_counts_as_bound_where_it_is(
        store: PodStore, binder: Binder) -> None:
    """A 409 may be a bind whose reply was lost (or a predecessor's) that landed: read back,
    this incarnation is on a node, so it is bound there (never re-bound, never deleted)."""
    refs = store.add("w0") + store.add("w1", node="elsewhere")
    out = binder.bind_gang([(r, "n0") for r in refs], "gang-scheduler")
    assert out.ok and set(out.bound) == {(refs[0], "n0"), (refs[1], "elsewhere")}
    assert store.pods["w1"]["node"] == "elsewhere" and ("GET", "w1") in store.calls


@pytest.mark.parametrize("lost", ["reply", "request"])
def test_a_bind_without_a_reply_is_read_back_and_parked_unless_it_landed(
        store: PodStore, lost: str) -> None:
    serial = Binder(store, concurrency=1)  # type: ignore[arg-type]
    refs = store.add("w0", "w1", "w2")
    # w1's bind lands but its reply is lost, or it never reaches the server; w2 is not sent.
    (store.lost_reply if lost == "reply" else store.no_reply).add("w1")
    out = serial.bind_gang([(r, "n0") for r in refs], "gang-scheduler", "ns/g")
    serial.close()
    assert not out.ok and out.transient and out.unanswered
    if lost == "reply":  # read back: it did land
        assert out.bound == ((refs[0], "n0"), (refs[1], "n0"))
        assert [f.code for f in out.failed] == [SKIPPED]
        assert out.parked == ((refs[2], "n0"),)
    else:
        assert out.bound == ((refs[0], "n0"),)
        assert [f.code for f in out.failed] == [UNKNOWN, SKIPPED]
        assert out.parked == ((refs[1], "n0"), (refs[2], "n0"))
        assert store.pods["w1"]["node"] == ""
    assert ("GET", "w1") in store.calls and deletes(store) == []
    assert out.describe().endswith(f"{len(out.bound)} bound members kept, {len(out.parked)} "
                                   "parked on their nodes until the apiserver answers")


def test_a_bind_without_a_reply_whose_pod_is_gone_since_is_not_parked(store: PodStore) -> None:
    serial = Binder(store, concurrency=1)  # type: ignore[arg-type]
    refs = store.add("w0", "w1")
    store.no_reply.add("w0")
    del store.pods["w0"]  # read back: gone, retrying cannot mend it
    out = serial.bind_gang([(r, "n0") for r in refs], "gang-scheduler", "ns/g")
    serial.close()
    assert not out.transient and out.parked == ()
    assert [f.code for f in out.failed] == [404, SKIPPED]


def test_a_failed_delete_is_retried_and_reported(store: PodStore, binder: Binder) -> None:
    (ref,) = store.add("w0", node="n0")
    store.undeletable.add("w0")
    (failure,) = binder.delete_pods([ref])
    assert failure.pod == ref and failure.code == 500
    assert deletes(store) == ["w0", "w0"]  # delete_attempts


def test_members_queued_behind_a_failure_are_skipped(store: PodStore) -> None:
    serial = Binder(store, concurrency=1)  # type: ignore[arg-type]
    refs = store.add("w0", "w1", "w2")
    del store.pods["w0"]
    out = serial.bind_gang([(r, "n0") for r in refs], "gang-scheduler")
    serial.close()
    assert [f.code for f in out.failed] == [404, SKIPPED, SKIPPED]
    assert ("POST binding", "w1") not in store.calls


def test_many_gangs_fail_independently(store: PodStore, binder: Binder) -> None:
    a = store.add("a0", "a1")
    b = store.add("b0", "b1")
    del store.pods["b1"]
    outs = binder.bind_gangs([("ns/a", [(r, "n0") for r in a]), ("ns/b", [(r, "n1") for r in b])],
                             "gang-scheduler")
    assert [o.ok for o in outs] == [True, False]
    assert store.pods["a0"]["node"] == store.pods["a1"]["node"] == "n0"


def test_delete_pods_treats_gone_and_namesakes_as_deleted(store: PodStore,
                                                          binder: Binder) -> None:
    refs = store.add("p0", "p1")
    store.pods["p1"]["uid"] = "other"
    assert binder.delete_pods([*refs, PodRef("ns", "ghost", "g")]) == []
    assert "p0" not in store.pods and "p1" in store.pods  # the namesake survives


def test_evictions(store: PodStore, binder: Binder) -> None:
    refs = store.add("v0", "v1")
    store.pdb_protected.add("v1")
    out = binder.evict_pods([*refs, PodRef("ns", "gone")], grace_period_seconds=30)
    assert [(o.ok, o.code) for o in out] == [(True, 201), (False, 429), (True, 404)]
    assert out[1].reason.startswith("blocked by PodDisruptionBudget")


def test_a_pool_smaller_than_the_concurrency_is_reported(store: PodStore) -> None:
    from types import SimpleNamespace

    import structlog

    store.api_client = SimpleNamespace(  # type: ignore[attr-defined]
        configuration=SimpleNamespace(connection_pool_maxsize=4))
    with structlog.testing.capture_logs() as logs:
        Binder(store, concurrency=8).close()  # type: ignore[arg-type]
    assert [e["event"] for e in logs] == ["connection_pool_too_small"]


def test_transient_failures_keep_what_is_bound_and_park_the_rest(store: PodStore) -> None:
    """The issue's case: while the apiserver restarts, binds answer 503 or get no reply.
    Deleting the bound members would lose pods that have no controller; they are kept, and
    the rest parked on their nodes for the retry once it answers."""
    serial = Binder(store, concurrency=1)  # type: ignore[arg-type]
    refs = store.add("w0", "w1", "w2")
    store.unavailable["w1"] = 1  # a 503
    out = serial.bind_gang([(r, "n0") for r in refs], "gang-scheduler", "ns/g")
    serial.close()
    assert out.transient and not out.unanswered  # a 503 is an answer: it backs off
    assert out.bound == ((refs[0], "n0"),)
    assert out.parked == ((refs[1], "n0"), (refs[2], "n0"))
    assert deletes(store) == []


def test_a_failure_retrying_cannot_mend_parks_nothing(store: PodStore) -> None:
    serial = Binder(store, concurrency=1)  # type: ignore[arg-type]
    refs = store.add("w0", "w1")
    del store.pods["w0"]  # 404: retrying would not bring it back
    store.unavailable["w1"] = 1
    out = serial.bind_gang([(r, "n0") for r in refs], "gang-scheduler", "ns/g")
    serial.close()
    assert not out.ok and not out.transient and out.parked == ()
    assert [f.code for f in out.failed] == [404, SKIPPED]
    assert ("POST binding", "w1") not in store.calls


def test_a_replica_fenced_mid_gang_leaves_what_it_bound_to_the_leader(store: PodStore) -> None:
    """Its Lease renewal came late between two binds: deleting is not its to do (its deletes
    would be fenced, or race the leader completing the gang), so nothing is deleted, not
    even once the fence lifts, and what it bound is reported for the repair."""
    refs = store.add("w0", "w1", "w2")
    leads = iter([True, False])  # the first bind goes out, then the fence closes

    class Fencing:
        def request(self, method: str, path: str, **kw: Any) -> Response:
            if method in ("POST", "DELETE") and not next(leads, True):
                raise Fenced(f"{method} {path}: fenced")
            return store.request(method, path, **kw)

    serial = Binder(Fencing(), concurrency=1)  # type: ignore[arg-type]
    out = serial.bind_gang([(r, "n0") for r in refs], "gang-scheduler", "ns/g")
    serial.close()
    assert not out.ok and out.fenced and not out.transient
    assert out.bound == ((refs[0], "n0"),) and out.parked == ()
    assert [f.code for f in out.failed] == [FENCED, SKIPPED]
    assert store.pods["w0"]["node"] == "n0"
    assert not any(method == "DELETE" for method, _ in store.calls)
    assert ("POST binding", "w2") not in store.calls  # no retry on the fence
    assert out.describe().endswith("1 bound members left for the leader to complete or "
                                   "roll back")


def test_a_fenced_delete_is_not_retried(store: PodStore) -> None:
    (ref,) = store.add("w0", node="n0")

    class AlwaysFenced:
        calls = 0

        def request(self, method: str, path: str, **kw: Any) -> Response:
            AlwaysFenced.calls += 1
            raise Fenced(f"{method} {path}: fenced")

    b = Binder(AlwaysFenced(), concurrency=1)  # type: ignore[arg-type]
    (failure,) = b.delete_pods([ref], retries=3)
    b.close()
    assert failure.code == FENCED and AlwaysFenced.calls == 1
