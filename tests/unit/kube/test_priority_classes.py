"""A pod that admission gave no ``spec.priority`` gets its PriorityClass's value, as admission
would have written it: its ``priorityClassName``, else the ``globalDefault`` class, else 0."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.feed.cache import ClusterCache
from scheduler.kube.read import convert, feed, informer
from tests.unit.kube.fakes import FakeClient, page, pod

ADDED, DELETED = informer.EventType.ADDED, informer.EventType.DELETED


def priority_class(name: str, value: int, default: bool = False) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name, "resourceVersion": "1"}, "value": value,
            "globalDefault": default}


def with_spec(obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    obj["spec"].update(spec)
    return obj


@pytest.mark.parametrize("spec,expected", [
    ({"priorityClassName": "high"}, 1000),  # admission off: the class's value
    ({"priorityClassName": "missing"}, 10),  # unknown class: the globalDefault's
    ({}, 10),  # no class: the globalDefault's
    ({"priorityClassName": "high", "priority": 0}, 0),  # admission resolved it: kept
    ({"priority": 5}, 5),
])
def test_resolve(spec: dict[str, Any], expected: int) -> None:
    classes = feed.PriorityClasses()
    for pc in (priority_class("high", 1000), priority_class("normal", 10, default=True)):
        assert classes.upsert(convert.priority_class_from_json(pc))
    obj = with_spec(pod("p", "1"), **spec)
    assert classes.resolve(convert.pod_from_json(obj), obj).priority == expected


def test_without_classes_the_priority_is_zero() -> None:
    obj = with_spec(pod("p", "1"), priorityClassName="high")
    assert feed.PriorityClasses().resolve(convert.pod_from_json(obj), obj).priority == 0


@pytest.fixture
def wired() -> Iterator[tuple[ClusterCache, list[informer.Informer]]]:
    """The live wiring with a pods informer that listed two pods lacking ``spec.priority``."""
    cache = ClusterCache()
    pods = [with_spec(pod("a", "1"), priorityClassName="high"),
            with_spec(pod("b", "2"), priorityClassName="high", priority=7)]
    client = FakeClient(lists=deque([page(pods, "3")]))
    informers = feed.cache_informers(client, cache)  # type: ignore[arg-type]
    assert informers[0].kind == informer.PRIORITY_CLASSES
    pod_informer = next(i for i in informers if i.kind == informer.PODS)
    pod_informer.start()
    assert feed.wait_for_sync([pod_informer], 30) and client.idle.wait(30)
    yield cache, informers
    pod_informer.stop()


def priorities(cache: ClusterCache) -> dict[str, int]:
    return {p.name: p.priority for p in cache.pods()}


def test_a_class_arriving_after_its_pods_re_resolves_them(
        wired: tuple[ClusterCache, list[informer.Informer]]) -> None:
    cache, informers = wired
    classes = informers[0].handler
    assert priorities(cache) == {"a": 0, "b": 7}
    classes(ADDED, priority_class("high", 1000))
    assert priorities(cache) == {"a": 1000, "b": 7}  # b's was set by admission
    classes(ADDED, priority_class("normal", 10, default=True))
    classes(DELETED, priority_class("high", 1000))
    assert priorities(cache) == {"a": 10, "b": 7}


def test_classes_read_first_resolve_pods_read_once() -> None:
    """The order a one-shot read (``explain``) delivers the informers' lists in."""
    cache = ClusterCache()
    handlers = {i.kind: i.handler for i in feed.cache_informers(FakeClient(), cache)}  # type: ignore[arg-type]
    handlers[informer.PRIORITY_CLASSES](ADDED, priority_class("high", 1000))
    handlers[informer.PODS](ADDED, with_spec(pod("a", "1"), priorityClassName="high"))
    assert priorities(cache) == {"a": 1000}


def test_a_malformed_class_is_skipped() -> None:
    cache = ClusterCache()
    handlers = {i.kind: i.handler for i in feed.cache_informers(FakeClient(), cache)}  # type: ignore[arg-type]
    bad = priority_class("high", 1000)
    del bad["value"]
    handlers[informer.PRIORITY_CLASSES](ADDED, bad)
    handlers[informer.PODS](ADDED, with_spec(pod("a", "1"), priorityClassName="high"))
    assert priorities(cache) == {"a": 0}


@pytest.mark.parametrize("class_name,priority,expected", [
    ("high", None, 1000),  # admission left it unset: the class's value
    ("missing", None, 10),  # unknown class: the globalDefault's
    ("", None, 10),
    ("high", 7, 7),  # admission resolved it: kept
])
def test_resolve_native_podgroup(class_name: str, priority: int | None, expected: int) -> None:
    """Kubernetes' own PodGroups carry a priority too; resolved the same way as pods'."""
    from scheduler.model.native import GroupPolicy, NativeGroupInfo

    classes = feed.PriorityClasses()
    for pc in (priority_class("high", 1000), priority_class("normal", 10, default=True)):
        classes.upsert(convert.priority_class_from_json(pc))
    group = NativeGroupInfo("ns", "g", GroupPolicy(min_count=2, priority=priority,
                                                   priority_class_name=class_name))
    assert classes.resolve_group(group).policy.priority == expected
