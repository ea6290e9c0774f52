"""A Queue's life in the ``PolicyStore`` beyond its spec: deletion asked for (terminating: in
force, admitting nothing new), its object gone (a parent kept for its children, never
leaving them as roots), and queues that wait for a parent that waits itself (a cycle named
as such, not "unknown queue")."""

from __future__ import annotations

from typing import Any

import pytest

from policies.validation import PolicyStore
from tests.unit.policies.test_validation import queue_obj


def store_of(*objs: dict[str, Any]) -> PolicyStore:
    store = PolicyStore()
    for obj in objs:
        store = store.apply(obj).store
    return store


TREE = (queue_obj("root"), queue_obj("a", "root"), queue_obj("b", "root"))


def test_a_queue_being_deleted_stays_in_force_terminating() -> None:
    store = store_of(*TREE).terminate("a")
    queues = store.policies.queues
    assert set(queues.queues) == {"root", "a", "b"} and queues.terminating == {"a"}
    assert store.terminate("a") is store  # asked again: nothing new
    edited = store.apply(queue_obj("a", "root", gpus=16))  # still judged; still terminating
    assert edited.accepted and edited.store.policies.queues.terminating == {"a"}
    gone = store.delete("a").policies.queues
    assert set(gone.queues) == {"root", "b"} and gone.terminating == frozenset()


def test_a_parent_deleted_stays_for_its_children_and_goes_with_the_last() -> None:
    store = store_of(*TREE).delete("root")
    queues = store.policies.queues
    assert set(queues.queues) == {"root", "a", "b"} and queues.terminating == {"root"}
    assert queues.parent_of("a") == "root"  # never silently a root
    store = store.delete("a")
    assert "root" in store.policies.queues.queues
    moved = store.apply(queue_obj("b"))  # b re-parented: root has no child left
    assert moved.accepted and set(moved.store.policies.queues.queues) == {"b"}
    assert moved.store.gone == frozenset()


def test_deleting_a_queue_that_waits_for_its_parent_forgets_it() -> None:
    store = store_of(queue_obj("orphan", "nobody"))
    assert set(store.waiting) == {"orphan"}
    assert store.terminate("orphan").waiting == {}
    assert store.delete("orphan").waiting == {}


@pytest.mark.parametrize("order", [("loop-a", "loop-b"), ("loop-b", "loop-a")])
def test_a_cycle_of_waiting_queues_is_named_as_a_cycle(order: tuple[str, str]) -> None:
    parents = {"loop-a": "loop-b", "loop-b": "loop-a"}
    first = PolicyStore().apply(queue_obj(order[0], parents[order[0]]))
    assert first.errors[0].reason == f"unknown queue {order[1]!r}"  # true: it does not exist
    second = first.store.apply(queue_obj(order[1], parents[order[1]]))
    assert not second.accepted
    assert second.errors[0].reason.startswith(
        f"cycle in the queue hierarchy: {order[1]} -> {order[0]} -> {order[1]}")
    # The first one's verdict changed too: it is named in the update.
    (other,) = second.others[order[0]]
    assert other.reason.startswith(
        f"cycle in the queue hierarchy: {order[0]} -> {order[1]} -> {order[0]}")
    # Breaking the cycle applies both.
    fixed = second.store.apply(queue_obj("loop-a"))
    assert fixed.accepted and fixed.store.waiting == {}
    assert fixed.store.policies.queues.parent_of("loop-b") == "loop-a"


def test_a_parent_that_exists_but_waits_itself_is_not_called_unknown() -> None:
    store = store_of(queue_obj("mid", "top"))
    update = store.apply(queue_obj("leaf", "mid"))
    assert update.errors[0].reason == ("queue 'mid' exists but is not in force yet: it waits "
                                       "for its own parent 'top'")
