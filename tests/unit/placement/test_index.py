"""The free-GPU index must agree with a rescan of the snapshot, however it was moved around."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.model.demand import gpus_of
from scheduler.model.resources import Resources
from scheduler.placement.index import FreeIndex, free_index
from scheduler.world.snapshot import Snapshot
from tests.unit.placement.builders import busy, node

NAMES = [f"n{i}" for i in range(12)]


def _expected(snap: Snapshot, min_gpus: int) -> list[str]:
    names = [n for n in NAMES if max(gpus_of(snap.free(n)), 0) >= min_gpus]
    return sorted(names, key=lambda n: (max(gpus_of(snap.free(n)), 0), n))


operations = st.lists(st.tuples(
    st.sampled_from(("run", "use", "drop", "back", "index")),
    st.integers(0, 11), st.integers(0, 8), st.integers(0, 30)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_index_matches_a_rescan_after_any_derivation(ops: list[tuple[str, int, int, int]]) -> None:
    base = Snapshot([node(n) for n in NAMES])
    history = [base]
    snap = base
    running: list[str] = []
    for i, (op, node_i, gpus, back) in enumerate(ops):
        name = NAMES[node_i]
        if op == "run":
            gid = f"ns/g{i}"
            snap = snap.with_running(busy(name, {name: gpus}, gang_name=f"g{i}"))
            running.append(gid)
        elif op == "use":
            snap = snap.with_usage(name, Resources.of(gpu=gpus % 3))
        elif op == "drop" and running:
            gid = running.pop(node_i % len(running))
            if gid in snap.running:
                snap = snap.without_gangs([gid])
        elif op == "back":
            snap = history[-1 - back % len(history)]  # jump to an older (or sibling) snapshot
            running = sorted(snap.running)
        history.append(snap)
        index = free_index(snap, "all", NAMES)
        assert list(index.ascending(gpus)) == _expected(snap, gpus)


def test_incremental_sync_does_not_rescan(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = Snapshot([node(n) for n in NAMES])
    index = FreeIndex(NAMES)
    index.sync(snap)
    after = snap.with_running(busy("n3", {"n3": 7}))

    def rescan(self: FreeIndex, snapshot: Snapshot) -> None:
        raise AssertionError("a one-node change must not rebuild the index")

    monkeypatch.setattr(FreeIndex, "_rebuild", rescan)
    index.sync(after)
    assert next(index.ascending(1)) == "n3"
    index.sync(snap)  # and back to the parent
    assert next(index.ascending(1)) == "n0"
