"""Report files: written, non-empty, self-contained, faithful to the figures, reproducible."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from simulator.metrics import (
    JobOutcome,
    PolicyReport,
    PolicyRun,
    Pricing,
    UtilizationSample,
    compute_report,
)
from simulator.report import RunInfo, fmt, print_summary, write_report


def _run(policy: str, delay: float) -> PolicyRun:
    outcomes = (
        JobOutcome("j1", "research", 8, 0.0, delay, delay + 100.0),
        JobOutcome("j2", "product", 4, 5.0, 5.0 + delay, 50.0 + delay),
        JobOutcome("j3", "product", 64, 6.0, None, None, gpu_seconds_idle_partial=360.0),
    )
    samples = (
        UtilizationSample(0.0, 16, 0, 0, 0, {}),
        UtilizationSample(delay, 16, 12, 12, 4, {"research": 8, "product": 4}),
        UtilizationSample(delay + 100.0, 16, 0, 0, 0, {}),
    )
    report = compute_report(
        policy, outcomes, samples, entitlements={"research": 0.6, "product": 0.4},
        pricing=Pricing(2.0), end_time=delay + 200.0,
    )
    return PolicyRun(report, outcomes, samples)


RUNS = (_run("fifo-gang", 30.0), _run("gang-scheduler", 10.0))
INFO = RunInfo(
    "gang-scheduler simulate --trace philly-sample --seed 7 --note '<script>x</script>'",
    seed=7, trace="philly-sample", cluster="sample.yaml", notes=("shared GPUs rounded up",),
)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_report(tmp_path_factory.mktemp("out") / "nested", RUNS, INFO)


def test_every_file_is_written_and_non_empty(written: dict[str, Path]) -> None:
    assert set(written) == {
        "summary.json", "summary.csv", "queues.csv", "classes.csv", "outcomes.csv",
        "utilization.png", "fairness_over_time.png",
        "backlog.png", "queueing_delay_cdf.png", "queue_shares.png", "report.html",
    }
    for path in written.values():
        assert path.stat().st_size > 0
    for name in ("utilization.png", "backlog.png", "queueing_delay_cdf.png", "queue_shares.png"):
        assert written[name].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_html_is_self_contained_and_says_how_it_was_made(written: dict[str, Path]) -> None:
    page = written["report.html"].read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<script" not in page  # the command's <script> is escaped, and there are no scripts
    assert "&lt;script&gt;" in page
    assert page.count('src="data:image/png;base64,') == 5
    assert "--seed 7" in page and "shared GPUs rounded up" in page
    assert "Queues under gang-scheduler" in page


def test_json_round_trips_the_reports(written: dict[str, Path]) -> None:
    doc = json.loads(written["summary.json"].read_text())
    assert doc["run"]["seed"] == 7
    assert [PolicyReport.from_dict(p) for p in doc["policies"]] == [r.report for r in RUNS]


def test_csvs_have_one_row_per_policy_queue_and_job(written: dict[str, Path]) -> None:
    with written["summary.csv"].open() as f:
        summary = list(csv.DictReader(f))
    assert [r["policy"] for r in summary] == ["fifo-gang", "gang-scheduler"]
    assert float(summary[0]["queueing_delay_p50"]) == RUNS[0].report.queueing_delay.p50
    with written["outcomes.csv"].open() as f:
        outcomes = list(csv.DictReader(f))
    assert len(outcomes) == 6
    stuck = next(r for r in outcomes if r["job_id"] == "j3")
    assert (stuck["start_time"], stuck["gpu_seconds_idle_partial"]) == ("", "360.0")
    with written["queues.csv"].open() as f:
        queues = list(csv.DictReader(f))
    assert [(r["policy"], r["queue"]) for r in queues] == [
        ("fifo-gang", "product"), ("fifo-gang", "research"),
        ("gang-scheduler", "product"), ("gang-scheduler", "research"),
    ]


def test_same_runs_give_the_same_bytes(tmp_path: Path, written: dict[str, Path]) -> None:
    again = write_report(tmp_path, RUNS, INFO)
    for name in ("report.html", "summary.json", "outcomes.csv", "utilization.png"):
        assert again[name].read_bytes() == written[name].read_bytes(), name


def test_terminal_summary_puts_policies_side_by_side() -> None:
    console = Console(record=True, width=120, color_system=None)
    print_summary([r.report for r in RUNS], console=console)
    text = console.export_text()
    assert "fifo-gang" in text and "gang-scheduler" in text
    delay_row = next(line for line in text.splitlines() if "queueing delay p50 (h)" in line)
    assert "0.01" in delay_row and "0.00" in delay_row  # 30 s and 10 s, in hours
    assert "cost (USD)" in text and "1 = fair" in text
    assert "Jain's index over queues" in text  # the sentences under the table
    assert "never started" in text


def test_best_value_is_marked_only_when_visible() -> None:
    reports = [r.report for r in RUNS]
    p50 = next(row for row in fmt.ROWS if row.label == "queueing delay p50 (h)")
    assert fmt.best_columns(p50, reports) == {1}
    finished = next(row for row in fmt.ROWS if row.label == "jobs finished")
    assert fmt.best_columns(finished, reports) == set()  # both finished 2


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0.0, "0.00"), (30.0, "0.01"), (5400.0, "1.50"), (3 * 86400.0, "72.00"),
     (400 * 3600.0, "400.00"), (4000 * 3600.0, "4,000.00")],
)
def test_every_time_is_in_hours(seconds: float | None, text: str) -> None:
    assert fmt.hours(seconds) == text
