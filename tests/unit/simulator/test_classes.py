"""The per-class table and fairness over time, on outcome sets small enough to work out by hand,
and the CLI printing both."""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from scheduler.cli.main import main
from simulator import fairness, stats
from simulator.classes import ClassReport, class_of, class_reports
from simulator.metrics import JobOutcome, PolicyReport, UtilizationSample, compute_report
from simulator.report import data

H = 3600.0


def _job(job_id: str, job_class: str, gpus: int, submit: float, start: float | None,
         lost: float = 0.0, preemptions: int = 0, stopped: bool = False) -> JobOutcome:
    end = None if start is None or stopped else start + H
    return JobOutcome(job_id, "q", gpus, submit, start, end, preemptions=preemptions,
                      gpu_seconds_lost=lost, stopped=stopped,
                      stop_time=start + H if stopped and start is not None else None,
                      job_class=job_class)


OUTCOMES = (
    # notebooks wait 0, 1 and 2 h; one lost 0.5 GPU-h in one preemption
    _job("n1", "notebook", 1, 0.0, 0.0),
    _job("n2", "notebook", 1, 0.0, 1 * H, lost=0.5 * H, preemptions=1),
    _job("n3", "notebook", 1, 0.0, 2 * H),
    # training: waits 4 h, stopped by a guard after losing 8 GPU-h; one never started
    _job("t1", "training", 8, 0.0, 4 * H, lost=8 * H, preemptions=1, stopped=True),
    _job("t2", "training", 16, 0.0, None),
)


def test_class_table_by_hand() -> None:
    notebook, training = class_reports(OUTCOMES)
    # p50 of (0, 1, 2) h is 1 h; p95 by linear interpolation: 0.95 * 2 h = 1.9 h.
    assert notebook.queueing_delay_p95 == pytest.approx(1.9 * H)
    assert dataclasses.replace(notebook, queueing_delay_p95=None) == ClassReport(
        "notebook", jobs=3, started=3, queueing_delay_p50=1 * H, queueing_delay_p95=None,
        gpu_hours_lost=0.5, preemptions=1, stopped=0)
    assert training == ClassReport("training", jobs=2, started=1, queueing_delay_p50=4 * H,
                                   queueing_delay_p95=4 * H, gpu_hours_lost=8.0, preemptions=1,
                                   stopped=1)


def test_a_trace_without_classes_is_grouped_by_size_smallest_first() -> None:
    unclassed = [_job(f"j{g}", "", g, 0.0, 0.0) for g in (16, 1, 8, 2, 9)]
    assert [class_of(o) for o in unclassed] == ["over 8 GPUs", "1 GPU", "2-8 GPUs", "2-8 GPUs",
                                                "over 8 GPUs"]
    assert [(c.job_class, c.jobs) for c in class_reports(unclassed)] == [
        ("1 GPU", 1), ("2-8 GPUs", 2), ("over 8 GPUs", 2)]


def test_the_report_carries_classes_and_stopped_jobs_through_json_and_csv(
        tmp_path: Path) -> None:
    samples = [UtilizationSample(0.0, 16, 0, 0, 0)]
    report = compute_report("p", OUTCOMES, samples, end_time=6 * H)
    assert report.stopped == 1
    assert report.classes == class_reports(OUTCOMES)
    assert PolicyReport.from_dict(report.to_dict()) == report
    rows = list(csv.DictReader(data.write_classes_csv(tmp_path / "c.csv", [report]).open()))
    assert [(r["policy"], r["class"], r["jobs"], r["stopped"]) for r in rows] == [
        ("p", "notebook", "3", "0"), ("p", "training", "2", "1")]


def test_window_integrals_by_hand() -> None:
    # 4 GPUs for 2 h, then 0 for 1 h, then 2 GPUs for 3 h: windows of 2 h.
    times, dt = np.array([0.0, 2 * H, 3 * H]), np.array([2 * H, H, 3 * H])
    got = stats.window_integrals(times, dt, np.array([4.0, 0.0, 2.0]),
                                 np.array([0.0, 2 * H, 4 * H, 6 * H]))
    assert got.tolist() == [8 * H, 2 * H, 4 * H]


def test_share_gaps_by_hand() -> None:
    # Two queues owed 5 GPUs each of 10 for two 1-hour windows. In the first, a holds all 10:
    # a's gap is 5 of 10 GPUs, 50 points. In the second, a 6 and b 4: 10 points.
    times, dt = np.array([0.0, H]), np.array([H, H])
    owed = np.array([[5.0, 5.0], [5.0, 5.0]])
    held = np.array([[10.0, 0.0], [6.0, 4.0]])
    gaps = fairness.share_gaps(owed, held, times, dt, np.array([10.0, 10.0]), H)
    assert gaps.gaps.tolist() == pytest.approx([0.5, 0.1])
    assert gaps.max == pytest.approx(0.5) and gaps.mean == pytest.approx(0.3)


def test_a_window_where_nobody_is_owed_anything_is_left_out() -> None:
    times, dt = np.array([0.0, H]), np.array([H, H])
    owed = np.array([[0.0, 0.0], [5.0, 5.0]])
    held = np.array([[3.0, 0.0], [5.0, 5.0]])
    gaps = fairness.share_gaps(owed, held, times, dt, np.array([10.0, 10.0]), H)
    assert math.isnan(gaps.gaps[0]) and gaps.max == 0.0 and gaps.mean == 0.0


def test_a_guard_stopped_job_stops_asking_for_gpus_when_stopped() -> None:
    stopped = _job("t", "training", 8, 0.0, 0.0, stopped=True)  # stopped at 1 h
    demand = fairness.demand_matrix({"q": [stopped]}, ["q"], np.array([0.5 * H, 2 * H]))
    assert demand[:, 0].tolist() == [8.0, 0.0]


def test_simulate_prints_the_class_table_and_the_stopped_jobs(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["simulate", "--no-progress", "--limit", "120", "--policy", "gang-scheduler",
                 "--cluster", "simulator/samples/mixed_cluster.yaml",
                 "--queues", "simulator/samples/mixed_queues_policies.yaml",
                 "--trace", "synthetic-mixed-sample", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "jobs stopped by guards" in out and "fair-share gap, worst 6 h (pts)" in out
    assert "per class of work" in out
    rows = {line.split()[1]: line.split() for line in out.splitlines()
            if line.startswith("gang-scheduler ")}
    classes = {r["class"]: r for r in csv.DictReader((tmp_path / "classes.csv").open())}
    assert set(rows) == set(classes) == {"notebook", "hpo", "training"}
    for name, cells in rows.items():
        assert cells[2] == f"{int(classes[name]['jobs']):,}"
    page = (tmp_path / "report.html").read_text()
    assert "<h2>Per class of work</h2>" in page and "<td>notebook</td>" in page
