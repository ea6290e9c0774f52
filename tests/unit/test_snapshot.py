"""Snapshot: free = allocatable - usage, derivation never mutates, lineage lists changes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.model import Gang, Node, PodRequirements, Role, RunningGang, Taint
from scheduler.model.demand import gpus_of
from scheduler.model.resources import Resources
from scheduler.world.snapshot import Snapshot


def _gang(gid: str) -> Gang:
    req = PodRequirements(Resources.of(gpu=1))
    return Gang(id=gid, uid=gid, namespace="ns", name=gid, queue="q",
                roles=(Role("w", 1, req),))


def _running(gid: str, **gpus_per_node: int) -> RunningGang:
    allocs = tuple((n, Resources.of(gpu=g, pods=1)) for n, g in sorted(gpus_per_node.items()))
    return RunningGang(_gang(gid), allocs, start_time=0.0)


NODES = [Node.build(n, Resources.of(gpu=8, cpu=64000, pods=110)) for n in ("n1", "n2", "n3")]


@pytest.fixture
def snap() -> Snapshot:
    return Snapshot(NODES, [_running("ns/a", n1=4, n2=8)],
                    other_usage={"n3": Resources.of(cpu=2000), "gone": Resources.of(cpu=1)})


def test_free_is_allocatable_minus_usage(snap: Snapshot) -> None:
    assert snap.free("n1") == Resources.of(gpu=4, cpu=64000, pods=109)
    assert snap.free("n2") == Resources.of(cpu=64000, pods=109)
    assert snap.free("n3") == Resources.of(gpu=8, cpu=62000, pods=110)
    assert snap.used("n1") == Resources.of(gpu=4, pods=1)
    assert gpus_of(snap.total_free()) == 12
    assert gpus_of(snap.total_allocatable()) == 24
    assert snap.node_names == ("n1", "n2", "n3")


def test_with_running_leaves_the_original_unchanged(snap: Snapshot) -> None:
    after = snap.with_running(_running("ns/b", n3=8))
    assert gpus_of(after.free("n3")) == 0
    assert gpus_of(snap.free("n3")) == 8
    assert "ns/b" in after.running
    assert "ns/b" not in snap.running


def test_without_gangs_is_undone_by_keeping_the_old_snapshot(snap: Snapshot) -> None:
    removed = snap.without_gangs(["ns/a"])
    assert gpus_of(removed.free("n1")) == 8 and gpus_of(removed.free("n2")) == 8
    assert gpus_of(snap.free("n1")) == 4 and "ns/a" in snap.running
    assert snap.without_gangs([]) is snap
    with pytest.raises(KeyError, match="ns/zzz"):
        snap.without_gangs(["ns/zzz"])


def test_with_usage(snap: Snapshot) -> None:
    after = snap.with_usage("n2", Resources.of(cpu=1000))
    assert after.free("n2")["cpu"] == 63000
    assert snap.free("n2")["cpu"] == 64000


def test_lineage_names_the_nodes_changed_since_each_ancestor(snap: Snapshot) -> None:
    one = snap.with_running(_running("ns/b", n3=1))
    two = one.without_gangs(["ns/a"])
    assert snap.lineage == {snap.version: frozenset()}
    assert one.lineage == {one.version: frozenset(), snap.version: {"n3"}}
    assert two.lineage == {two.version: frozenset(), one.version: {"n1", "n2"},
                           snap.version: {"n1", "n2", "n3"}}
    assert len({snap.version, one.version, two.version}) == 3


def test_lineage_is_bounded(snap: Snapshot) -> None:
    s = snap
    for i in range(20):
        s = s.with_usage("n1", Resources.of(cpu=1 + i))
    assert len(s.lineage) == 8
    assert snap.version not in s.lineage


def test_eligible_nodes_are_cached_and_shared(snap: Snapshot) -> None:
    tainted = [*NODES, Node.build("t", Resources.of(gpu=8), taints=(Taint("x", "y"),))]
    s = Snapshot(tainted)
    req = PodRequirements(Resources.of(gpu=1))
    assert s.eligible_nodes(req) == ("n1", "n2", "n3")
    derived = s.with_usage("n1", Resources.of(gpu=1))
    assert derived.eligible_nodes(req) is s.eligible_nodes(req)
    assert derived.index is s.index


def test_the_gangs_with_a_runtime_limit_of_their_own_follow_derivations() -> None:
    """``timed`` (what the runaway guards read every cycle instead of every running gang)
    is kept as gangs are assumed running, replaced and taken away."""
    timed = replace(_running("ns/t", n1=1), gang=replace(_gang("ns/t"), max_runtime=3600.0))
    base = Snapshot(NODES, [_running("ns/a", n1=4), timed])
    assert base.timed == frozenset({"ns/t"})
    more = base.with_running(replace(_running("ns/u", n3=1),
                                     gang=replace(_gang("ns/u"), max_runtime=60.0)))
    assert more.timed == frozenset({"ns/t", "ns/u"})
    assert base.timed == frozenset({"ns/t"})  # the receiver is unchanged
    assert more.with_running(_running("ns/u", n3=1)).timed == frozenset({"ns/t"})  # replaced
    assert more.without_gangs(["ns/t"]).timed == frozenset({"ns/u"})
    assert more.with_usage("n2", Resources.of(cpu=1)).timed == more.timed
