"""Fair share with memory, beside the loop (scheduler/run/remembered.py) and where users look.

The keeper counts what each queue borrows once a plan's binds are in, from the plan's time on;
the loop hands its memory to the next ``decide``; the queue figures, the Queue status, the
views (both sources, text and HTML) and the metrics show the remembered GPU-hours, and show
nothing of it when no half-life is set.
"""

from __future__ import annotations

import math

import pytest
from rich.console import Console

from policies.queues import PolicySet
from policies.quota import QuotaTree
from scheduler.decide.cycle import decide
from scheduler.kube.write.queue_status import status_of
from scheduler.run.loop import Scheduler
from scheduler.run.metrics import SchedulerMetrics
from scheduler.run.remembered import RememberedUsage
from scheduler.views import apiserver, html, live, text
from scheduler.views.state import ClusterView
from scheduler.world.snapshot import Snapshot
from tests.unit.policies.builders import SOLVE, gang, nodes, policies, queue, running
from tests.unit.test_loop_metrics import gang_pods, make, node, sample
from tests.unit.test_views import _queue_objects

H = 3600.0
TAU = H / math.log(2)


def _org(half_life: float) -> PolicySet:
    return policies(queue("org", quota={"a100": 32}), queue("team-a", "org"),
                    queue("team-b", "org", quota={"a100": 8}), usage_half_life_seconds=half_life)


def test_the_keeper_counts_what_borrows_once_the_binds_are_in() -> None:
    pol = _org(H)
    tree = QuotaTree.build(pol.queues)
    snap = Snapshot(nodes("a100", 4), [running(gang("r", "team-a"), {"a100-0000": 1})])
    pending = [gang("p", "team-b", pods=2)]  # 16 GPUs: 8 of its own quota, 8 borrowed
    plan = decide(snap, pending, pol, 100.0, solver=SOLVE)
    assert [b.gang_id for b in plan.binds] == ["ns/p"]
    keeper = RememberedUsage()
    keeper.cycle(snap, pending, pol, tree, plan)
    assert keeper.on
    assert dict(keeper.memory.rates) == {"team-a": 8.0, "team-b": 8.0}
    assert keeper.gpu_seconds(100.0) == {}  # nothing yet: from now on
    later = keeper.gpu_seconds(100.0 + H)
    assert later["team-a"] == pytest.approx(8 * TAU / 2)
    # 8 GPUs for a half-life, over org's 40 (its 32 and team-b's 8), weight 1.
    assert keeper.shares(tree, 100.0 + H)["team-b"] == pytest.approx(8 * TAU / 2 / TAU / 40)
    # Off: the memory empties, and decide ranks as before.
    keeper.cycle(snap, pending, _org(0.0), tree, plan)
    assert not keeper.on and keeper.memory.as_of is None and keeper.gpu_seconds(1e9) == {}


def _borrowing_scene(half_life: float) -> tuple[Scheduler, SchedulerMetrics, ClusterView]:
    """team-b runs 12 GPUs on 8 of quota (4 borrowed) for an hour: two cycles an hour apart."""
    pol = policies(queue("org", namespaces=()),
                   queue("team-a", "org", quota={"p": 8}, namespaces=("ns",)),
                   queue("team-b", "org", quota={"p": 8}, namespaces=("ns",)),
                   usage_half_life_seconds=half_life)
    pods = [*gang_pods("borrow", 1, 8, "team-b", node="n2"),
            *gang_pods("extra", 1, 4, "team-b", node="n3"),
            *gang_pods("wide", 1, 8, "team-a", created=1, node="n1")]
    sched, metrics, clock = make(pods, [node("n1"), node("n2"), node("n3")], pol)
    sched.run_once()
    clock.now += H
    plan = sched.run_once()
    last = sched.last_cycle
    assert last is not None
    inp, in_force = last
    view = live.build(live.Cycle(inp, plan, in_force, sched.last_queues), sched.cache.gang_pods)
    return sched, metrics, view


def _table(view: ClusterView) -> str:
    console = Console(record=True, width=200, color_system=None)
    console.print(text.queues_table(view))
    return console.export_text()


def test_users_see_the_remembered_gpu_hours() -> None:
    sched, metrics, view = _borrowing_scene(H)
    reports = {r.name: r for r in sched.last_queues}
    # 4 borrowed GPUs for one half-life: 4 * tau / 2 GPU-seconds.
    assert reports["team-b"].remembered_gpu_hours == pytest.approx(4 * TAU / 2 / 3600)
    assert reports["team-a"].remembered_gpu_hours == 0.0
    assert reports["team-b"].remembered_share > 0 == reports["team-a"].remembered_share
    # The Queue status, the views from both sources, the tables, the metrics.
    assert status_of(reports["team-b"])["rememberedGPUHours"] == 2.89  # three digits
    rows = {q.name: q for q in view.queues}
    assert rows["team-b"].remembered_gpu_hours == pytest.approx(2 / math.log(2))
    assert sched.last_cycle is not None
    inp = sched.last_cycle[0]
    read = apiserver.build(inp.gangs, sched.cache.gang_pods, {}, _queue_objects(sched),
                           inp.snapshot, 0.0)
    assert {q.name: q.remembered_gpu_hours for q in read.queues} == {
        "org": 0.0, "team-a": 0.0, "team-b": 2.89}
    assert "remembered GPU-h" in _table(view) and "2.9" in _table(view)
    assert "<th>remembered GPU-h</th>" in html.render(view)
    assert sample(metrics, "gang_scheduler_remembered_gpu_hours", queue="team-b") == \
        pytest.approx(2 / math.log(2))
    assert sample(metrics, "gang_scheduler_remembered_share", queue="team-b") > 0


def test_off_shows_nothing_of_it() -> None:
    sched, metrics, view = _borrowing_scene(0.0)
    assert all(r.remembered_gpu_hours is None for r in sched.last_queues)
    assert all("rememberedGPUHours" not in status_of(r) for r in sched.last_queues)
    assert "remembered" not in _table(view) and "remembered" not in html.render(view)
    assert metrics.registry.get_sample_value("gang_scheduler_remembered_gpu_hours",
                                             {"queue": "team-b"}) is None
