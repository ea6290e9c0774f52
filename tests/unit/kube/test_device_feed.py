"""The informers of ``resource.k8s.io/v1`` feed the catalog's device inventory (issue 35):
real objects from the dev cluster's apiserver (tests/data/dra) in, the snapshot's
``volumes.devices`` out; an apiserver without the API is one warning, not a stop."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog

from scheduler.feed.cache import ClusterCache
from scheduler.kube.client import Response
from scheduler.kube.read import feed, informer
from scheduler.kube.read.informer import Backoff, EventType, Informer
from scheduler.model.device_inventory import DeviceInventory
from tests.unit.kube.fakes import FakeClient, page

DRA = Path(__file__).parents[2] / "data" / "dra"


def fixture(name: str) -> dict[str, Any]:
    return dict(json.loads((DRA / name).read_text()))


def handlers(cache: ClusterCache) -> dict[informer.ResourceKind, informer.Handler]:
    return {i.kind: i.handler for i in feed.cache_informers(FakeClient(), cache)}  # type: ignore[arg-type]


def key_of(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


Table = Callable[[DeviceInventory], Any]
CASES: list[tuple[str, informer.ResourceKind, Table]] = [
    ("deviceclass.json", informer.DEVICE_CLASSES, lambda d: d.classes),
    ("deviceclass-driver.json", informer.DEVICE_CLASSES, lambda d: d.classes),
    ("resourceslice.json", informer.RESOURCE_SLICES, lambda d: d.slices),
    ("resourceclaim-allocated.json", informer.RESOURCE_CLAIMS, lambda d: d.claims),
    ("resourceclaim-cel-allocated.json", informer.RESOURCE_CLAIMS, lambda d: d.claims),
    ("resourceclaim-two-devices-allocated.json", informer.RESOURCE_CLAIMS, lambda d: d.claims),
    ("resourceclaimtemplate.json", informer.CLAIM_TEMPLATES, lambda d: d.templates),
]


@pytest.mark.parametrize("name,kind,table", CASES, ids=[c[0] for c in CASES])
def test_each_kind_is_in_the_snapshot_until_deleted(name: str, kind: informer.ResourceKind,
                                                    table: Table) -> None:
    cache = ClusterCache()
    obj = fixture(name)
    handlers(cache)[kind](EventType.ADDED, obj)
    devices = cache.cycle_input(0.0).snapshot.volumes.devices
    assert list(table(devices)) == [key_of(obj)]
    handlers_now = handlers(cache)  # any handler of the kind deletes by the object's key
    handlers_now[kind](EventType.DELETED, obj)
    assert cache.cycle_input(1.0).snapshot.volumes.devices.empty


def test_a_claim_keeps_its_allocation_and_consumers() -> None:
    cache = ClusterCache()
    obj = fixture("resourceclaim-allocated.json")
    handlers(cache)[informer.RESOURCE_CLAIMS](EventType.ADDED, obj)
    claim = cache.facts.catalog().devices.claims[key_of(obj)]
    assert claim.allocation is not None and len(claim.allocation.results) == 1
    assert [c.resource for c in claim.reserved_for] == ["pods"]


def test_slices_by_node_and_pool() -> None:
    cache = ClusterCache()
    obj = fixture("resourceslice.json")
    handlers(cache)[informer.RESOURCE_SLICES](EventType.ADDED, obj)
    devices = cache.facts.catalog().devices
    node, pool = obj["spec"]["nodeName"], obj["spec"]["pool"]["name"]
    assert [s.name for s in devices.slices_by_node()[node]] == [obj["metadata"]["name"]]
    assert list(devices.pools()) == [(obj["spec"]["driver"], pool)]
    assert devices.network_slices() == ()


def test_a_malformed_object_is_skipped_and_the_last_good_one_kept() -> None:
    cache = ClusterCache()
    on_slice = handlers(cache)[informer.RESOURCE_SLICES]
    good = fixture("resourceslice.json")
    on_slice(EventType.ADDED, good)
    bad = json.loads(json.dumps(good))
    del bad["spec"]["driver"]
    on_slice(EventType.MODIFIED, bad)
    assert list(cache.facts.catalog().devices.slices) == [good["metadata"]["name"]]


def test_the_device_kinds_are_optional_and_watched() -> None:
    kinds = [i.kind for i in feed.cache_informers(FakeClient(), ClusterCache())]  # type: ignore[arg-type]
    assert kinds[-4:] == list(informer.DEVICE_KINDS)
    assert all(k.optional and k.path.startswith("/apis/resource.k8s.io/v1/")
               for k in informer.DEVICE_KINDS)


@pytest.fixture
def logs() -> Any:
    old = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
                        cache_logger_on_first_use=False)
    try:
        with structlog.testing.capture_logs() as captured:
            yield captured
    finally:
        structlog.configure(**old)


def test_an_apiserver_without_the_api_gets_one_warning_for_all_four_kinds(
        logs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(feed, "log", structlog.get_logger("test"))
    informers = feed.device_informers(FakeClient(), ClusterCache())  # type: ignore[arg-type]
    for _ in range(2):  # the informers retry; each tells its absence once per disappearance
        for inf in informers:
            assert inf.on_absent is not None
            inf.on_absent(inf.kind)
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [(e["event"], e["api"]) for e in warnings] == [("api_absent", "resource.k8s.io/v1")]


def test_the_informer_tells_an_absence_once_until_the_api_came_back() -> None:
    absent = Response(404, b'{"message":"not found"}')
    client = FakeClient()
    client.lists.extend([absent, absent, page([], "4")])
    told: list[str] = []
    inf = Informer(client, informer.RESOURCE_CLAIMS, lambda e, o: None,  # type: ignore[arg-type]
                   absent_retry=0.001, backoff=Backoff(initial=0.001, cap=0.002),
                   rng=random.Random(1), on_absent=lambda k: told.append(k.name))
    inf.start()
    assert client.idle.wait(30)
    inf.stop()
    assert inf.has_synced and told == ["resourceclaims"]
