"""Fair share with memory (policies/usage_memory.py): the decay math, what counts as borrowed,
the remembered share's scale, and its place in the fair-share key.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import fairshare, usage_memory
from policies.quota import QuotaLedger, QuotaTree
from policies.usage_memory import UsageMemory, borrowed_gpus, decay, decayed, mean_life
from scheduler.model.resources import GPU, Resources
from tests.unit.policies.builders import policies, queue

H = 3600.0  # a half-life of one hour
TAU = H / math.log(2)


@pytest.mark.parametrize(("elapsed", "expected"), [
    (0.0, 1.0),
    (-5.0, 1.0),  # a clock that steps back forgets nothing
    (H, 0.5),  # one half-life: half
    (2 * H, 0.25),
    (3 * H, 0.125),
    (H / 2, 2 ** -0.5),
])
def test_decay_halves_every_half_life(elapsed: float, expected: float) -> None:
    assert decay(elapsed, H) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("remembered", "rate", "elapsed", "expected"), [
    (1000.0, 0.0, H, 500.0),  # nothing borrowed meanwhile: exactly half after a half-life
    (1000.0, 0.0, 2 * H, 250.0),
    (1000.0, 3.0, 0.0, 1000.0),  # no time, no change
    (0.0, 1.0, H, TAU / 2),  # one GPU for a half-life: half of what for ever gives
    (0.0, 1.0, 1e9, TAU),  # one GPU for ever: tau GPU-seconds
    (TAU * 8, 8.0, 5 * H, TAU * 8),  # steady state stays put
])
def test_decayed_is_the_exact_integral(remembered: float, rate: float, elapsed: float,
                                       expected: float) -> None:
    assert decayed(remembered, rate, elapsed, H) == pytest.approx(expected, rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(u=st.floats(0, 1e9), rate=st.floats(0, 1e4), a=st.floats(0, 1e6), b=st.floats(0, 1e6),
       half_life=st.floats(1, 1e7))
def test_two_steps_give_what_one_step_gives(u: float, rate: float, a: float, b: float,
                                            half_life: float) -> None:
    """How often cycles run does not change what is remembered (a constant rate between)."""
    two = decayed(decayed(u, rate, a, half_life), rate, b, half_life)
    one = decayed(u, rate, a + b, half_life)
    assert two == pytest.approx(one, rel=1e-9, abs=1e-6)


def test_memory_observes_decays_and_counts_rates() -> None:
    m = UsageMemory().observed(0.0, H, {"a": 2.0, "b": 0.0})
    assert dict(m.rates) == {"a": 2.0}  # zeros are not kept
    assert m.at(0.0, H) == {}
    assert m.at(H, H)["a"] == pytest.approx(2.0 * TAU / 2)
    # Stop borrowing at one half-life: what is remembered halves every half-life after.
    m = m.observed(H, H, {})
    assert m.at(2 * H, H)["a"] == pytest.approx(2.0 * TAU / 4)
    assert m.at(3 * H, H)["a"] == pytest.approx(2.0 * TAU / 8)
    # Off: nothing is remembered, whatever was.
    assert m.at(3 * H, 0.0) == {}
    assert m.observed(4 * H, 0.0, {"a": 9.0}) == UsageMemory()


TREE = QuotaTree.build(policies(
    queue("org", quota={"a100": 16}),
    queue("team-a", "org", quota={"a100": 4}),
    queue("team-b", "org", weight=2.0),  # no quota of its own: all it uses is borrowed
    queue("sub", "team-b"),
).queues)


@pytest.mark.parametrize(("usage", "expected"), [
    ({}, {}),
    ({("team-a", "a100"): 4}, {}),  # within its quota: borrows nothing
    ({("team-a", "a100"): 10}, {"team-a": 6.0}),
    ({("team-b", "a100"): 3}, {"team-b": 3.0}),
    # A child's usage is its parent's too; a root borrows from nobody, even past its quota
    # (pods bound by someone else).
    ({("sub", "a100"): 5, ("team-a", "a100"): 12},
     {"sub": 5.0, "team-b": 5.0, "team-a": 8.0}),
    ({("sub", "a100"): 13, ("team-a", "a100"): 10},
     {"sub": 13.0, "team-b": 13.0, "team-a": 6.0}),
    ({("team-b", "h100"): 8}, {}),  # no quota in that pool: not governed, not borrowed
    ({("ghost", "a100"): 8}, {}),  # unknown queue: charged to nobody
])
def test_borrowed_gpus(usage: dict[tuple[str, str], int], expected: dict[str, float]) -> None:
    got = borrowed_gpus(TREE, {k: Resources({GPU: v}) for k, v in usage.items()})
    assert got == expected


def test_steady_borrowing_remembers_its_current_share() -> None:
    """A queue that borrowed b GPUs for ever remembers b / C / weight: its share's scale (C:
    what its parent's subtree has, 20 GPUs: org's 16 and the 4 team-a lends)."""
    m = UsageMemory().observed(0.0, H, {"team-b": 4.0, "team-a": 2.0, "org": 1.0})
    got = usage_memory.shares(m, TREE, 100 * H, H)
    assert got["team-b"] == pytest.approx(4.0 / 20 / 2.0)
    assert got["team-a"] == pytest.approx(2.0 / 20 / 1.0)
    assert "org" not in got  # a root shares with nobody
    assert usage_memory.shares(m, TREE, 100 * H, 0.0) == {}
    assert usage_memory.shares(None, TREE, 100 * H, H) == {}


def test_remembered_share_counts_only_where_the_queue_borrows() -> None:
    ledger = QuotaLedger.empty(TREE)
    head = {"a100": {GPU: 2}}
    # Off: the keys are today's.
    assert fairshare.queue_key(ledger, "team-a", head, {}) == fairshare.queue_key(
        ledger, "team-a", head)
    # team-a's head stays within its quota: rank 0, however much it is remembered for.
    assert fairshare.queue_key(ledger, "team-a", head, {"team-a": 5.0}) == ((0.0, "team-a"),)
    # team-b's head borrows: its remembered share is added.
    plain = fairshare.queue_key(ledger, "team-b", head)[0][0]
    assert plain > 0
    assert fairshare.queue_key(ledger, "team-b", head, {"team-b": 0.5})[0][0] == \
        pytest.approx(plain + 0.5)


def test_mean_life() -> None:
    assert mean_life(H) == pytest.approx(TAU)
