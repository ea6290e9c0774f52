"""Fairness among a queue's own owners (``spec.queueing.ownerFairness``): one user's burst of
trials no longer holds the queue's whole share; priority and the interactive tier still come
first; off, the order is what it always was."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.parsing import parse_queue
from policies.queues import Queue
from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan
from scheduler.model import Gang, RunningGang, Tier
from scheduler.model.labels import Labels
from scheduler.model.workloads import USER_LABEL
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

NOW = 10_000.0


def trial(name: str, user: str, *, created: float, gpus: int = 2, priority: int = 0,
          tier: Tier = Tier.BATCH) -> Gang:
    g = gang(name, gpus=gpus, created=created, priority=priority)
    return replace(g, tier=tier,
                   roles=tuple(replace(r, labels=Labels({USER_LABEL: user})) for r in g.roles))


def fair_queue(on: bool = True, quota: int = 64) -> Queue:
    q = queue("q", quota={"a": quota})
    return replace(q, queueing=replace(q.queueing, owner_fairness=on))


def plan_of(q: Queue, pending: Sequence[Gang], run: Sequence[RunningGang] = (),
            node_count: int = 1, preset: str = "gang-scheduler") -> CyclePlan:
    return decide(Snapshot(nodes("a", node_count), run), pending, policies(q, preset=preset),
                  NOW, solver=SOLVE)


def started_by(plan: CyclePlan, pending: Sequence[Gang]) -> Counter[str]:
    user = {g.id: g.roles[0].labels[USER_LABEL] for g in pending}
    return Counter(user[b.gang_id] for b in plan.binds)


#: alice submits 8 trials of 2 GPUs at 9:00, bob 2 at 9:05; one 8-GPU node.
BURST = [trial(f"a{i}", "alice", created=i) for i in range(8)] + \
        [trial(f"b{i}", "bob", created=300 + i) for i in range(2)]


@pytest.mark.parametrize(("case", "q", "pending", "expected"), [
    ("off: oldest first, alice takes the node", fair_queue(False), BURST, {"alice": 4}),
    ("on: the node is split between them", fair_queue(), BURST, {"alice": 2, "bob": 2}),
    # Priority first: alice's trials at priority 5 all go before any of bob's.
    ("on: priority still first", fair_queue(),
     [trial(f"a{i}", "alice", created=i, priority=5) for i in range(4)]
     + [trial(f"b{i}", "bob", created=300 + i) for i in range(2)], {"alice": 4}),
    # The interactive tier too: bob's notebook goes first, then alice (holding less).
    ("on: the tier still first", fair_queue(),
     [*BURST[:8], trial("nb", "bob", created=400, tier=Tier.INTERACTIVE)],
     {"bob": 1, "alice": 3}),
])
def test_who_starts(case: str, q: Queue, pending: list[Gang], expected: dict[str, int]) -> None:
    plan = plan_of(q, pending)
    assert started_by(plan, pending) == Counter(expected), (case, plan.binds)


def test_what_an_owner_runs_counts() -> None:
    """alice already runs 4 GPUs of the queue: bob's two trials go first, then alice's."""
    old = running(trial("old", "alice", created=-1, gpus=4), {"a-0001": 1})
    plan = plan_of(fair_queue(), BURST, [old], node_count=2)  # 12 GPUs free
    assert [gid.removeprefix("ns/") for gid in plan.order[:3]] == ["b0", "b1", "a0"]
    assert started_by(plan, BURST) == Counter({"bob": 2, "alice": 4})


def test_the_order_alternates_by_what_each_holds() -> None:
    """Equal trials: alice, bob, alice, bob... (the older first when both hold alike)."""
    plan = plan_of(fair_queue(), BURST, node_count=4)
    first = [gid.removeprefix("ns/")[0] for gid in plan.order[:4]]
    assert first == ["a", "b", "a", "b"], plan.order


def test_fifo_ordering_ignores_it() -> None:
    """FIFO is arrival order by definition; the field changes nothing there."""
    on, off = (plan_of(fair_queue(x), BURST, preset="fifo-gang") for x in (True, False))
    assert [b.gang_id for b in on.binds] == [b.gang_id for b in off.binds]


def test_the_field_is_parsed_and_checked() -> None:
    spec = {"quotas": [{"pool": "a", "nominal": {"nvidia.com/gpu": 8}}],
            "queueing": {"ownerFairness": True}}
    header = {"apiVersion": "gangscheduler.io/v1alpha1", "kind": "Queue",
              "metadata": {"name": "q"}}
    found, errors = parse_queue({**header, "spec": spec})
    assert not errors and found is not None and found.queueing.owner_fairness is True
    _, errors = parse_queue({**header, "spec": {**spec, "queueing": {"ownerFairness": "yes"}}})
    assert [e.path for e in errors] == ["spec.queueing.ownerFairness"], errors


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["u1", "u2", "u3"]), st.integers(0, 50)),
                min_size=1, max_size=14))
def test_no_owner_gets_two_more_while_another_waits(arrivals: list[tuple[str, int]]) -> None:
    """Equal 2-GPU trials on room for 8: whenever an owner is left waiting, every owner
    that started got at most one trial more than it (never a flood)."""
    pending = [trial(f"t{i}", user, created=t) for i, (user, t) in enumerate(arrivals)]
    plan = plan_of(fair_queue(), pending)
    started = started_by(plan, pending)
    submitted = Counter(user for user, _ in arrivals)
    waiting = [u for u in submitted if started[u] < submitted[u]]
    for w in waiting:
        assert all(n <= started[w] + 1 for n in started.values()), (started, submitted)
