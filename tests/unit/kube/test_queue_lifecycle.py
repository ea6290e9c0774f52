"""A Queue's life as the live scheduler sees it: refused edits that say what is in force (or
that nothing ever was), cycles of parents named as cycles, deletion (terminating while in
use, kept by the scheduler's finalizer) and the finalizer's writes."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from scheduler.kube.client import Response
from scheduler.kube.read import informer
from scheduler.kube.read.policy_feed import LivePolicies
from scheduler.kube.write.queue_finalizer import FINALIZER, QueueFinalizers
from tests.unit.kube.test_queue_status import queue_obj

Written = list[tuple[str, dict[str, Any]]]


def live() -> tuple[LivePolicies, Written]:
    written: Written = []
    policies = LivePolicies(write_status=lambda n, s: written.append(
        (n, json.loads(json.dumps(s)))))
    return policies, written


def last(written: Written, name: str) -> dict[str, Any]:
    return [s for n, s in written if n == name][-1]


def deleting(obj: dict[str, Any], rv: str = "9") -> dict[str, Any]:
    meta = {**obj["metadata"], "deletionTimestamp": "2026-12-04T16:00:00Z",
            "finalizers": [FINALIZER], "resourceVersion": rv}
    return {**obj, "metadata": meta}


def test_a_refused_queue_that_never_was_valid_says_it_admits_nothing() -> None:
    policies, written = live()
    policies.handle(informer.EventType.ADDED, queue_obj("team", gpus=-1))
    status = last(written, "team")
    message = status["conditions"][0]["message"]
    assert message.startswith("refused, no valid version yet: the queue admits nothing: ")
    assert "last valid version" not in message and status["inForce"] is None


def test_a_refused_edit_says_which_version_is_in_force_and_writes_its_spec() -> None:
    policies, written = live()
    good = queue_obj("team", gpus=8)
    policies.handle(informer.EventType.ADDED, good)
    assert last(written, "team")["inForce"] is None
    policies.handle(informer.EventType.MODIFIED, queue_obj("team", generation=2, gpus=-1))
    status = last(written, "team")
    assert status["conditions"][0]["message"].startswith(
        "refused, the last valid version stays in force: ")
    assert status["inForce"] == good["spec"]
    policies.handle(informer.EventType.MODIFIED, queue_obj("team", generation=3, gpus=4))
    assert last(written, "team")["inForce"] is None  # valid again: nothing to show apart


def test_a_cycle_of_parents_is_reported_as_a_cycle_on_every_member() -> None:
    policies, written = live()
    policies.handle(informer.EventType.ADDED, queue_obj("loop-a", parent="loop-b"))
    assert "unknown queue 'loop-b'" in last(written, "loop-a")["conditions"][0]["message"]
    policies.handle(informer.EventType.ADDED, queue_obj("loop-b", parent="loop-a"))
    for name in ("loop-a", "loop-b"):
        message = last(written, name)["conditions"][0]["message"]
        assert "cycle in the queue hierarchy" in message and "unknown" not in message, message
        assert "no valid version yet: the queue admits nothing" in message
    assert set(policies.invalid) == {"loop-a", "loop-b"}


def test_a_queue_being_deleted_stays_in_force_terminating_then_goes() -> None:
    policies, _ = live()
    obj = queue_obj("team")
    policies.handle(informer.EventType.ADDED, obj)
    policies.handle(informer.EventType.MODIFIED, deleting(obj))
    queues = policies.current().queues
    assert "team" in queues.queues and queues.terminating == {"team"}
    (seen,) = policies.objects()
    assert seen.deleting and seen.finalizers == (FINALIZER,) and seen.resource_version == "9"
    policies.handle(informer.EventType.DELETED, deleting(obj))
    assert policies.current().queues.queues == {} and policies.objects() == []


def test_a_deleted_parent_is_kept_for_its_children() -> None:
    policies, _ = live()
    root = queue_obj("root")
    policies.handle(informer.EventType.ADDED, root)
    policies.handle(informer.EventType.ADDED, queue_obj("team", parent="root"))
    policies.handle(informer.EventType.DELETED, root)
    queues = policies.current().queues
    assert queues.parent_of("team") == "root" and queues.terminating == {"root"}


@dataclass
class Api:
    status: int = 200
    patches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", timeout: Any = None) -> Response:
        assert method == "PATCH"
        with self.lock:
            self.patches.append((path.rsplit("/", 1)[-1], body))
        return Response(self.status, b"{}")


def finalizers(api: Api, policies: LivePolicies) -> QueueFinalizers:
    return QueueFinalizers(api, policies.objects)  # type: ignore[arg-type]


def test_the_finalizer_is_added_once_and_removed_only_when_not_in_use() -> None:
    policies, _ = live()
    obj = queue_obj("team")
    obj["metadata"]["resourceVersion"] = "1"
    policies.handle(informer.EventType.ADDED, obj)
    api = Api()
    fin = finalizers(api, policies)
    try:
        assert fin.sync(set()) == 1
        assert fin.sync(set()) == 0  # submitted for this version: not again
        assert fin.writer.flush()
        assert api.patches == [("team", {"metadata": {"finalizers": [FINALIZER],
                                                      "resourceVersion": "1"}})]
        # Deletion asked for while a gang it admitted runs: the finalizer stays...
        policies.handle(informer.EventType.MODIFIED, deleting(obj, rv="2"))
        assert fin.sync({"team"}) == 0
        # ...until nothing of it runs.
        assert fin.sync(set()) == 1
        assert fin.writer.flush()
        assert api.patches[-1] == ("team", {"metadata": {"finalizers": None,
                                                         "resourceVersion": "2"}})
    finally:
        fin.close()


def test_a_write_refused_is_tried_again_on_the_newer_object_only() -> None:
    policies, _ = live()
    obj = queue_obj("team")
    obj["metadata"].update(resourceVersion="1", finalizers=["other.io/keep"])
    policies.handle(informer.EventType.ADDED, obj)
    api = Api(status=409)  # crossed another change
    fin = finalizers(api, policies)
    try:
        assert fin.sync(set()) == 1
        assert fin.writer.flush()
        assert fin.sync(set()) == 0  # the same version: it would be refused again
        obj["metadata"]["resourceVersion"] = "2"  # the watch reports the newer object
        policies.handle(informer.EventType.MODIFIED, obj)
        api.status = 200
        assert fin.sync(set()) == 1
        assert fin.writer.flush()
        assert api.patches[-1][1]["metadata"] == {
            "finalizers": ["other.io/keep", FINALIZER], "resourceVersion": "2"}
    finally:
        fin.close()
