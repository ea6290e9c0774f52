"""Usage kept incrementally (snapshot per queue and pool, the cycle's ledger) equals a recount.

The snapshot updates ``queue_usage`` and ``running_per_queue`` as gangs are added and
removed, and ``Recall.ledger`` brings the previous cycle's ledger up to date by charging
only what changed. Both must answer exactly what a count from scratch answers.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.preemption import ledger_without
from policies.quota import QuotaLedger, QuotaTree
from policies.reservation import _Ledgers
from scheduler.decide.recall import Recall
from scheduler.model import RunningGang
from scheduler.model.release import Release
from scheduler.model.resources import Resources, total
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import gang, nodes, policies, queue, running

NODES = nodes("a100", 4) + nodes("h100", 3)
QUEUES = ("a", "b", "c")
POLICIES = policies(
    queue("p", quota={"a100": 8}),
    queue("a", "p", quota={"a100": 8, "h100": 8}, lend={"a100": 0}),
    queue("b", "p", weight=2.0, quota={"a100": 8}, borrow={"a100": 8}),
    queue("c", "p", quota={"h100": 16}),
)


def _recount(snapshot: Snapshot) -> tuple[dict[tuple[str, str], Resources], dict[str, int]]:
    parts: dict[tuple[str, str], list[Resources]] = {}
    count: dict[str, int] = {}
    for rg in snapshot.running.values():
        count[rg.gang.queue] = count.get(rg.gang.queue, 0) + 1
        for node, res in rg.allocations:
            if node in snapshot.nodes:
                parts.setdefault((rg.gang.queue, snapshot.nodes[node].pool), []).append(res)
    return {k: total(v) for k, v in parts.items()}, count


def _fresh_ledger(tree: QuotaTree, snapshot: Snapshot) -> QuotaLedger:
    ledger = QuotaLedger.empty(tree)
    for (queue_name, pool), res in sorted(_recount(snapshot)[0].items()):
        ledger = ledger.charge(queue_name, pool, res)
    return ledger


def _answers(ledger: QuotaLedger) -> dict[tuple[str, str], object]:
    out: dict[tuple[str, str], object] = {}
    for name in ("p", *QUEUES):
        for pool in ("a100", "h100"):
            out[(name, pool)] = (ledger.available(name, pool), ledger.usage(name, pool),
                                 ledger.borrowing(name, pool))
    return out


step = st.tuples(st.booleans(), st.integers(0, 11), st.sampled_from(QUEUES),
                 st.lists(st.tuples(st.integers(0, len(NODES) - 1), st.integers(1, 4)),
                          min_size=1, max_size=3))


@settings(max_examples=60, deadline=None)
@given(st.lists(step, max_size=25))
def test_usage_and_ledger_follow_every_derivation(steps: list[tuple[bool, int, str,
                                                                   list[tuple[int, int]]]]) -> None:
    snapshot = Snapshot(NODES)
    recall = Recall(snapshot.index)
    tree = recall.tree(POLICIES.queues)
    for add, i, queue_name, where in steps:
        gid = f"ns/g{i}"
        if add:
            pods: dict[str, int] = {}
            for node, n in where:
                pods[NODES[node].name] = pods.get(NODES[node].name, 0) + n
            rg: RunningGang = running(gang(f"g{i}", queue_name, gpus=1), pods)
            snapshot = snapshot.with_running(rg)  # replaces a running gang of the same id
        elif gid in snapshot.running:
            snapshot = snapshot.without_gangs([gid])
        usage, count = _recount(snapshot)
        assert dict(snapshot.queue_usage) == usage
        assert dict(snapshot.running_per_queue) == count
        assert _answers(recall.ledger(tree, snapshot)) == _answers(_fresh_ledger(tree, snapshot))
    rebuilt = Snapshot(NODES, snapshot.running.values())
    assert dict(rebuilt.queue_usage) == dict(snapshot.queue_usage)


def test_quota_tree_is_built_once_per_queue_set() -> None:
    recall = Recall(Snapshot(NODES).index)
    assert recall.tree(POLICIES.queues) is recall.tree(POLICIES.queues)
    other = policies(queue("p", quota={"a100": 8}))
    assert recall.tree(other.queues) is not recall.tree(POLICIES.queues)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(QUEUES), st.integers(0, len(NODES) - 1),
                          st.integers(1, 4), st.integers(0, 5)), min_size=1, max_size=12),
       st.lists(st.integers(-1, 5), min_size=1, max_size=8))
def test_reservation_ledgers_equal_releasing_gang_by_gang(
        gangs: list[tuple[str, int, int, int]], probes: list[int]) -> None:
    tree = QuotaTree.build(POLICIES.queues)
    snapshot = Snapshot(NODES)
    for i, (queue_name, node, gpus, _) in enumerate(gangs):
        rg = running(gang(f"g{i}", queue_name, gpus=1), {NODES[node].name: gpus})
        snapshot = snapshot.with_running(rg)
    by_end: dict[int, list[str]] = {}
    for i, (_, _, _, end) in enumerate(gangs):
        by_end.setdefault(end, []).append(f"ns/g{i}")
    events = [(float(t), tuple(Release.whole(snapshot.running[gid]) for gid in sorted(ids)))
              for t, ids in sorted(by_end.items())]
    start = Recall(snapshot.index).ledger(tree, snapshot)
    lazy = _Ledgers(start, events, snapshot)
    for probe in probes:  # any order, as the galloping and binary searches ask
        i = min(probe, len(events) - 1)
        released = [r for _, releases in events[: i + 1] for r in releases]
        expected = ledger_without(start, released, snapshot)
        assert _answers(lazy.at(i)) == _answers(expected)
