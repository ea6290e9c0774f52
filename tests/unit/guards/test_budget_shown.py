"""A queue's GPU-hour budget where people look (issue 38: "budget use is not shown"): the
figure the guard holds gangs by is the one the queue report, the Queue status, the metrics and
the views show, and a tenant reading the status through the apiserver sees it too."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from policies.guards import Budget, BudgetUse, Guards, Period
from scheduler.report.queue_report import QueueReport
from scheduler.run.metrics import SchedulerMetrics
from scheduler.kube.write.queue_status import status_of
from scheduler.views import apiserver, html, live, text
from scheduler.views.state import ClusterView
from tests.unit.policies.builders import policies, queue
from tests.unit.test_loop_metrics import gang_pods, make, node, sample

HOUR = 3600.0


def budgeted_cycle(after: float) -> tuple[ClusterView, QueueReport, SchedulerMetrics]:
    """Queue team (1 GPU-h a day) runs an 8-GPU gang; the scheduler's cycle *after* seconds
    later. Returns its view, the team's report and the metrics."""
    team = dataclasses.replace(queue("team", quota={"p": 16}),
                               guards=Guards(budget=Budget(1.0, Period.DAY)))
    pods = gang_pods("run", 1, 8, "team", node="n1") + gang_pods("next", 1, 8, "team",
                                                                   created=1)
    sched, metrics, clock = make(pods, [node("n1"), node("n2")], policies(team))
    clock.now += after
    plan = sched.run_once()
    last = sched.last_cycle
    assert last is not None
    inp, pol = last
    view = live.build(live.Cycle(inp, plan, pol, sched.last_queues), sched.cache.gang_pods)
    report = next(r for r in sched.last_queues if r.name == "team")
    return view, report, metrics


def test_the_figure_the_guard_holds_by_is_the_one_shown() -> None:
    view, report, metrics = budgeted_cycle(after=HOUR)
    b = report.budget
    assert isinstance(b, BudgetUse) and b.period is Period.DAY and b.gpu_hours == 1.0
    assert b.used_gpu_hours > 1.0  # 8 GPUs for over an hour: used up
    assert b.resets_at == 86400.0  # the clock runs in the first UTC day of 1970
    held = next(g for g in view.pending if g.id == "ns/next")
    assert held.reason == "QueueLimit" and "reached its GPU-hour budget for today" in held.message
    row = next(q for q in view.queues if q.name == "team")
    assert row.budget == b
    assert sample(metrics, "gang_scheduler_budget_used_gpu_hours", queue="team",
                  period="Day") == b.used_gpu_hours
    assert sample(metrics, "gang_scheduler_budget_gpu_hours", queue="team", period="Day") == 1.0
    console = Console(record=True, width=200, color_system=None)
    console.print(text.queues_table(view))
    out = console.export_text()
    assert "budget GPU-h" in out and f"{b.used_gpu_hours:,.1f} / 1 today" in out
    assert f"{b.used_gpu_hours:,.1f} / 1 today" in html.render(view)


def test_the_status_carries_it_and_the_apiserver_view_reads_it_back() -> None:
    _, report, _ = budgeted_cycle(after=HOUR)
    status = status_of(report)
    b = report.budget
    assert b is not None
    assert status["budget"] == {"usedGPUHours": float(f"{b.used_gpu_hours:.3g}"),
                                "gpuHours": 1.0, "period": "Day",
                                "resetsAt": "1970-01-02T00:00:00Z"}
    obj = {"metadata": {"name": "team"}, "spec": {}, "status": status}
    rows = apiserver.queue_rows([obj])
    assert rows[0].budget == BudgetUse(float(f"{b.used_gpu_hours:.3g}"), 1.0, Period.DAY,
                                       86400.0)


def test_a_status_budget_it_cannot_read_is_no_budget() -> None:
    """The view never fails on a status it cannot read (another writer, an old version)."""
    for bad in ({"period": "Fortnight"}, {"resetsAt": "soon", "period": "Day"}, "lots"):
        obj = {"metadata": {"name": "team"}, "spec": {}, "status": {"budget": bad}}
        assert apiserver.queue_rows([obj])[0].budget is None


def test_no_budget_no_column() -> None:
    team = queue("team", quota={"p": 16})
    sched, _, _ = make(gang_pods("run", 1, 8, "team", node="n1"), [node("n1")],
                       policies(team))
    sched.run_once()
    assert all(r.budget is None for r in sched.last_queues)
    assert "budget" not in status_of(sched.last_queues[0])
