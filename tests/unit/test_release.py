"""The release value: a whole-gang release is exactly what ``without_gangs`` did (and what a
snapshot never containing the gang would show); releasing then re-adding gives the snapshot back
and never goes over capacity; what a release frees is the gang's; a partial release frees
only its members' part, and is refused, clearly, for a gang whose members' nodes are not known."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.decide.plan import CyclePlan, Eviction
from scheduler.model import RunningGang
from scheduler.model.demand import gpus_of
from scheduler.model.durations import CLOCK_SKEW_SECONDS
from scheduler.model.release import Release
from scheduler.model.resources import GPU, Resources
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import gang, nodes, running
from tests.unit.simulator.test_plan_entries import bind
from tests.unit.simulator.test_plan_entries import setup as simulated

NODES = nodes("a100", 4) + nodes("h100", 2)


def _picture(snap: Snapshot) -> tuple[object, ...]:
    """Everything a decision reads of a snapshot's running gangs and free capacity."""
    return (dict(snap.free_by_node), sorted(snap.running), dict(snap.queue_usage),
            dict(snap.running_per_queue), snap.terminating,
            {n: len(snap.pods.on(n)) for n in snap.node_names})


@dataclass(frozen=True)
class Scenario:
    name: str
    gangs: tuple[RunningGang, ...]
    released: tuple[str, ...]
    other: dict[str, Resources] | None = None


A = running(gang("a", "q", gpus=4, pods=2, with_pods=True), {"a100-0000": 1, "a100-0001": 1})
B = running(gang("b", "q", gpus=4, pods=1, with_pods=True), {"a100-0000": 1})
C = running(gang("c", "r", gpus=8, pods=2, with_pods=True), {"h100-0000": 1, "h100-0001": 1})
D = replace(running(gang("d", "r", gpus=2, pods=3, with_pods=True), {"a100-0002": 3}),
            terminating=True)
E = running(gang("e", "r", gpus=1, pods=2, with_pods=True), {"a100-0001": 1, "h100-0000": 1})

SCENARIOS = [
    Scenario("one gang", (A,), ("ns/a",)),
    Scenario("two gangs sharing a node, one released", (A, B), ("ns/b",)),
    Scenario("two gangs sharing a node, both released", (A, B), ("ns/a", "ns/b")),
    Scenario("across pools", (A, C, E), ("ns/e",)),
    Scenario("a terminating gang", (A, D), ("ns/d",)),
    Scenario("every gang of a queue", (A, B, C, D, E), ("ns/c", "ns/d", "ns/e")),
    Scenario("beside other pods' usage", (A, C), ("ns/a", "ns/c"),
             {"a100-0000": Resources({GPU: 2, "cpu": 500})}),
]


@pytest.mark.parametrize("s", SCENARIOS, ids=lambda s: s.name)
def test_a_whole_release_is_what_without_gangs_gave(s: Scenario) -> None:
    snap = Snapshot(NODES, s.gangs, s.other)
    releases = [Release.whole(snap.running[g]) for g in s.released]
    after = snap.without(releases)
    assert _picture(after) == _picture(snap.without_gangs(s.released))
    # ... and what a snapshot in which those gangs never ran shows.
    without = Snapshot(NODES, [g for g in s.gangs if g.id not in s.released], s.other)
    assert _picture(after) == _picture(without)
    assert sorted(after.lineage[snap.version]) == sorted({n for r in releases for n in r.nodes})
    assert snap.without([]) is snap


def test_a_release_names_the_gang_and_its_pods() -> None:
    r = Release.whole(A)
    assert (r.id, r.is_whole, r.pods, r.nodes) == ("ns/a", True, A.gang.pods, A.nodes)
    assert r.freed == A.allocations and r.gpus == 8
    assert Release.of_pods(A, reversed(A.gang.pods)) == r  # every member: the whole gang


@pytest.mark.parametrize(("checkpoint", "since"), [
    (None, 100.0),  # never checkpointed: since the start
    (400.0, 400.0),
    (1000.0 + CLOCK_SKEW_SECONDS, 1000.0),  # within the skew: nothing lost
    (1001.0 + CLOCK_SKEW_SECONDS, 100.0),  # beyond it: not believed
])
def test_work_at_risk_counts_the_gpus_since_the_last_believed_checkpoint(
        checkpoint: float | None, since: float) -> None:
    rg = running(gang("w", gpus=4, pods=2), {"a100-0000": 2}, start=100.0,
                 checkpoint=checkpoint)
    assert Release.whole(rg).work_at_risk(1000.0) == max(0.0, 1000.0 - since) * 8


