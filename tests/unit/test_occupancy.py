"""Occupancy: a derived snapshot's running pods are those of a fresh one, and deriving is
lazy; the facts assume claim decisions until the watch shows them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.feed.facts import ClusterFacts
from scheduler.model import Gang, PodRequirements, Role, RunningGang
from scheduler.model.constraints import PodAffinityTerm, PodConstraints
from scheduler.model.labels import Labels, LabelSelector
from scheduler.model.prebind import PreBind, PreBindKind
from scheduler.model.resources import Resources
from scheduler.model.volumes import Claim, Volume
from scheduler.world.occupancy import Occupant
from scheduler.world.snapshot import Snapshot
from tests.unit.placement.builders import HOST, node

NODES = [node(f"n{i}") for i in range(4)]
ANTI = PodConstraints(anti_affinity=(PodAffinityTerm(LabelSelector.equals({"app": "x"}), HOST,
                                                     frozenset({"ns"})),))


def running(name: str, app: str, where: dict[str, int], anti: bool = False) -> RunningGang:
    role = Role("w", sum(where.values()), PodRequirements(
        Resources({"cpu": 1}), constraints=ANTI if anti else PodConstraints()),
        labels=Labels({"app": app}))
    g = Gang(id=f"ns/{name}", uid=name, namespace="ns", name=name, queue="q", roles=(role,))
    return RunningGang(g, tuple((n, Resources({"cpu": c})) for n, c in sorted(where.items())),
                       0.0, members=tuple(("w", n, c) for n, c in sorted(where.items())))


def facts(snap: Snapshot) -> list[tuple[str, str, int, str]]:
    return sorted((o.node, o.labels.get("app") or "", o.count, o.owner) for o in snap.pods.all())


gangs = st.lists(st.tuples(st.sampled_from("xy"), st.dictionaries(
    st.sampled_from([n.name for n in NODES]), st.integers(1, 2), min_size=1), st.booleans()),
    min_size=1, max_size=5)


@settings(max_examples=100, deadline=None)
@given(gangs, st.lists(st.integers(0, 4), max_size=4))
def test_derived_occupancy_equals_a_fresh_one(specs: list[tuple[str, dict[str, int], bool]],
                                              removals: list[int]) -> None:
    others = [Occupant("n0", "ns", {"app": "z"})]
    base = Snapshot(NODES, other_pods=others)
    base.pods.all()  # build the base index, so the derived ones are brought forward from it
    snap = base
    live: dict[str, RunningGang] = {}
    for i, (app, where, anti) in enumerate(specs):
        rg = running(f"g{i}", app, where, anti)
        snap = snap.with_running(rg)
        live[rg.id] = rg
        if i % 2:
            snap.pods.all()  # some intermediate ones built too
    for r in removals:
        gid = f"ns/g{r}"
        if gid in live:
            snap = snap.without_gangs([gid])
            del live[gid]
    fresh = Snapshot(NODES, live.values(), other_pods=others)
    assert facts(snap) == facts(fresh)
    assert sorted(o.node for o in snap.pods.with_anti_affinity()) == sorted(
        o.node for o in fresh.pods.with_anti_affinity())
    assert sorted(o.node for o in snap.pods.matching(LabelSelector.equals({"app": "x"}))) == \
        sorted(o.node for o in fresh.pods.matching(LabelSelector.equals({"app": "x"})))


def test_has_anti_affinity_is_known_without_building_the_index() -> None:
    snap = Snapshot(NODES).with_running(running("a", "x", {"n1": 1}, anti=True))
    assert snap.pods.has_anti_affinity
    assert not Snapshot(NODES).with_running(running("b", "x", {"n1": 1})).pods.has_anti_affinity


def test_facts_assume_a_claim_decision_until_the_watch_shows_it() -> None:
    f = ClusterFacts(ttl=10.0)
    f.set_claim("ns/c", Claim("ns", "c", storage_class="s"))
    f.set_volume("pv", Volume("pv", 1 << 30, storage_class="s"))
    f.assume([PreBind("ns/c", PreBindKind.CLAIM_REF, "pv")], now=0.0)
    assert f.catalog().claims["ns/c"].bound and f.catalog().volumes["pv"].claim_ref is not None
    f.set_claim("ns/c", Claim("ns", "c", storage_class="s", volume_name="pv"))  # the watch
    assert not f.catalog().claims["ns/c"].bound  # as watched: mid-binding, no assumption left
    f.assume([PreBind("ns/c", PreBindKind.SELECTED_NODE, "n1")], now=0.0)
    assert f.expire(now=11.0) and f.catalog().claims["ns/c"].selected_node == ""
