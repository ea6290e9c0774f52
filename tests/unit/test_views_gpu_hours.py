"""The dashboard's GPU-hours: today's and this month's chargeback rows per (queue, namespace)
in the view model, read back from its JSON, filtered by namespace, shown per queue.

Charged by the real loop (test_views' scene: team-a runs 4 GPUs in namespace ns, team-b 12
in namespace other) on the test clock, whose day is 1970-01-01.
"""

from __future__ import annotations

import datetime as dt
import re

import pytest

from scheduler.report.chargeback import Interval, Ledger
from scheduler.views import html, live
from scheduler.views.state import ClusterView
from tests.unit.test_views import scene_cycle


@pytest.fixture(scope="module")
def view() -> ClusterView:
    sched, _ = scene_cycle()
    sched.clock.now += 1800  # type: ignore[attr-defined]  # the test clock
    plan = sched.run_once()
    last, accrual = sched.last_cycle, sched.observer.accrual
    assert last is not None and accrual is not None
    inp, pol = last
    return live.build(live.Cycle(inp, plan, pol, sched.last_queues), sched.cache.gang_pods,
                      charged=accrual.rows(since=dt.date(1970, 1, 1)))


def test_today_and_this_month_per_queue_and_namespace(view: ClusterView) -> None:
    got = {(r.period, r.queue, r.namespace, r.pool): r.allocated_gpu_hours
           for r in view.gpu_hours}
    assert got == {("1970-01-01", "team-a", "ns", ""): 2.0, ("1970-01", "team-a", "ns", ""): 2.0,
                   ("1970-01-01", "team-b", "other", ""): 6.0,
                   ("1970-01", "team-b", "other", ""): 6.0}
    assert all(r.used_gpu_hours is None for r in view.gpu_hours)  # no utilisation source


def test_earlier_days_count_for_the_month_only() -> None:
    ledger = Ledger()
    day = 86400.0
    ledger.add([Interval(0.0, 3600.0, ("q", "ns", "a"), 1, 0, 1.0),  # 1970-01-01
                Interval(5 * day, 5 * day + 3600, ("q", "ns", "a"), 2, 1, 1.0),  # today
                Interval(5 * day, 5 * day + 3600, ("q", "ns", "b"), 1, None, 1.0)])
    rows = {(r.period, r.pool): r for r in live.gpu_hours(ledger.rows(), 5 * day + 7200)}
    assert sorted(rows) == [("1970-01", ""), ("1970-01-06", "")]
    assert rows[("1970-01", "")].allocated_gpu_hours == pytest.approx(4.0)
    assert rows[("1970-01-06", "")].idle_gpu_hours is None  # pool b's idleness is unknown


def test_json_round_trip_and_namespace_filter(view: ClusterView) -> None:
    assert ClusterView.from_dict(view.to_dict()) == view
    assert {r.namespace for r in view.for_namespaces(["ns"]).gpu_hours} == {"ns"}
    assert ClusterView.from_dict({**view.to_dict(), "gpu_hours": None}).gpu_hours == ()


def test_the_dashboard_shows_a_row_per_queue(view: ClusterView) -> None:
    page = html.render(view)
    table = page[page.index("<table id='gpu-hours'>"):]
    table = table[:table.index("</table>")]
    assert "today (1970-01-01 UTC)" in table and "this month (1970-01)" in table
    team_b = re.search(r"<tr data-queue='team-b'>(.*?)</tr>", table)
    assert team_b is not None
    assert re.findall(r"<td class='n'>([^<]*)</td>", team_b.group(1)) == [
        "6.0", "-", "-", "0.00 USD", "6.0", "-", "-", "0.00 USD"]
    assert "<h2>GPU-hours</h2>" not in html.render(
        ClusterView(now=0.0, source="apiserver", queues=(), pending=(), running=()))
