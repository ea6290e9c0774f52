"""Gang binding against an in-memory pod store that answers like the apiserver does."""

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
    b = Binder(store, concurrency=4, rollback_attempts=2,  # type: ignore[arg-type]
               complete_delays=(0.0, 0.0))
    yield b
    b.close()


def test_a_gang_is_bound_whole(store: PodStore, binder: Binder) -> None:
    refs = store.add("w0", "w1", "w2")
    out = binder.bind_gang([(r, f"n{i}") for i, r in enumerate(refs)], "gang-scheduler", "ns/g")
    assert out.ok and len(out.bound) == 3 and out.describe() == "bound 3 pods"
    assert [store.pods[n]["node"] for n in ("w0", "w1", "w2")] == ["n0", "n1", "n2"]


def test_a_deleted_member_rolls_the_others_back(store: PodStore, binder: Binder) -> None:
    refs = store.add("w0", "w1", "w2")
    del store.pods["w1"]  # deleted between decision and bind
    out = binder.bind_gang([(r, "n0") for r in refs], "gang-scheduler", "ns/g")
    assert not out.ok and out.bound == ()
    real = [f for f in out.failed if f.status != SKIPPED]
    assert [(f.pod.name, f.status) for f in real] == [("w1", 404)]
    assert "pod deleted before binding" in real[0].reason
    assert all(store.pods.get(n, {"node": ""})["node"] == "" for n in ("w0", "w2"))
    assert set(out.rolled_back) <= {refs[0], refs[2]} and not out.rollback_failed
    assert "binding ns/w1: pod deleted before binding" in out.describe()


def test_a_recreated_namesake_is_never_bound(store: PodStore, binder: Binder) -> None:
    refs = store.add("w0", "w1")
    store.pods["w1"]["uid"] = "uid-w1-reborn"
    out = binder.bind_gang([(r, "n0") for r in refs], "gang-scheduler")
    assert not out.ok
    assert store.pods["w1"]["node"] == ""
    assert "w0" not in store.pods or store.pods["w0"]["node"] == ""


def test_an_already_bound_pod_is_not_rebound_and_fails_its_gang(store: PodStore,
                                                                binder: Binder) -> None:
    refs = store.add("w0") + store.add("w1", node="elsewhere")
    out = binder.bind_gang([(r, "n0") for r in refs], "gang-scheduler")
    assert not out.ok and any(f.status == 409 and "already" in f.reason for f in out.failed)
    assert store.pods["w1"]["node"] == "elsewhere"  # untouched: not ours to undo
    assert "w0" not in store.pods or store.pods["w0"]["node"] == ""


def test_a_lost_reply_is_read_back_and_undone(store: PodStore, binder: Binder) -> None:
    refs = store.add("w0", "w1", "w2")
    store.lost_reply.add("w0")  # bound, but we never heard
    store.no_reply.add("w2")  # never reaches the server, however often it is retried
    out = binder.bind_gang([(r, "n0") for r in refs], "gang-scheduler")
    assert not out.ok
    assert {f.pod.name for f in out.failed if f.status == UNKNOWN} <= {"w0", "w2"}
    assert "w0" not in store.pods  # it was bound, so it was deleted
    assert store.pods["w2"]["node"] == ""  # never bound: left alone
    assert not out.rollback_failed


def test_a_failed_rollback_is_reported(store: PodStore) -> None:
    serial = Binder(store, concurrency=1, rollback_attempts=2)  # type: ignore[arg-type]
    refs = store.add("w0", "w1")
    store.undeletable.add("w0")
    del store.pods["w1"]
    out = serial.bind_gang([(r, "n0") for r in refs], "gang-scheduler")  # w0 binds, then w1 fails
    serial.close()
    assert store.pods["w0"]["node"] == "n0"
    assert [f.pod.name for f in out.rollback_failed] == ["w0"] and out.rolled_back == ()
    assert "could not delete ns/w0" in out.describe()
    assert store.calls.count(("DELETE", "w0")) == 2  # retried


