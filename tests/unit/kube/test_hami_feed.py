"""HAMi's GPU shares ride on the node and pod informers: a node's registered GPUs become its
slice (and the share class is known), a pod's share ask its claim, each set before the
object itself is handed on, and dropped when the node or pod is gone or the pod finished."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from scheduler.feed.facts import ClusterFacts
from scheduler.kube.read import hami_feed
from scheduler.kube.read.informer import EventType
from scheduler.model import hami

ADDED, MODIFIED, DELETED = EventType.ADDED, EventType.MODIFIED, EventType.DELETED
REGISTERED = json.dumps([{"id": "GPU-a", "count": 10, "devmem": 16384}])


def node(annotation: str | None = REGISTERED) -> dict[str, Any]:
    notes = {} if annotation is None else {hami.HAMI_REGISTER_ANNOTATION: annotation}
    return {"metadata": {"name": "n1", "annotations": notes}}


def pod(phase: str = "Pending", mem: str | None = "8192") -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1", **({hami.GPUMEM: mem} if mem else {})}
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]},
            "status": {"phase": phase}}


class Seen:
    """The facts, and what each handler saw of them when it was handed its object."""

    def __init__(self) -> None:
        self.facts = ClusterFacts()
        self.when_handed: list[tuple[bool, bool]] = []
        self.changes = 0

    def change(self, f: Callable[[ClusterFacts], bool]) -> None:
        self.changes += 1
        f(self.facts)

    def handed(self, event: EventType, obj: dict[str, Any]) -> None:
        inventory = self.facts.devices()
        self.when_handed.append((bool(inventory.slices), bool(inventory.claims)))


@pytest.mark.parametrize(("title", "events", "slice_", "claim", "handed"), [
    ("a registered node: its slice, before it is handed on",
     [("node", ADDED, node())], True, False, [(True, False)]),
    ("a node deleted: its slice goes", [("node", ADDED, node()), ("node", DELETED, node())],
     False, False, [(True, False), (False, False)]),
    ("a node whose annotation is gone: its slice goes",
     [("node", ADDED, node()), ("node", MODIFIED, node(None))], False, False,
     [(True, False), (False, False)]),
    ("a node whose annotation does not read: no slice", [("node", ADDED, node("{"))],
     False, False, [(False, False)]),
    ("a share pod: its claim, before it is handed on", [("pod", ADDED, pod())],
     False, True, [(False, True)]),
    ("a pod that finished gives its share back",
     [("pod", ADDED, pod()), ("pod", MODIFIED, pod("Succeeded"))], False, False,
     [(False, True), (False, False)]),
    ("a pod deleted gives its share back",
     [("pod", ADDED, pod()), ("pod", DELETED, pod())], False, False,
     [(False, True), (False, False)]),
    ("a bad ask: no claim (the pod's conversion names the field)",
     [("pod", ADDED, pod(mem="0"))], False, False, [(False, False)]),
])
def test_shares_are_kept_beside_their_objects(
        title: str, events: list[tuple[str, EventType, dict[str, Any]]], slice_: bool,
        claim: bool, handed: list[tuple[bool, bool]]) -> None:
    seen = Seen()
    on_node, on_pod = hami_feed.with_shares(seen.change, seen.handed, seen.handed)
    for kind, event, obj in events:
        (on_node if kind == "node" else on_pod)(event, obj)
    inventory = seen.facts.devices()
    assert bool(inventory.slices) is slice_, title
    assert bool(inventory.claims) is claim, title
    assert seen.when_handed == handed, title
    if slice_:
        assert hami.CLASS.name in inventory.classes


def test_objects_without_shares_never_touch_the_facts() -> None:
    seen = Seen()
    on_node, on_pod = hami_feed.with_shares(seen.change, seen.handed, seen.handed)
    on_node(ADDED, node(None))
    on_pod(ADDED, pod(mem=None))
    on_pod(DELETED, pod(mem=None))
    assert seen.changes == 0 and len(seen.when_handed) == 3
