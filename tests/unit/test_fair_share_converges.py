"""Fair share over time: two backlogged queues with weights 1:3 converge to a 1:3 GPU share.

A tiny virtual-time loop stands in for the simulator: decide, start the binds, finish gangs
when their runtime is up, keep both queues backlogged, and integrate GPU usage per queue.
"""

from __future__ import annotations

import heapq
import random

import pytest

from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan
from scheduler.model import Gang, RunningGang
from scheduler.model.demand import gpus_of
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue

BACKLOG = 6  # pending gangs kept per queue


def simulate(weights: dict[str, float], horizon: float, seed: int = 7) -> dict[str, float]:
    """GPU-seconds used per queue over [horizon/5, horizon] (the first fifth is warm-up)."""
    rng = random.Random(seed)
    pol = policies(queue("pool", quota={"a100": 128}),
                   *(queue(name, "pool", weight=w, quota={"a100": 0}) for name, w in
                     weights.items()))
    snap = Snapshot(nodes("a100", 16))
    pending: dict[str, Gang] = {}
    ends: list[tuple[float, str]] = []
    serial = 0
    now = 0.0
    plan: CyclePlan | None = None
    used = dict.fromkeys(weights, 0.0)
    warmup = horizon / 5

    def refill() -> None:
        nonlocal serial
        for name in weights:
            while sum(1 for g in pending.values() if g.queue == name) < BACKLOG:
                serial += 1
                g = gang(f"{name}-{serial:05d}", name, gpus=8, pods=rng.choice([1, 1, 2, 4]),
                         created=now + serial * 1e-6, runtime=rng.uniform(200.0, 1000.0))
                pending[g.id] = g

    refill()
    while now < horizon:
        plan = decide(snap, list(pending.values()), pol, now, previous=plan, solver=SOLVE)
        assert not plan.evictions
        for b in plan.binds:
            g = pending.pop(b.gang_id)
            assert g.runtime_estimate is not None
            end = now + g.runtime_estimate
            snap = snap.with_running(RunningGang(g, b.placement.allocations(g), now,
                                                 expected_end=end))
            heapq.heappush(ends, (end, g.id))
        refill()
        nxt = min(ends[0][0], horizon)
        for rg in snap.running.values():
            lo = max(now, warmup)
            if nxt > lo:
                used[rg.gang.queue] += gpus_of(rg.usage) * (nxt - lo)
        now = nxt
        done = []
        while ends and ends[0][0] <= now:
            done.append(heapq.heappop(ends)[1])
        snap = snap.without_gangs(done)
    return used


@pytest.mark.slow
def test_weights_one_to_three_converge_to_a_one_to_three_gpu_share() -> None:
    used = simulate({"light": 1.0, "heavy": 3.0}, horizon=200_000.0)
    share = used["light"] / (used["light"] + used["heavy"])
    # 1:3 is a 25% share for the light queue; within 5% of that.
    assert share == pytest.approx(0.25, rel=0.05), share
