"""The interactive tier in the views (issue 38): each gang row says its tier, ``top`` and
``gangs`` add a "tier" column and ``queues`` an "interactive run/pend" column when an
interactive gang is shown, and the dashboard marks interactive gangs and counts them per
queue. A cluster without interactive gangs sees the tables as before."""

from __future__ import annotations

import dataclasses

import pytest
from rich.console import Console

from scheduler.model.workloads import TIER_LABEL, PodInfo
from scheduler.run.loop import Scheduler
from scheduler.views import apiserver, html, live, text
from scheduler.views.state import ClusterView
from tests.unit.policies.builders import policies, queue
from tests.unit.test_loop_metrics import gang_pods, make, node
from tests.unit.test_views import _queue_objects
from tests.unit.test_views import scene as batch_scene


def _interactive(pods: list[PodInfo]) -> list[PodInfo]:
    return [dataclasses.replace(p, labels={**p.labels, TIER_LABEL: "interactive"})
            for p in pods]


def _cycle() -> Scheduler:
    """team-a runs notebook ``nb`` (interactive) and batch ``train``, and waits with
    interactive ``debug``, which does not fit; team-b runs batch ``fill``."""
    pol = policies(queue("team-a", quota={"p": 16}), queue("team-b", quota={"p": 8}))
    pods = [*_interactive(gang_pods("nb", 1, 4, "team-a", node="n1")),
            *gang_pods("train", 1, 4, "team-a", node="n1"),
            *gang_pods("fill", 1, 8, "team-b", node="n2"),
            *_interactive(gang_pods("debug", 1, 16, "team-a"))]
    sched, _, _ = make(pods, [node("n1"), node("n2")], pol)
    sched.run_once()
    return sched


@pytest.fixture(scope="module")
def sched() -> Scheduler:
    return _cycle()


@pytest.fixture(scope="module")
def view(sched: Scheduler) -> ClusterView:
    last = sched.last_cycle
    assert last is not None
    inp, pol = last
    plan = sched.last_plan
    assert plan is not None
    return live.build(live.Cycle(inp, plan, pol, sched.last_queues), sched.cache.gang_pods)


def _tiers(view: ClusterView) -> dict[str, str]:
    return {g.id: g.tier for g in (*view.pending, *view.running)}


def test_each_gang_row_says_its_tier(view: ClusterView) -> None:
    assert _tiers(view) == {"ns/debug": "interactive", "ns/nb": "interactive",
                            "ns/train": "batch", "ns/fill": "batch"}
    assert ClusterView.from_dict(view.to_dict()) == view


def test_the_apiserver_source_reads_the_tier_from_the_pods(sched: Scheduler,
                                                           view: ClusterView) -> None:
    last = sched.last_cycle
    assert last is not None
    inp = last[0]
    read = apiserver.build(inp.gangs, sched.cache.gang_pods, {}, _queue_objects(sched),
                           inp.snapshot, view.now)
    assert _tiers(read) == _tiers(view)


def _text(view: ClusterView) -> str:
    console = Console(record=True, width=220, color_system=None)
    console.print(text.top(view))
    return console.export_text()


def _line(out: str, word: str) -> str:
    return next(line for line in out.splitlines() if word in line)


def test_top_shows_a_tier_column_and_the_interactive_gangs_per_queue(view: ClusterView) -> None:
    out = _text(view)
    assert "interactive run/pend" in _line(out, "queue")
    assert _line(out, "team-a").split()[-1] == "1" and "1 / 1" in _line(out, "team-a")
    assert _line(out, "team-b").rstrip().endswith("-")
    assert _line(out, "ns/debug").split()[-1] == "interactive"  # the pending table
    assert "interactive" in _line(out, "ns/nb") and "batch" in _line(out, "ns/train")


def test_the_dashboard_marks_interactive_gangs_and_counts_them_per_queue(
        view: ClusterView) -> None:
    page = html.render(view)
    mark = "<span class='tag interactive'>interactive</span>"
    assert page.count(mark) == 2
    row = next(line for line in page.splitlines() if "data-gang='ns/nb'" in line)
    assert mark in row
    assert "<th>interactive: running / pending</th>" in page
    team_a = next(line for line in page.splitlines() if "data-queue='team-a'" in line)
    assert team_a.endswith("<td class='n'>1 / 1</td></tr>")


def test_without_interactive_gangs_the_tables_are_as_before() -> None:
    view = batch_scene()
    assert {g.tier for g in (*view.pending, *view.running)} == {"batch"}
    out = _text(view)
    assert "tier" not in out and "interactive" not in out
    page = html.render(view)
    assert "tag interactive'>" not in page and "<th>interactive" not in page
