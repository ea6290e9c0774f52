"""Every log line about a gang carries ``gang``, ``namespace`` and ``queue`` (binder, evictor)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, MutableMapping
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from scheduler.decide.plan import Rollback, RollbackCause
from scheduler.feed.cache import ClusterCache
from scheduler.kube.client import Response
from scheduler.kube.events import EventRecorder
from scheduler.kube.write import binder as binder_module
from scheduler.kube.write import evictor as evictor_module
from scheduler.kube.write import rollback as rollback_module
from scheduler.kube.write.binder import Binder
from scheduler.kube.write.evictor import Evictor
from scheduler.kube.write.rollback import Releaser
from scheduler.kube.write.status import StatusWriter
from scheduler.model import PodRef
from tests.unit.kube.test_binder import PodStore
from tests.unit.kube.test_evictor import Api, Clock, Inline, bound_gang, plan

Logs = list[MutableMapping[str, Any]]
GANG_KEYS = {"gang", "namespace", "queue"}


@pytest.fixture
def logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Logs]:
    """Every line at any level, whatever other tests configured (level filter, caching)."""
    old = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
                        cache_logger_on_first_use=False)
    try:
        with capture_logs() as captured:
            monkeypatch.setattr(binder_module, "log", structlog.get_logger("test"))
            monkeypatch.setattr(evictor_module, "log", structlog.get_logger("test"))
            monkeypatch.setattr(rollback_module, "log", structlog.get_logger("test"))
            yield captured
    finally:
        structlog.configure(**old)


def about(logs: Logs, gang: str) -> dict[str, MutableMapping[str, Any]]:
    return {e["event"]: e for e in logs if e.get("gang") == gang}


def assert_keyed(line: MutableMapping[str, Any], gang: str, queue: str) -> None:
    assert {k: line.get(k) for k in GANG_KEYS} == {
        "gang": gang, "namespace": gang.split("/", 1)[0], "queue": queue}, line


def test_binder_and_rollback_lines_carry_gang_namespace_and_queue(logs: Logs) -> None:
    store = PodStore()
    ok = store.add("a0", "a1")
    bad = store.add("b0", "b1", "b2")
    del store.pods["b1"]  # deleted between decision and bind: the gang fails
    store.undeletable.add("b0")  # ...and its bound member cannot be deleted by the rollback
    queues = {"ns/a": "team-a", "ns/b": "team-b"}
    binder = Binder(store, concurrency=1, delete_attempts=1,  # type: ignore[arg-type]
                    queue_of=queues.__getitem__)
    releaser = Releaser(binder, StatusWriter(store), lambda *_: None)  # type: ignore[arg-type]
    try:
        outcomes = binder.bind_gangs([("ns/a", [(r, "n0") for r in ok]),
                                      ("ns/b", [(r, "n1") for r in bad])], "gang-scheduler")
        releaser.roll_back([Rollback("ns/b", (bad[0],), "short", RollbackCause.MEMBER_GONE)])
    finally:
        binder.close()
    assert [o.ok for o in outcomes] == [True, False]
    a, b = about(logs, "ns/a"), about(logs, "ns/b")
    assert set(a) == {"gang_bound"}
    assert {"bind_failed", "partial_gang_rolled_back", "delete_failed",
            "rollback_failed"} <= set(b)
    for line in a.values():
        assert_keyed(line, "ns/a", "team-a")
    for line in b.values():
        assert_keyed(line, "ns/b", "team-b")
    assert not [e for e in logs if e["event"] != "connection_pool_too_small"
                and "gang" not in e], "a line about a gang without its keys"


def test_binder_without_a_gang_logs_the_namespace_only(logs: Logs) -> None:
    store = PodStore()
    store.add("x")
    store.undeletable.add("x")
    binder = Binder(store, concurrency=1)  # type: ignore[arg-type]
    try:
        binder.delete_pods([PodRef("ns", "x", "uid-x")])
    finally:
        binder.close()
    [line] = [e for e in logs if e["event"] == "delete_failed"]
    assert line["namespace"] == "ns" and "gang" not in line


class FailingStatus(Api):
    """The victim's DisruptionTarget patch fails: the warning names the gang."""

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        if path.endswith("/status"):
            return Response(500, b'{"message": "etcd timeout"}')
        return super().request(method, path, query=query, body=body,
                               content_type=content_type, timeout=timeout)


@pytest.mark.parametrize("protected", [False, True], ids=["preempted", "blocked"])
def test_evictor_lines_carry_gang_namespace_and_queue(logs: Logs, protected: bool) -> None:
    api = FailingStatus()
    if protected:
        api.protected = {"low-1"}
    binder = Binder(api, concurrency=2)  # type: ignore[arg-type]
    evictor = Evictor(binder, EventRecorder(api), Inline(), grace_period_seconds=5,
                      monotonic=Clock())  # the plan's eviction names the victim's queue
    try:
        evictor.evict(plan(True), 0.0)
    finally:
        binder.close()
    lines = [e for e in logs if e.get("gang") == "ns/low"]
    events = {e["event"] for e in lines}
    if protected:
        assert events == {"eviction_blocked"}
    else:
        assert events == {"disruption_target_failed", "gang_preempted"}
    for line in lines:
        assert_keyed(line, "ns/low", "team")
    assert all("gang" in e for e in logs), logs


def test_the_cache_names_a_gangs_queue_for_log_lines() -> None:
    """What the live scheduler hands the binder as ``queue_of``."""
    cache = ClusterCache()
    bound_gang(cache, "low", 2)
    assert cache.queue_of("ns/low") == ""  # not built by a cycle yet
    cache.cycle_input(0.0)
    assert cache.queue_of("ns/low") == "team"
    assert cache.queue_of("ns/unknown") == ""