# Releasing then re-adding ------------------------------------------------------------------
_GANGS = st.lists(st.tuples(st.integers(1, 8), st.integers(1, 3), st.sampled_from("qr"),
                            st.booleans()), min_size=1, max_size=10)


def _fill(specs: list[tuple[int, int, str, bool]]) -> Snapshot:
    """Each gang on the first nodes with room for one of its pods each, if it fits."""
    snap = Snapshot(NODES)
    for i, (gpus, pods, queue, _) in enumerate(specs):
        free = [n for n in snap.node_names if gpus_of(snap.free(n)) >= gpus][:pods]
        if len(free) == pods:
            g = gang(f"g{i}", queue, gpus=gpus, pods=pods, with_pods=True)
            snap = snap.with_running(running(g, dict.fromkeys(free, 1)))
    return snap


@settings(max_examples=60, deadline=None)
@given(_GANGS)
def test_releasing_then_readding_gives_the_snapshot_back_never_over_capacity(
        specs: list[tuple[int, int, str, bool]]) -> None:
    snap = _fill(specs)
    chosen = [rg for i, rg in enumerate(snap.running.values()) if specs[i][3]]
    releases = [Release.whole(rg) for rg in chosen]
    freed = snap.without(releases)
    assert gpus_of(freed.total_free()) - gpus_of(snap.total_free()) == sum(r.gpus for r in releases)
    assert [r.gpus for r in releases] == [rg.gang.gpus for rg in chosen]
    back = freed
    for rg in chosen:
        back = back.with_running(rg)
        assert all(v >= 0 for n in back.node_names for v in back.free(n).values())
    assert _picture(back) == _picture(snap)


# Partial releases ---------------------------------------------------------------------------
def test_a_partial_release_needs_its_members_nodes() -> None:
    part = Release.of_pods(A, A.gang.pods[:1])
    assert not part.is_whole and part.pods == A.gang.pods[:1] and part.id == "ns/a"
    snap = Snapshot(NODES, [A])
    for apply in (lambda: snap.without([part]), lambda: snap.pool_release(part),
                  lambda: part.freed, lambda: part.gpus, lambda: part.work_at_risk(0.0)):
        with pytest.raises(ValueError, match="ns/a: which member runs where is not known"):
            apply()
    assert part.only(part.pods) == part


#: A with its minimum (1) and its members' nodes: elastic.
ELASTIC = replace(A, min_member=1, pod_nodes=tuple(
    zip(A.gang.pods, ("a100-0000", "a100-0001"), strict=True)))


def test_a_partial_release_frees_only_its_members() -> None:
    part = Release.of_pods(ELASTIC, ELASTIC.gang.pods[1:])
    one = A.gang.roles[0].requests
    assert part.freed == (("a100-0001", one),)
    assert part.nodes == ("a100-0001",) and part.gpus == 4
    assert part.work_at_risk(100.0) == 400.0  # half the gang's GPU-seconds
    snap = Snapshot(NODES, [ELASTIC, B])
    after = snap.without([part])
    assert after.free_gpus("a100-0001") == 8 and after.free_gpus("a100-0000") == 0
    assert [p for p, _ in after.running["ns/a"].pod_nodes] == list(ELASTIC.gang.pods[:1])
    assert after.running["ns/a"].min_member == 1
    assert snap.pool_release(part) == {"a100": one}
    assert dict(after.queue_usage)[("q", "a100")][GPU] == 8  # A's kept member and B


def test_a_release_names_members_only() -> None:
    with pytest.raises(ValueError, match="ns/b-0: not members of gang ns/a"):
        Release.of_pods(A, B.gang.pods)
    with pytest.raises(ValueError, match="names no member"):
        Release.of_pods(A, ())
    with pytest.raises(ValueError, match="only pods it releases"):
        Release.of_pods(A, A.gang.pods[:1]).only(A.gang.pods[1:])


def test_the_simulated_cluster_refuses_a_shrink_below_the_minimum() -> None:
    sim, cache, refs = simulated()
    sim.apply(bind(refs), 0.0)
    rg = cache.cycle_input(1.0).snapshot.running["team/j"]
    plan = CyclePlan(now=50.0, evictions=(Eviction(Release.of_pods(rg, refs[:1]), "x", ""),))
    with pytest.raises(RuntimeError, match="a shrink of job j below its minimum 2"):
        sim.apply(plan, 50.0)
    assert sim.running_jobs == 1  # nothing carried out
    sim.apply(replace(plan, evictions=(Eviction(Release.whole(rg), "x", ""),)), 50.0)
    assert sim.running_jobs == 0 and sim.jobs["j"].preemptions == 1