def test_members_queued_behind_a_failure_are_skipped(store: PodStore) -> None:
    serial = Binder(store, concurrency=1)  # type: ignore[arg-type]
    refs = store.add("w0", "w1", "w2")
    del store.pods["w0"]
    out = serial.bind_gang([(r, "n0") for r in refs], "gang-scheduler")
    serial.close()
    assert [f.status for f in out.failed] == [404, SKIPPED, SKIPPED]
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
    assert [(o.ok, o.status) for o in out] == [(True, 201), (False, 429), (True, 404)]
    assert out[1].reason.startswith("blocked by PodDisruptionBudget")


def test_a_pool_smaller_than_the_concurrency_is_reported(store: PodStore) -> None:
    from types import SimpleNamespace

    import structlog

    store.api_client = SimpleNamespace(  # type: ignore[attr-defined]
        configuration=SimpleNamespace(connection_pool_maxsize=4))
    with structlog.testing.capture_logs() as logs:
        Binder(store, concurrency=8).close()  # type: ignore[arg-type]
    assert [e["event"] for e in logs] == ["connection_pool_too_small"]


def test_transient_failures_complete_the_gang_instead_of_deleting_it(store: PodStore,
                                                                      binder: Binder) -> None:
    """The issue's case: while the apiserver restarts, binds answer 503 or lose their reply.
    Deleting the bound members would lose pods that have no controller; the gang is
    completed instead, and nothing is deleted."""
    refs = store.add("w0", "w1", "w2")
    store.unavailable["w1"] = 1  # a 503, then it binds
    store.lost_reply.add("w2")  # bound at once, but the reply is lost: the retry answers 409
    out = binder.bind_gang([(r, "n0") for r in refs], "gang-scheduler", "ns/g")
    assert out.ok, out.describe()
    assert [store.pods[n]["node"] for n in ("w0", "w1", "w2")] == ["n0"] * 3
    assert not any(method == "DELETE" for method, _ in store.calls)


def test_a_failure_retrying_cannot_mend_rolls_back_at_once(store: PodStore) -> None:
    serial = Binder(store, concurrency=1, complete_delays=(0.0, 0.0))  # type: ignore[arg-type]
    refs = store.add("w0", "w1")
    del store.pods["w0"]  # 404: retrying would not bring it back
    store.unavailable["w1"] = 1
    out = serial.bind_gang([(r, "n0") for r in refs], "gang-scheduler", "ns/g")
    serial.close()
    assert not out.ok and [f.status for f in out.failed] == [404, SKIPPED]
    assert ("POST binding", "w1") not in store.calls  # no retry


def test_an_apiserver_that_stays_unavailable_rolls_the_gang_back_after_the_retries(
        store: PodStore, binder: Binder) -> None:
    refs = store.add("w0", "w1")
    store.unavailable["w1"] = 99
    out = binder.bind_gang([(r, "n0") for r in refs], "gang-scheduler", "ns/g")
    assert not out.ok
    assert store.calls.count(("POST binding", "w1")) == 3  # the first attempt + 2 retries
    assert "w0" not in store.pods or store.pods["w0"]["node"] == ""  # undone


def test_a_replica_fenced_mid_gang_leaves_what_it_bound_to_the_leader(store: PodStore) -> None:
    """Its Lease renewal came late between two binds: deleting is not its to do (its deletes
    would be fenced, or race the leader completing the gang), so nothing is deleted, not
    even once the fence lifts, and what it bound is reported for the repair."""
    refs = store.add("w0", "w1", "w2")
    holds = iter([True, False])  # the first bind goes out, then the fence closes

    class Fencing:
        def request(self, method: str, path: str, **kw: Any) -> Response:
            if method in ("POST", "DELETE") and not next(holds, True):
                raise Fenced(f"{method} {path}: fenced")
            return store.request(method, path, **kw)

    serial = Binder(Fencing(), concurrency=1, complete_delays=(0.0,))  # type: ignore[arg-type]
    out = serial.bind_gang([(r, "n0") for r in refs], "gang-scheduler", "ns/g")
    serial.close()
    assert not out.ok and out.fenced and not out.unanswered
    assert out.left == ((refs[0], "n0"),) and out.rolled_back == ()
    assert [f.status for f in out.failed] == [FENCED, SKIPPED]
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
    assert failure.status == FENCED and AlwaysFenced.calls == 1
