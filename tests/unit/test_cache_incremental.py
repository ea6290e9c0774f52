"""Property: the incremental cache always agrees with a cache built from scratch."""

from __future__ import annotations

import dataclasses

from hypothesis import example, given, settings
from hypothesis import strategies as st

from scheduler.feed.cache import ClusterCache
from scheduler.model import Node, PodRef, PodRequirements, Resources
from scheduler.model.demand import gpus_of
from scheduler.model.workloads import POD_GROUP_LABEL, PodGroupInfo, PodInfo, PodPhase

NODES = [Node.build(f"n{i}", Resources.of(gpu=8, cpu=64000, pods=110)) for i in range(3)]
REQ = {g: PodRequirements(requests=Resources.of(gpu=g)) for g in (1, 2, 4)}

pod_strategy = st.builds(
    lambda i, group, node, gpus, ours, phase: PodInfo(
        uid=f"u{i}", namespace="ns", name=f"p{i}", requirements=REQ[gpus],
        scheduler_name="gang-scheduler" if ours else "default-scheduler",
        node_name=node, phase=phase if node else PodPhase.PENDING,
        labels={POD_GROUP_LABEL: group} if group else {}),
    st.integers(0, 3), st.sampled_from(["", "g1", "g2"]), st.sampled_from(["", "n0", "n1", "n2"]),
    st.sampled_from([1, 2, 4]), st.booleans(),
    st.sampled_from([PodPhase.RUNNING, PodPhase.SUCCEEDED]))

op_strategy = st.one_of(
    st.tuples(st.just("upsert"), pod_strategy),
    st.tuples(st.just("delete"), st.integers(0, 3)),
    st.tuples(st.just("group"), st.sampled_from(["g1", "g2"]), st.integers(1, 4)),
    st.tuples(st.just("assume"), st.integers(0, 3), st.sampled_from(["n0", "n1"])),
    st.tuples(st.just("forget"), st.integers(0, 3)),
    st.tuples(st.just("cycle"),),
)


def _view(cache: ClusterCache, now: float) -> tuple[object, ...]:
    inp = cache.cycle_input(now)
    snap = inp.snapshot
    return (
        {n: snap.free(n) for n in snap.node_names},
        sorted(snap.running),
        [(g.id, g.min_member, g.size) for g in inp.gangs.pending],
        [(r.id, r.allocations) for r in inp.gangs.running],
        dict(inp.gangs.partially_bound), dict(inp.gangs.problems),
        dict(inp.gangs.other_usage),
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(op_strategy, max_size=25))
def test_incremental_equals_rebuild(ops: list[tuple]) -> None:
    cache = ClusterCache()
    for n in NODES:
        cache.upsert_node(n)
    for op in ops:
        kind = op[0]
        if kind == "upsert":
            cache.upsert_pod(op[1])
        elif kind == "delete":
            cache.delete_pod(f"u{op[1]}")
        elif kind == "group":
            cache.upsert_group(PodGroupInfo("ns", op[1], min_member=op[2]))
        elif kind == "assume":
            pod = cache.pod(f"u{op[1]}")
            if pod is not None:
                cache.assume([(PodRef("ns", pod.name, pod.uid), op[2])], now=0)
        elif kind == "forget":
            pod = cache.pod(f"u{op[1]}")
            if pod is not None:
                cache.forget([PodRef("ns", pod.name, pod.uid)])
        else:
            cache.cycle_input(0)
    # A fresh cache fed the final state, with assumptions materialised as bindings.
    fresh = ClusterCache()
    for n in NODES:
        fresh.upsert_node(n)
    for pod in cache.pods():
        fresh.upsert_pod(pod)
    for key in ("ns/g1", "ns/g2"):
        group = cache.group(key)
        if group is not None:
            fresh.upsert_group(group)
    assumed = [(PodRef(p.namespace, p.name, p.uid), a.node)
               for p in cache.pods() if (a := cache._assumed.get(p.uid)) is not None]
    fresh.assume(assumed, now=0)
    assert _view(cache, 1) == _view(fresh, 1)


def test_snapshot_is_derived_not_rebuilt_when_only_gangs_change() -> None:
    cache = ClusterCache()
    for n in NODES:
        cache.upsert_node(n)
    first = cache.cycle_input(0).snapshot
    pod = PodInfo(uid="u", namespace="ns", name="p", requirements=REQ[4],
                  scheduler_name="gang-scheduler")
    cache.upsert_pod(dataclasses.replace(pod, node_name="n0", phase=PodPhase.RUNNING))
    second = cache.cycle_input(0).snapshot
    assert second.nodes is first.nodes  # shared static part: derived, not rebuilt
    assert gpus_of(second.free("n0")) == 4


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(op_strategy, st.tuples(st.just("read"), st.sampled_from([0, 40]))),
                max_size=25))
@example([("cycle",), ("upsert", PodInfo(  # a gang starts running between two snapshots
    uid="u1", namespace="ns", name="p1", requirements=REQ[4], scheduler_name="gang-scheduler",
    node_name="n0", phase=PodPhase.RUNNING)), ("read", 0)])
def test_gangs_now_is_what_a_cycle_input_would_give(ops: list[tuple]) -> None:
    """``gangs_now`` (no snapshot derived) has the gangs a ``cycle_input`` at the same time
    has, and leaves the cache's later cycle inputs as they would be without it."""
    narrow, full = ClusterCache(), ClusterCache()
    for cache in (narrow, full):
        for n in NODES:
            cache.upsert_node(n)
    for op in ops:
        for cache in (narrow, full):
            if op[0] == "upsert":
                cache.upsert_pod(op[1])
            elif op[0] == "delete":
                cache.delete_pod(f"u{op[1]}")
            elif op[0] == "group":
                cache.upsert_group(PodGroupInfo("ns", op[1], min_member=op[2]))
            elif op[0] in ("assume", "forget") and (pod := cache.pod(f"u{op[1]}")) is not None:
                ref = PodRef("ns", pod.name, pod.uid)
                if op[0] == "assume":
                    cache.assume([(ref, op[2])], now=0)  # lapses after 30 s
                else:
                    cache.forget([ref])
            elif op[0] == "cycle":
                cache.cycle_input(0)
        if op[0] == "read":  # at 40 s, the assumptions made at 0 have lapsed
            now = narrow.gangs_now(op[1])
            inp = full.cycle_input(op[1])
            assert dict(now.running) == dict(inp.snapshot.running)
            assert now.pending == inp.gangs.pending
            assert narrow.generation == full.generation
    assert _view(narrow, 50) == _view(full, 50)


def test_gangs_now_assumes_binds_expires_lapsed_ones_and_is_a_picture() -> None:
    cache = ClusterCache(assume_ttl=30)
    for n in NODES:
        cache.upsert_node(n)
    pod = PodInfo(uid="u", namespace="ns", name="p", requirements=REQ[4],
                  scheduler_name="gang-scheduler")
    cache.upsert_pod(pod)
    assert [g.id for g in cache.cycle_input(0).gangs.pending] == ["ns/p"]
    cache.assume([(PodRef("ns", "p", "u"), "n0")], now=0)
    bound = cache.gangs_now(10)
    assert set(bound.running) == {"ns/p"} and bound.pending == ()
    generation = cache.generation
    lapsed = cache.gangs_now(31)  # the bind was never confirmed: pending again
    assert cache.generation > generation
    assert set(lapsed.running) == set() and [g.id for g in lapsed.pending] == ["ns/p"]
    assert set(bound.running) == {"ns/p"}  # the earlier picture is unchanged
    assert "ns/p" not in cache.cycle_input(31).snapshot.running
