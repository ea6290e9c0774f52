"""The two invariants of the interactive tier as properties over random clusters:

- an interactive gang is never the victim of a batch preemptor, whatever the priorities,
  queues and reclaim policies;
- a user never holds more than their queue's ``maxGPUsPerUser`` interactive GPUs (running
  and not leaving, plus bound and nominated this cycle), unless already so at the start.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.interactive import InteractivePolicy, user_of
from scheduler.model import Gang, RunningGang
from tests.unit.interactive.helpers import NOW, notebook, plan_of
from tests.unit.policies.builders import gang, queue, running

NODES = 4  # x 8 GPUs
USERS = ["alice", "bob", "carol"]

#: (interactive, queue, gpus, priority, user)
_gang = st.tuples(st.booleans(), st.sampled_from(["a", "b"]), st.sampled_from([1, 2, 4, 8]),
                  st.integers(0, 3), st.sampled_from(USERS))


def _make(i: int, spec: tuple[bool, str, int, int, str], prefix: str) -> Gang:
    interactive, q, gpus, priority, user = spec
    name = f"{prefix}{i}"
    if interactive:
        return notebook(name, q, gpus=gpus, priority=priority, user=user, created=float(i))
    return gang(name, q, gpus=gpus, priority=priority, created=float(i))


def _placed(specs: list[tuple[bool, str, int, int, str]]) -> list[RunningGang]:
    """Running gangs packed onto the nodes in order (those that do not fit are dropped)."""
    free = [8] * NODES
    out = []
    for i, spec in enumerate(specs):
        g = _make(i, spec, "r")
        node = next((n for n in range(NODES) if free[n] >= g.gpus), None)
        if node is None:
            continue
        free[node] -= g.gpus
        out.append(running(g, {f"a-{node:04d}": 1}, start=NOW - 1000 + i))
    return out


def _queues(reclaim: str, within: str, cap: int | None = None) -> list:
    caps = InteractivePolicy(cap) if cap is not None else InteractivePolicy()
    return [queue("org"),
            replace(queue("a", "org", quota={"a": 8}, reclaim=reclaim, within=within),
                    interactive=caps),
            replace(queue("b", "org", quota={"a": 8}, reclaim=reclaim, within=within),
                    interactive=caps)]


@settings(max_examples=150, deadline=None)
@given(run=st.lists(_gang, max_size=8), pending=st.lists(_gang, min_size=1, max_size=5),
       reclaim=st.sampled_from(["Any", "LowerPriority", "Never"]),
       within=st.sampled_from(["LowerPriority", "Never"]))
def test_an_interactive_gang_is_never_a_victim_of_a_batch_preemptor(
        run: list, pending: list, reclaim: str, within: str) -> None:
    runs = _placed(run)
    gangs = [_make(i, spec, "p") for i, spec in enumerate(pending)]
    plan = plan_of(_queues(reclaim, within), gangs, runs, node_count=NODES)
    by_id = {g.id: g for g in gangs}
    victims = {r.id: r.gang for r in runs}
    for e in plan.evictions:
        preemptor = by_id[e.preemptor]
        assert preemptor.interactive or not victims[e.victim].interactive, e


@settings(max_examples=150, deadline=None)
@given(run=st.lists(_gang, max_size=8), pending=st.lists(_gang, min_size=1, max_size=6),
       cap=st.integers(1, 8), within=st.sampled_from(["LowerPriority", "Never"]))
def test_a_user_never_exceeds_max_gpus_per_user(run: list, pending: list, cap: int,
                                                within: str) -> None:
    runs = _placed(run)
    gangs = [_make(i, spec, "p") for i, spec in enumerate(pending)]
    plan = plan_of(_queues("Any", within, cap), gangs, runs, node_count=NODES)
    leaving = {e.victim for e in plan.evictions}
    by_id = {g.id: g for g in gangs}

    def held(gs: list[Gang]) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for g in gs:
            if g.interactive:
                key = (g.queue, user_of(g))
                out[key] = out.get(key, 0) + g.gpus
        return out

    before = held([r.gang for r in runs])
    after = held([r.gang for r in runs if r.id not in leaving]
                 + [by_id[b.gang_id] for b in plan.binds]
                 + [by_id[n.gang_id] for n in plan.nominations])
    for key, gpus in after.items():
        assert gpus <= max(cap, before.get(key, 0)), (key, gpus, cap)
