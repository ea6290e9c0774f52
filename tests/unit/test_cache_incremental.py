"""Property: the incremental cache always agrees with a cache built from scratch."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
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
