"""A Queue being deleted (kept by the scheduler's finalizer while in use) stays in force for
what it admitted and admits nothing new: its pending gangs are told why and where to go,
its running gangs keep their quota and are counted in its tally; the views mark it."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console

from scheduler.decide.cycle import decide
from scheduler.decide.plan import ReasonCategory
from scheduler.decide.tallies import queue_tallies
from scheduler.model.demand import gpus_of
from scheduler.views import text
from scheduler.views.apiserver import queue_rows
from scheduler.views.state import ClusterView
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running

NODES = nodes("a100", 2)
BOTH = policies(queue("a", quota={"a100": 16}), queue("b", quota={"a100": 8}))
DELETING_A = replace(BOTH, queues=replace(BOTH.queues, terminating=frozenset({"a"})))


def test_a_terminating_queue_admits_nothing_new_and_keeps_charging_what_runs() -> None:
    old = running(gang("old", "a"), {"a100-0000": 1})
    snapshot = Snapshot(NODES, [old])
    new = gang("new", "a", created=1)
    plan = decide(snapshot, [new], DELETING_A, 10.0, solver=SOLVE)
    assert plan.binds == ()
    reason = plan.pending["ns/new"]
    assert reason.category is ReasonCategory.NOT_ALLOWED
    assert reason.message.startswith("queue a is being deleted: it admits no new gangs")
    assert "submit to one of: b" in reason.message  # not to a, which is being deleted
    (tally_a,) = [s for s in queue_tallies(snapshot, [new], DELETING_A, plan) if s.name == "a"]
    assert tally_a.running == 1 and gpus_of(dict(tally_a.usage)["a100"]) == 8
    # Without the deletion, the same gang starts.
    assert [b.gang_id for b in decide(snapshot, [new], BOTH, 10.0, solver=SOLVE).binds] == [
        "ns/new"]


def queue_object(name: str, parent: str | None = None, **extra: object) -> dict[str, object]:
    spec: dict[str, object] = {"namespaces": ["*"], "weight": 1,
                               "quotas": [{"pool": "a100", "nominal": {"nvidia.com/gpu": 8}}]}
    if parent:
        spec["parent"] = parent
    return {"metadata": {"name": name}, "spec": spec, **extra}


def test_the_queues_view_marks_terminating_and_invalid_queues_and_drops_none() -> None:
    refused = {"conditions": [{"type": "Valid", "status": "False",
                               "message": "refused, the last valid version stays in force: x"}]}
    rows = {r.name: r for r in queue_rows([
        queue_object("root"),
        {**queue_object("gone", "root"),
         "metadata": {"name": "gone", "deletionTimestamp": "2026-12-04T16:00:00Z"}},
        # Edited into a cycle with "loop", refused: shown with the parent in force.
        {**queue_object("team", "loop"),
         "status": {**refused, "inForce": queue_object("team", "root")["spec"]}},
        {**queue_object("loop", "team"), "status": refused},  # never valid: as written
        {**queue_object("junk"), "spec": {"weight": "heavy", "quotas": [{"nominal": "lots"}]},
         "status": refused},
    ])}
    assert set(rows) == {"root", "gone", "team", "loop", "junk"}  # a cycle drops nobody
    assert (rows["gone"].state, rows["gone"].parent) == ("Terminating", "root")
    assert (rows["team"].state, rows["team"].parent) == ("Invalid", "root")
    assert rows["team"].why.startswith("refused, the last valid version stays in force")
    assert rows["loop"].state == "Invalid" and rows["junk"].weight == 1.0


def test_the_queues_table_marks_them_and_says_why() -> None:
    rows = queue_rows([
        queue_object("root"),
        {**queue_object("team", "root"), "status": {"conditions": [
            {"type": "Valid", "status": "False", "message": "refused, the last valid version "
             "stays in force: team: spec.weight: must be > 0, got -1"}]}}])
    console = Console(record=True, width=200, color_system=None)
    console.print(text.queues_table(ClusterView(now=0.0, source="apiserver", queues=rows,
                                                pending=(), running=(), nodes=None)))
    out = console.export_text()
    assert "team [Invalid]" in out and "spec.weight: must be > 0" in out
