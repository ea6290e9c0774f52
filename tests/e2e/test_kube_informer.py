"""The informer against a real kube-apiserver: add/modify/delete, a forced 410 and re-list,
absent CRDs, and a malformed object skipped while the stream keeps flowing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import structlog
import urllib3

from scheduler.kube import client as kube_client
from scheduler.kube.read import convert, feed, informer
from scheduler.kube.read.informer import EventType, Informer, ResourceKind
from tests.e2e.cluster_api import ControlPlane, wait_for

pytestmark = pytest.mark.e2e


class Expired:
    """What the apiserver answers a watch from a compacted resourceVersion (HTTP 410)."""

    status = 410
    data = b'{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version"}'

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


class GatedClient(kube_client.KubeClient):
    """A real client whose watches can be delayed, or answered once with 410 Gone."""

    def __init__(self, api_client: Any) -> None:
        super().__init__(api_client)
        self.open = threading.Event()
        self.open.set()
        self.expire_next = False
        self.watches = 0

    def stream(self, path: str, query: Mapping[str, Any] | None,
               timeout: tuple[float, float]) -> urllib3.BaseHTTPResponse:
        self.open.wait(300)
        self.watches += 1
        if self.expire_next:
            self.expire_next = False
            return Expired()  # type: ignore[return-value]
        return super().stream(path, query, timeout)


class Seen:
    """Events for one namespace, in order, as (type, name)."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.events: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def __call__(self, kind: EventType, obj: dict[str, Any]) -> None:
        if obj["metadata"].get("namespace") == self.namespace:
            with self.lock:
                self.events.append((str(kind), obj["metadata"]["name"]))

    def has(self, *wanted: tuple[str, str]) -> bool:
        with self.lock:
            return all(w in self.events for w in wanted)


@pytest.fixture
def gated(control_plane: ControlPlane) -> Iterator[GatedClient]:
    client = GatedClient(kube_client.build_api_client(str(control_plane.kubeconfig)))
    yield client
    client.open.set()
    client.close()


def run_informer(client: kube_client.KubeClient, kind: ResourceKind,
                 handler: informer.Handler, **kwargs: Any) -> Informer:
    inf = Informer(client, kind, handler, **kwargs)
    inf.start()
    assert inf.wait_for_sync(30), f"{kind.name} informer did not sync"
    return inf


def test_add_modify_delete(control_plane: ControlPlane, namespace: str,
                           gated: GatedClient) -> None:
    control_plane.create_pod(namespace, "before")
    seen = Seen(namespace)
    inf = run_informer(gated, informer.PODS, seen)
    try:
        assert seen.has(("ADDED", "before"))
        control_plane.create_pod(namespace, "after")
        control_plane.core.patch_namespaced_pod("after", namespace,
                                                {"metadata": {"labels": {"x": "y"}}},
                                                _preload_content=False)
        control_plane.core.delete_namespaced_pod("before", namespace, grace_period_seconds=0,
                                                 _preload_content=False)
        wait_for(lambda: seen.has(("ADDED", "after"), ("MODIFIED", "after"),
                                  ("DELETED", "before")), 60, what="watch events")
        assert seen.events.index(("ADDED", "after")) < seen.events.index(("MODIFIED", "after"))
        assert inf.relists == 0
    finally:
        inf.stop()


def cut_off_watch(client: GatedClient, inf: Informer) -> None:
    """Cut the informer off: its current watch is dropped and the next one waits at the gate."""
    wait_for(lambda: inf.watching, 60, what="a watch")
    client.open.clear()
    inf.interrupt()
    wait_for(lambda: not inf.watching, 60, what="the watch to end")


def test_410_relists_and_reports_what_changed_meanwhile(
        control_plane: ControlPlane, namespace: str, gated: GatedClient) -> None:
    for name in ("stays", "goes"):
        control_plane.create_pod(namespace, name)
    seen = Seen(namespace)
    inf = run_informer(gated, informer.PODS, seen)
    try:
        cut_off_watch(gated, inf)
        control_plane.core.delete_namespaced_pod("goes", namespace, grace_period_seconds=0,
                                                 _preload_content=False)
        control_plane.create_pod(namespace, "new")
        gated.expire_next = True  # the apiserver's answer once its watch cache rolled over
        gated.open.set()
        wait_for(lambda: inf.relists >= 1, 30, what="a re-list after 410")
        wait_for(lambda: seen.has(("DELETED", "goes"), ("ADDED", "new")), 60,
                 what="the re-list diff")
        assert seen.events.count(("ADDED", "stays")) == 1  # unchanged objects are not re-sent
        names = {o["metadata"]["name"] for o in inf.objects()
                 if o["metadata"]["namespace"] == namespace}
        assert names == {"stays", "new"}
    finally:
        inf.stop()


