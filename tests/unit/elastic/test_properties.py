"""Properties of elastic grow and shrink over random clusters: a shrink never leaves a gang
below its minimum and takes only members above it; binds never put a node over capacity, nor
do a preemptor's nodes once its victims' releases are carried out."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.decide.cycle import decide
from scheduler.model.elastic import surplus
from scheduler.model.resources import GPU
from scheduler.model.workloads import PodInfo
from scheduler.world.snapshot import Snapshot
from tests.unit.elastic.helpers import NODES, NOW, grouped, job_pods
from tests.unit.policies.builders import SOLVE, policies, queue

CAPACITY = {n.name: n.allocatable[GPU] for n in NODES}


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[PodInfo], dict[str, int]]:
    """Running elastic and whole Jobs placed within capacity, some of their pods waiting,
    and pending Jobs of higher priority."""
    free = dict(CAPACITY)
    pods: list[PodInfo] = []
    parallelism: dict[str, int] = {}
    for i in range(draw(st.integers(1, 4))):
        name, gpus = f"r{i}", draw(st.sampled_from([2, 4, 8]))
        size = draw(st.integers(1, 4))
        on: list[str | None] = []
        for _ in range(size):
            fits = [n for n, f in sorted(free.items()) if f >= gpus]
            node = draw(st.sampled_from([*fits, None])) if fits else None
            if node is not None:
                free[node] -= gpus
            on.append(node)
        if not any(on):
            continue
        minimum = draw(st.integers(1, size))
        pods += job_pods(name, on, gpus=gpus, priority=draw(st.integers(0, 3)),
                         min_member=str(minimum) if minimum < size else None)
        parallelism[name] = size
    for i in range(draw(st.integers(1, 2))):
        name = f"p{i}"
        size = draw(st.integers(1, 3))
        pods += job_pods(name, [None] * size, gpus=draw(st.sampled_from([2, 4, 8])),
                         priority=draw(st.integers(2, 9)))
        parallelism[name] = size
    return pods, parallelism


@settings(max_examples=150, deadline=None)
@given(worlds())
def test_a_shrink_never_goes_below_the_minimum_and_nothing_goes_over_capacity(
        world: tuple[list[PodInfo], dict[str, int]]) -> None:
    pods, parallelism = world
    gangs = grouped(pods, parallelism)
    snap = Snapshot(NODES, gangs.running)
    plan = decide(snap, gangs.pending, policies(queue("q", quota={"a100": 32})), NOW,
                  solver=SOLVE)
    used: dict[str, int] = defaultdict(int)
    for rg in snap.running.values():
        for node, res in rg.allocations:
            used[node] += res[GPU]
    for ev in plan.evictions:
        rg = snap.running[ev.victim]
        if not ev.release.is_whole:
            assert rg.min_member is not None
            assert set(ev.pods) <= set(surplus(rg))
            assert len(rg.pod_nodes) - len(ev.pods) >= rg.min_member
    requests = {p.name: p.requirements.requests[GPU] for p in pods}
    for b in plan.binds:
        for pod, node in b.pod_nodes:
            used[node] += requests[pod.name]
    assert all(used[n] <= CAPACITY[n] for n in CAPACITY)  # binds: no node over capacity
    for ev in plan.evictions:
        for node, res in ev.release.freed:
            used[node] -= res[GPU]
    for nom in plan.nominations:
        for pod, node in nom.pod_nodes:
            used[node] += requests[pod.name]
    assert all(used[n] <= CAPACITY[n] for n in CAPACITY)  # once the releases are carried out
