"""Per-queue figures (scheduler/report/queue_report.py): ``usage_share`` on the shipped queue tree.

Issue 32: team-b (deploy/queues) allocated its 24 h100 GPUs and 8 borrowed from team-a read
``usage_share`` 2.0, while the metric's help and the Queue CRD say 0..1: it was divided by
what research can *lend* (16 of its teams' 32, team-b's lendingLimit). It is a share of what
the siblings have in full now, so it reads like ``fair_share`` and never leaves 0..1.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.validation import load_policies
from scheduler.decide.tallies import QueueTally
from scheduler.model.resources import Resources
from scheduler.report.queue_report import queue_reports

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = load_policies(sorted((ROOT / "deploy" / "queues").glob("[!k]*.yaml")))
LEAVES = ("default", "team-a", "team-b")


def shares(allocated: dict[tuple[str, str], int]) -> dict[str, float]:
    """``usage_share`` per queue when each (leaf queue, pool) is allocated that many GPUs."""
    tallies = [QueueTally(q, tuple((pool, Resources.of(gpu=n)) for (leaf, pool), n
                                     in sorted(allocated.items()) if leaf == q),
                            running=0, admitted=0, pending=0, borrowed_share=0.0)
                for q in (*LEAVES, "research")]
    return {r.name: round(r.usage_share, 4) for r in queue_reports(tallies, SHIPPED)}


@pytest.mark.parametrize(("allocated", "expected"), [
    # team-b takes its 24 h100 GPUs and the 8 team-a lends: all research has (was 2.0).
    ({("team-b", "h100"): 32}, {"team-a": 0.0, "team-b": 1.0, "research": 1.0}),
    # Backlogged at their weights (1:3): usage shares equal the fair shares.
    ({("team-a", "h100"): 8, ("team-b", "h100"): 24},
     {"team-a": 0.25, "team-b": 0.75, "research": 1.0}),
    # The dominant pool counts: team-a's 16 a100 GPUs are 16 of research's 24 there.
    ({("team-a", "a100"): 16, ("team-b", "h100"): 8},
     {"team-a": 0.6667, "team-b": 0.25, "research": 0.6667}),
    # A root is measured against its own quota.
    ({("default", "a100"): 8}, {"default": 1.0, "research": 0.0}),
])
def test_usage_share_on_the_shipped_queues(allocated: dict[tuple[str, str], int],
                                           expected: dict[str, float]) -> None:
    got = shares(allocated)
    assert {q: got[q] for q in expected} == expected


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.tuples(st.sampled_from(LEAVES), st.sampled_from(("a100", "h100"))),
                       st.integers(min_value=0, max_value=10_000)))
def test_usage_share_stays_within_0_and_1(allocated: dict[tuple[str, str], int]) -> None:
    """Whatever is allocated (even beyond every quota: a quota lowered under running gangs)."""
    assert all(0.0 <= s <= 1.0 for s in shares(allocated).values()), shares(allocated)
