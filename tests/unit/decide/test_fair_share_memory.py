"""Fair share with memory in the order ``decide`` considers queues (policies/usage_memory.py).

The issue's example: a team that borrowed 500 GPUs all week yields, on Monday, to a team that
borrowed nothing, and only when a half-life is set. Then, in a small pure loop over the quota
ledger and the fair-share key (no placement), shares converge toward the weights over time
whatever was remembered at the start, and a remembered past is paid back first.
"""

from __future__ import annotations

import heapq
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import fairshare, usage_memory
from policies.quota import QuotaLedger, QuotaTree
from policies.usage_memory import UsageMemory
from scheduler.decide.cycle import decide
from scheduler.model.resources import GPU, Resources
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue

DAY = 86_400.0
WEEK = 7 * DAY


def _monday(half_life: float, memory: UsageMemory | None) -> str:
    """Which queue's gang starts on Monday, when one node of 8 GPUs has room for one of two
    8-GPU gangs (team-b's submitted a little later), under a 1,000-GPU org."""
    pol = policies(queue("org", quota={"a100": 1000}), queue("team-a", "org"),
                   queue("team-b", "org"), usage_half_life_seconds=half_life)
    gangs = [gang("a", "team-a", created=WEEK), gang("b", "team-b", created=WEEK + 1)]
    plan = decide(Snapshot(nodes("a100", 1)), gangs, pol, WEEK + 10, solver=SOLVE,
                  memory=memory)
    assert len(plan.binds) == 1
    return plan.binds[0].queue


#: team-a borrowed 500 GPUs from Monday 00:00 to Sunday 24:00; team-b nothing.
BUSY_WEEK = UsageMemory().observed(0.0, DAY, {"team-a": 500.0}).observed(WEEK, DAY, {})


@pytest.mark.parametrize(("half_life", "memory", "starts"), [
    # Off: today's order; equal shares, and team-a's gang is older.
    (0.0, None, "team-a"),
    (0.0, BUSY_WEEK, "team-a"),  # off means off, whatever is remembered
    (DAY, None, "team-a"),  # nothing remembered yet (a fresh scheduler)
    # On: the week is remembered, team-a yields.
    (DAY, BUSY_WEEK, "team-b"),
    (7 * DAY, BUSY_WEEK, "team-b"),
])
def test_a_queue_that_borrowed_all_week_yields_on_monday(half_life: float,
                                                         memory: UsageMemory | None,
                                                         starts: str) -> None:
    assert _monday(half_life, memory) == starts


def test_memory_never_delays_a_queue_within_its_quota() -> None:
    """team-a has 8 GPUs of its own: however much it borrowed before, a gang within its quota
    ranks 0 and goes first (otherwise team-b would borrow team-a's quota and be reclaimed)."""
    pol = policies(queue("org", quota={"a100": 1000}), queue("team-a", "org", quota={"a100": 8}),
                   queue("team-b", "org"), usage_half_life_seconds=DAY)
    gangs = [gang("a", "team-a", created=WEEK + 1), gang("b", "team-b", created=WEEK)]
    plan = decide(Snapshot(nodes("a100", 1)), gangs, pol, WEEK + 10, solver=SOLVE,
                  memory=BUSY_WEEK)
    assert [b.queue for b in plan.binds] == ["team-a"]


# A pure loop over the ledger and the fair-share key -------------------------------------------
H = 3600.0
CAPACITY = 32
UNIT = 2  # GPUs per gang: its head fraction (half) is a whole GPU