def ensure_loose_crd(client: kube_client.KubeClient, plural: str) -> str:
    """A schemaless namespaced CRD ``<plural>.e2e.gangscheduler.io``; returns its v1 group path."""
    kind = plural.capitalize().rstrip("s")
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"{plural}.e2e.gangscheduler.io"},
           "spec": {"group": "e2e.gangscheduler.io", "scope": "Namespaced",
                    "names": {"plural": plural, "singular": plural.rstrip("s"), "kind": kind},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                        "openAPIV3Schema": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True}}}]}}
    reply = client.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                           body=crd)
    assert reply.ok or reply.status == 409, reply.message()
    path = f"/apis/e2e.gangscheduler.io/v1/{plural}"
    wait_for(lambda: client.request("GET", path).ok, 30, what=f"CRD {plural} to be served")
    return path


@pytest.mark.slow
def test_a_real_410_after_the_watch_cache_rolls_over(
        control_plane: ControlPlane, namespace: str, gated: GatedClient) -> None:
    """No injection: the informer resumes from its own resourceVersion after the apiserver's
    watch cache evicted it. The cache keeps events younger than 75 s, hence the wait."""
    path = ensure_loose_crd(gated, "ticks")
    base = path.replace("/v1/", f"/v1/namespaces/{namespace}/")

    def create(name: str) -> None:
        body = {"apiVersion": "e2e.gangscheduler.io/v1", "kind": "Tick",
                "metadata": {"name": name}}
        assert gated.request("POST", base, body=body).ok

    for name in ("stays", "goes"):
        create(name)
    seen = Seen(namespace)
    inf = run_informer(gated, ResourceKind("ticks", path), seen)
    try:
        cut_off_watch(gated, inf)
        assert gated.request("DELETE", f"{base}/goes").ok
        time.sleep(80)
        for i in range(200):  # fill the cache so that the stale events are evicted
            create(f"t{i:03d}")
        gated.open.set()
        wait_for(lambda: inf.relists >= 1, 30, what="a re-list after a real 410")
        wait_for(lambda: seen.has(("DELETED", "goes"), ("ADDED", "t199")), 60,
                 what="the re-list diff")
        assert seen.events.count(("ADDED", "stays")) == 1
    finally:
        inf.stop()


def test_an_absent_crd_is_synced_and_empty(gated: GatedClient) -> None:
    kind = ResourceKind("nothings", "/apis/nothing.example.com/v1/nothings", optional=True)
    inf = run_informer(gated, kind, lambda k, o: None, absent_retry=60)
    try:
        assert inf.objects() == []
    finally:
        inf.stop()


def test_a_malformed_object_is_skipped_and_the_stream_keeps_going(
        control_plane: ControlPlane, namespace: str, gated: GatedClient) -> None:
    # The apiserver validates pod and PodGroup quantities, so a malformed one needs a CRD
    # without a schema: a PodGroup look-alike with the same fields.
    path = ensure_loose_crd(gated, "loosegroups")
    base = path.replace("/v1/", f"/v1/namespaces/{namespace}/")

    def create(name: str, cpu: str) -> None:
        body = {"apiVersion": "e2e.gangscheduler.io/v1", "kind": "Loosegroup",
                "metadata": {"name": name}, "spec": {"minMember": 2, "minResources": {"cpu": cpu}}}
        assert gated.request("POST", base, body=body).ok

    groups: dict[str, Any] = {}
    handler = feed.converting_handler(convert.podgroup_from_json,
                                      lambda g: groups.__setitem__(g.name, g),
                                      lambda o: groups.pop(o["metadata"]["name"], None))
    kind = ResourceKind("loosegroups", path)
    create("good", "4")
    with structlog.testing.capture_logs() as logs:
        inf = run_informer(gated, kind, handler)
        try:
            create("bad", "12x")
            create("later", "8")
            wait_for(lambda: "later" in groups, 60, what="the object after the bad one")
        finally:
            inf.stop()
    assert sorted(groups) == ["good", "later"]
    skipped = [e for e in logs if e["event"] == "object_skipped"]
    assert len(skipped) == 1
    assert skipped[0]["object"] == f"{namespace}/bad"
    assert skipped[0]["field"] == "spec.minResources.cpu"
    assert skipped[0]["reason"] == "malformed quantity '12x'"
