"""The informer against a scripted apiserver: lists, watch events, bookmarks, 410, reconnects."""

from __future__ import annotations

import logging
import random
import threading
from collections import deque
from typing import Any

import pytest
import structlog

from scheduler.feed.cache import ClusterCache
from scheduler.kube.client import Response, TransportError
from scheduler.kube.read import feed, informer
from scheduler.kube.read.informer import Backoff, EventType, Informer
from tests.unit.kube.fakes import FakeClient, FakeStream, event, page, pod

Seen = list[tuple[str, str, str]]  # (event, name, resourceVersion)


def run(client: FakeClient, kind: informer.ResourceKind = informer.PODS,
        handler: informer.Handler | None = None, **kwargs: Any) -> tuple[Informer, Seen]:
    """Run an informer until the fake's scripts are exhausted, then stop it."""
    seen: Seen = []

    def record(kind: EventType, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        seen.append((str(kind), meta["name"], meta["resourceVersion"]))

    inf = Informer(client, kind, handler or record,  # type: ignore[arg-type]
                   backoff=Backoff(initial=0.001, cap=0.002, rng=random.Random(1)),
                   rng=random.Random(1), **kwargs)
    inf.start()
    assert client.idle.wait(30), "informer did not reach the end of the script"
    inf.stop()
    return inf, seen


def test_list_then_watch_with_bookmark_and_pages() -> None:
    client = FakeClient()
    client.lists.extend([page([pod("a", "5")], "9", cont="tok"), page([pod("b", "7")], "10")])
    client.watches.append(FakeStream(
        event("ADDED", pod("c", "11")) + event("MODIFIED", pod("a", "12"))
        + event("BOOKMARK", {"metadata": {"resourceVersion": "15"}})
        + event("DELETED", pod("b", "16"))))
    inf, seen = run(client, page_size=1)
    assert seen == [("ADDED", "a", "5"), ("ADDED", "b", "7"), ("ADDED", "c", "11"),
                    ("MODIFIED", "a", "12"), ("DELETED", "b", "16")]
    assert inf.has_synced
    lists = client.list_queries()
    assert lists[0]["limit"] == 1 and lists[0]["continue"] is None and lists[1]["continue"] == "tok"
    # The first list is answered from the watch cache; its next page by the continue token.
    assert lists[0]["resourceVersion"] == "0" and lists[1]["resourceVersion"] is None
    watches = client.watch_queries()
    assert watches[0]["resourceVersion"] == "10" and watches[0]["allowWatchBookmarks"] == "true"
    assert watches[1]["resourceVersion"] == "16"  # the watch ended: resume, no re-list
    assert sorted(o["metadata"]["name"] for o in inf.objects()) == ["a", "c"]


@pytest.mark.parametrize("gone", [
    FakeStream(event("ERROR", {"kind": "Status", "code": 410, "message": "too old"})),
    FakeStream(b'{"kind":"Status","code":410}', status=410),
])
def test_410_relists_and_emits_a_consistent_diff(gone: FakeStream) -> None:
    client = FakeClient()
    client.lists.extend([page([pod("a", "5"), pod("b", "6"), pod("c", "7")], "10"),
                         page([pod("a", "5"), pod("b", "20"), pod("c", "21", uid="new-c"),
                               pod("d", "22")], "30")])
    client.watches.append(gone)
    inf, seen = run(client)
    assert seen[3:] == [("DELETED", "c", "7"),  # recreated namesake: old one deleted first
                        ("MODIFIED", "b", "20"), ("ADDED", "c", "21"), ("ADDED", "d", "22")]
    assert inf.relists == 1
    assert client.watch_queries()[-1]["resourceVersion"] == "30"
    # A re-list after 410 asks for the latest state, not the (possibly stale) watch cache.
    assert [q["resourceVersion"] for q in client.list_queries()] == ["0", None]


def test_vanished_objects_are_deleted_on_relist() -> None:
    client = FakeClient()
    client.lists.extend([page([pod("a", "5"), pod("b", "6")], "10"), page([pod("b", "6")], "30")])
    client.watches.append(FakeStream(event("ERROR", {"code": 410})))
    _, seen = run(client)
    assert seen == [("ADDED", "a", "5"), ("ADDED", "b", "6"), ("DELETED", "a", "5")]


def test_connection_errors_back_off_and_resume_from_last_rv() -> None:
    client = FakeClient()
    client.lists.extend([TransportError("refused"), page([pod("a", "5")], "10")])
    client.watches.extend([
        FakeStream(event("MODIFIED", pod("a", "11")), error=OSError("connection reset")),
        TransportError("refused"),
        FakeStream(event("MODIFIED", pod("a", "12")))])
    inf, seen = run(client)
    assert seen == [("ADDED", "a", "5"), ("MODIFIED", "a", "11"), ("MODIFIED", "a", "12")]
    assert [q["resourceVersion"] for q in client.watch_queries()] == ["10", "11", "11", "12"]
    assert len(client.list_queries()) == 2 and inf.relists == 0


def test_objects_are_handed_on_and_kept_without_managed_fields() -> None:
    """Server-side apply's ``managedFields`` (40 % of what a real pod decodes to) is dropped
    as an object arrives, by list or by watch; the rest of its metadata stays."""
    def managed(obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"]["managedFields"] = [{"manager": "kwok", "operation": "Update",
                                             "fieldsV1": {"f:status": {}}}]
        obj["metadata"]["labels"] = {"app": "x"}
        return obj

    client = FakeClient()
    client.lists.append(page([managed(pod("a", "5"))], "10"))
    client.watches.append(FakeStream(event("ADDED", managed(pod("b", "11")))))
    handed: list[dict[str, Any]] = []
    inf, _ = run(client, handler=lambda kind, obj: handed.append(obj))
    assert [o["metadata"]["name"] for o in handed] == ["a", "b"]
    for obj in [*handed, *inf.objects()]:
        assert "managedFields" not in obj["metadata"], obj
        assert obj["metadata"]["labels"] == {"app": "x"}
    assert informer.unmanaged({"metadata": None}) == {"metadata": None}  # malformed: as is


