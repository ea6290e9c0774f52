"""Properties of semi-preemptible reclaim over random clusters: reclaim by another queue never
takes a member of a gang's minimum that fits within the queue's quota (worked out here
independently of ``policies.semi``: earliest started first, GPUs only), a shrink never goes
below a gang's minimum, and no node goes over capacity once the releases are carried out."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.decide.cycle import decide
from scheduler.model import RunningGang
from scheduler.model.elastic import rank_key
from scheduler.model.resources import GPU
from scheduler.model.workloads import PodInfo
from scheduler.world.snapshot import Snapshot
from tests.unit.elastic.helpers import NODES, NOW, grouped
from tests.unit.policies.builders import SOLVE
from tests.unit.semi.helpers import job, tree

CAPACITY = {n.name: n.allocatable[GPU] for n in NODES}
World = tuple[list[PodInfo], dict[str, int], int, int]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    """Running Jobs of queues a (semi-preemptible) and b placed within capacity, elastic or
    not, started at various times; pending Jobs of b (and sometimes of a)."""
    free = dict(CAPACITY)
    pods: list[PodInfo] = []
    parallelism: dict[str, int] = {}
    for i in range(draw(st.integers(1, 5))):
        name, gpus = f"r{i}", draw(st.sampled_from([2, 4, 8]))
        size = draw(st.integers(1, 4))
        on: list[str | None] = []
        for _ in range(size):
            fits = [n for n, f in sorted(free.items()) if f >= gpus]
            node = draw(st.sampled_from(fits)) if fits else None
            if node is not None:
                free[node] -= gpus
            on.append(node)
        if not any(on):
            continue
        minimum = draw(st.integers(1, size))
        pods += job(name, on, queue=draw(st.sampled_from(["a", "a", "b"])), gpus=gpus,
                    at=float(draw(st.integers(0, 9_000))), priority=draw(st.integers(0, 3)),
                    min_member=minimum if minimum < size else None)
        parallelism[name] = size
    for i in range(draw(st.integers(1, 2))):
        name, size = f"p{i}", draw(st.integers(1, 3))
        pods += job(name, [None] * size, queue=draw(st.sampled_from(["b", "b", "a"])),
                    gpus=draw(st.sampled_from([2, 4, 8])), priority=draw(st.integers(2, 9)))
        parallelism[name] = size
    return (pods, parallelism, draw(st.sampled_from([0, 8, 16, 24])),
            draw(st.sampled_from([8, 16, 24, 32])))


def kept_minimums(running: list[RunningGang], quota: int) -> dict[str, set[str]]:
    """Gang id -> the pods of its minimum, for a's gangs whose minimum fits within *quota*
    GPUs beside those started before it (the minimum: its lowest ranks)."""
    used, out = 0, {}
    for rg in sorted(running, key=lambda g: (g.start_time, g.id)):
        gpus = {p.name: r.requests[GPU] for r in rg.gang.roles for p in r.pods}
        members = sorted((p for p, _ in rg.pod_nodes), key=rank_key) or list(rg.gang.pods)
        elastic = rg.min_member is not None and bool(rg.pod_nodes)
        keep = members[: rg.min_member] if elastic else members
        need = sum(gpus[p.name] for p in keep)
        if used + need <= quota:
            used += need
            out[rg.id] = {p.name for p in keep}
    return out


@settings(max_examples=150, deadline=None)
@given(worlds())
def test_reclaim_never_takes_a_kept_minimum_nor_goes_below_one_nor_over_capacity(
        world: World) -> None:
    pods, parallelism, a_quota, b_quota = world
    gangs = grouped(pods, parallelism)
    snap = Snapshot(NODES, gangs.running)
    plan = decide(snap, gangs.pending, tree(a_quota, b_quota), NOW, solver=SOLVE)
    kept = kept_minimums([rg for rg in snap.running.values() if rg.gang.queue == "a"],
                         a_quota)
    queue_of = {g.id: g.queue for g in gangs.pending}
    used: dict[str, int] = defaultdict(int)
    for rg in snap.running.values():
        for node, res in rg.allocations:
            used[node] += res[GPU]
    for ev in plan.evictions:
        rg = snap.running[ev.victim]
        taken = {p.name for p in ev.release.released.gang.pods}
        if rg.gang.queue == "a" and queue_of.get(ev.preemptor) == "b":
            assert not taken & kept.get(rg.id, set()), "reclaim took a kept minimum"
        if not ev.release.is_whole:
            assert rg.min_member is not None
            assert len(rg.pod_nodes) - len(taken) >= rg.min_member
        for node, res in ev.release.freed:
            used[node] -= res[GPU]
    requests = {p.name: p.requirements.requests[GPU] for p in pods}
    placed = [*(b.pod_nodes for b in plan.binds), *(n.pod_nodes for n in plan.nominations)]
    for pod_nodes in placed:
        for pod, node in pod_nodes:
            used[node] += requests[pod.name]
    assert all(used[n] <= CAPACITY[n] for n in CAPACITY)
