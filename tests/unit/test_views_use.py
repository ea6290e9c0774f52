"""GPU use where users look: ``top``'s tables and the dashboard show a running gang's
utilisation, mark its idle, lagging and missing ranks, and say what is wrong in a sentence;
without GPU metrics nothing of it appears."""

from __future__ import annotations

import dataclasses

import pytest
from rich.console import Console

from scheduler.report.utilisation import GpuSample, RankInput, by_pod, gang_use
from scheduler.views import html, text
from scheduler.views.state import ClusterView
from tests.unit.test_views import scene


@pytest.fixture(scope="module")
def plain() -> ClusterView:
    return scene()


def measured(view: ClusterView) -> ClusterView:
    """The scene with GPU metrics: ns/train's rank 0 idle on both its GPUs, rank 1 busy (as
    a 4-rank gang, ranks 2 and 3 run nowhere: both missing)."""
    train = next(g for g in view.running if g.id == "ns/train")
    ranks = [RankInput(r.rank, r.pod, 2) for r in train.ranks]
    busy = {r.rank: (0.0 if r.rank == "0" else 0.93) for r in train.ranks}
    samples = [GpuSample("ns", r.pod, device, busy[r.rank]) for r in train.ranks
               for device in ("0", "1")]
    use = gang_use("ns", ranks, 4, by_pod(samples))
    running = tuple(dataclasses.replace(g, use=use) if g.id == "ns/train" else g
                    for g in view.running)
    queues = tuple(dataclasses.replace(q, idle_gpus=1 if q.name == "team-a" else 0)
                   for q in view.queues)
    return dataclasses.replace(view, running=running, queues=queues)


def top_text(view: ClusterView) -> str:
    console = Console(record=True, width=200, color_system=None)
    console.print(text.top(view))
    return console.export_text()


def test_top_marks_flagged_ranks_and_says_why(plain: ClusterView) -> None:
    out = top_text(measured(plain))
    assert "GPU use" in out and "idle GPUs" in out
    assert "0:n1[idle]" in out and "1:n1[" not in out
    assert "ns/train: 2 of 4 GPUs idle (rank 0); ranks 2, 3 missing" in out
    assert "46%, 2 idle" in out  # the mean of its four GPUs: 0, 0, 93 and 93%


def test_without_metrics_nothing_of_it_shows(plain: ClusterView) -> None:
    out = top_text(plain)
    assert "GPU use" not in out and "idle GPUs" not in out and "[idle]" not in out
    page = html.render(plain)
    assert "GPU use" not in page and "gpu-use" not in page and "idle GPUs" not in page


def test_the_dashboard_draws_each_rank(plain: ClusterView) -> None:
    page = html.render(measured(plain))
    assert "<h2>GPU use by rank</h2>" in page and "<th>idle GPUs</th>" in page
    assert "<div class='rank idle' data-rank='0' title='rank 0: 0%, idle'>" in page
    assert "data-rank='1' title='rank 1: 93%'><div class='bar' style='height:93%'>" in page
    for rank in ("2", "3"):  # missing ranks keep their place, outlined
        assert (f"<div class='rank missing' data-rank='{rank}' "
                f"title='rank {rank}: no figure, missing: no running pod'>") in page
    assert "2 of 4 GPUs idle (rank 0); ranks 2, 3 missing" in page
    assert "<script" not in page


def test_json_round_trip_keeps_the_use(plain: ClusterView) -> None:
    view = measured(plain)
    assert ClusterView.from_dict(view.to_dict()) == view