def test_absent_crd_counts_as_synced_and_empty() -> None:
    client = FakeClient()
    client.lists.extend([Response(404, b'{"message":"not found"}'),
                         page([{"metadata": {"name": "pg", "namespace": "ns", "uid": "u",
                                             "resourceVersion": "3"}}], "4")])
    inf, seen = run(client, informer.PODGROUPS, absent_retry=0.01)
    assert inf.has_synced
    assert seen == [("ADDED", "pg", "3")]


def test_an_absent_api_is_said_once_at_info_then_at_debug_until_it_comes_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33: the v1beta1 gang API, absent on 1.36, was logged at info every 30 s."""
    absent = Response(404, b'{"message":"not found"}')
    client = FakeClient()
    client.lists.extend([absent, absent, absent, page([], "4")])
    client.watches.append(FakeStream(event("ERROR", {"code": 410})))
    client.lists.extend([absent, absent, page([], "9")])
    old = structlog.get_config()  # every level, whatever other tests configured
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
                        cache_logger_on_first_use=False)
    try:
        with structlog.testing.capture_logs() as logs:
            monkeypatch.setattr(informer, "log", structlog.get_logger("test"))
            run(client, informer.PODGROUPS, absent_retry=0.001)
    finally:
        structlog.configure(**old)
    said = [(e["log_level"], e["event"]) for e in logs
            if e["event"] in ("resource_absent", "listed")]
    assert said == [("info", "resource_absent"), ("debug", "resource_absent"),
                    ("debug", "resource_absent"), ("info", "listed"),
                    ("info", "resource_absent"), ("debug", "resource_absent"),
                    ("info", "listed")]


def test_handler_errors_do_not_stop_the_informer() -> None:
    client = FakeClient()
    client.lists.append(page([pod("a", "1"), pod("b", "2")], "3"))
    seen: list[str] = []

    def handler(kind: EventType, obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] == "a":
            raise RuntimeError("boom")
        seen.append(obj["metadata"]["name"])

    run(client, handler=handler)
    assert seen == ["b"]


def test_stop_interrupts_a_blocked_watch() -> None:
    client = FakeClient()
    client.lists.append(page([], "1"))
    inf = Informer(client, informer.PODS, lambda k, o: None)  # type: ignore[arg-type]
    thread = inf.start()
    assert client.idle.wait(30)
    inf.stop(timeout=30)
    assert not thread.is_alive()


def test_iter_lines_reassembles_split_lines() -> None:
    body = event("ADDED", pod("a", "1")) + event("ADDED", pod("b", "2"))[:-1]  # no final newline
    lines = list(informer.iter_lines(FakeStream(body, chunk=3)))  # type: ignore[arg-type]
    assert len(lines) == 2 and lines[1].endswith(b"}")


def test_backoff_grows_is_capped_and_jittered() -> None:
    b = Backoff(initial=1.0, cap=8.0, rng=random.Random(0))
    delays = [b.next() for _ in range(6)]
    assert all(0.5 * lim <= d <= lim for d, lim in zip(delays, [1, 2, 4, 8, 8, 8], strict=True))
    b.reset()
    assert b.next() <= 1.0


def test_feed_skips_malformed_objects_and_keeps_the_last_good_state(
        caplog: pytest.LogCaptureFixture) -> None:
    good, bad = pod("a", "1", cpu="2"), pod("a", "2", cpu="12x")
    client = FakeClient()
    client.lists.append(page([good, pod("b", "3")], "5"))
    client.watches.append(FakeStream(event("MODIFIED", bad) + event("ADDED", pod("c", "6"))))
    upserts: dict[str, Any] = {}
    lock = threading.Lock()

    def upsert(p: Any) -> None:
        with lock:
            upserts[p.name] = p

    handler = feed.converting_handler(feed.convert.pod_from_json, upsert, lambda o: None)
    run(client, handler=handler)
    assert sorted(upserts) == ["a", "b", "c"]
    assert upserts["a"].resource_version == "1"  # the malformed update was skipped


def test_cache_informers_feed_the_cluster_cache() -> None:
    cache = ClusterCache()
    client = FakeClient(lists=deque([page([pod("a", "1"), pod("b", "2")], "3")]))
    client.watches.append(FakeStream(event("DELETED", pod("a", "4"))))
    informers = feed.cache_informers(client, cache)  # type: ignore[arg-type]
    workloads, groups = informer.WORKLOADS, informer.NATIVE_PODGROUPS
    assert [i.kind for i in informers] == [
        informer.PRIORITY_CLASSES, informer.NODES, informer.PODS, informer.PODGROUPS,
        informer.JOBS, informer.JOBSETS, *informer.OPERATOR_OBJECTS.values(),
        workloads[0], groups[0], workloads[1], groups[1],
        informer.NAMESPACES, informer.CLAIMS, informer.VOLUMES, informer.STORAGE_CLASSES,
        informer.CSINODES, *informer.DEVICE_KINDS]
    assert all(k.optional for k in (*workloads, *groups, informer.JOBSETS,
                                     *informer.OPERATOR_OBJECTS.values()))
    pods = informers[2]
    pods.start()
    assert feed.wait_for_sync([pods], 30) and client.idle.wait(30)
    pods.stop()
    assert [p.name for p in cache.pods()] == ["b"]