def replay(weights: dict[str, float], history: dict[str, float], seed: int,
           horizon: float, half_life: float = H) -> list[tuple[float, dict[str, float]]]:
    """Every queue always has gangs waiting; whenever GPUs are free the queue with the lowest
    fair-share key (memory included) starts a gang of ``UNIT`` GPUs running 0.05..0.5 h.
    *history*: GPU-seconds remembered at time 0. Returns, after each event, (time, GPUs
    borrowed per queue)."""
    rng = random.Random(seed)
    pol = policies(queue("org", quota={"a100": CAPACITY}),
                   *(queue(n, "org", weight=w) for n, w in weights.items()),
                   usage_half_life_seconds=half_life)
    tree = QuotaTree.build(pol.queues)
    ledger = QuotaLedger.empty(tree)
    memory = UsageMemory(0.0, dict(history), {})
    ends: list[tuple[float, int, str]] = []
    head = {"a100": {GPU: UNIT}}
    now, serial, free = 0.0, 0, CAPACITY
    trace = []
    while now < horizon:
        remembered = usage_memory.shares(memory, tree, now, half_life)
        while free >= UNIT:
            q = min(weights, key=lambda n: fairshare.queue_key(ledger, n, head, remembered))
            ledger = ledger.charge(q, "a100", {GPU: UNIT})
            serial += 1
            heapq.heappush(ends, (now + rng.uniform(0.05, 0.5) * H, serial, q))
            free -= UNIT
        usage = {(q, "a100"): ledger.usage(q, "a100") for q in weights}
        borrowed = usage_memory.borrowed_gpus(tree, usage)
        memory = memory.observed(now, half_life, borrowed)
        trace.append((now, borrowed))
        now = ends[0][0]
        while ends and ends[0][0] <= now:
            _, _, q = heapq.heappop(ends)
            ledger = ledger.charge(q, "a100", Resources({GPU: UNIT}), -1)
            free += UNIT
    return trace


def used_between(trace: list[tuple[float, dict[str, float]]], start: float,
                 end: float) -> dict[str, float]:
    """GPU-seconds borrowed per queue in [start, end] (no decay)."""
    out: dict[str, float] = {}
    for (t, borrowed), (t_next, _) in itertools.pairwise(trace):
        lo, hi = max(t, start), min(t_next, end)
        if hi > lo:
            for q, gpus in borrowed.items():
                out[q] = out.get(q, 0.0) + gpus * (hi - lo)
    return out


@settings(max_examples=25, deadline=None)
@given(weights=st.lists(st.sampled_from([1.0, 2.0, 3.0]), min_size=2, max_size=3),
       history=st.lists(st.floats(0, 200 * H), min_size=3, max_size=3),
       seed=st.integers(0, 1000))
def test_with_equal_demand_shares_converge_toward_the_weights(
        weights: list[float], history: list[float], seed: int) -> None:
    """Whatever each queue is remembered for at the start (up to 200 GPU-hours on a 32-GPU
    org), after eight half-lives the GPUs each queue got in the last two are split by weight
    (within 0.06 of each weight's fraction)."""
    names = {f"q{i}": w for i, w in enumerate(weights)}
    trace = replay(names, {n: h for n, h in zip(names, history, strict=False)}, seed, 10 * H)
    used = used_between(trace, 8 * H, 10 * H)
    total = sum(used.values())
    assert total > 0
    for n, w in names.items():
        assert used.get(n, 0.0) / total == pytest.approx(w / sum(names.values()), abs=0.06)


def test_a_remembered_past_is_paid_back_first_then_forgotten() -> None:
    """Equal weights; q0 is remembered for 100 GPU-hours of borrowing. In the first half-life
    q1 gets clearly more than half the GPUs; four half-lives later, half each. Without
    memory, half each from the start."""
    history = {"q0": 100 * H}
    weights = {"q0": 1.0, "q1": 1.0}
    with_memory = replay(weights, history, seed=3, horizon=8 * H)
    early = used_between(with_memory, 0, H)
    late = used_between(with_memory, 6 * H, 8 * H)
    assert early["q1"] / (early["q0"] + early["q1"]) > 0.65
    assert late["q1"] / (late["q0"] + late["q1"]) == pytest.approx(0.5, abs=0.06)
    without = used_between(replay(weights, history, seed=3, horizon=8 * H, half_life=0.0), 0, H)
    assert without["q1"] / (without["q0"] + without["q1"]) == pytest.approx(0.5, abs=0.06)
