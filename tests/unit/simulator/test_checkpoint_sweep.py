"""The sweeps of ``simulate``: checkpoint intervals find Young's T* = sqrt(2 W MTBF), and both
sweeps write their files; bad flags are refused naming the flag."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from scheduler.cli.main import main
from simulator.engine import FailureModel, SimulationOptions
from simulator.report.sweeps import interval_rows
from simulator.session import IntervalRun, SessionSpec
from simulator.sweep import sweep

WRITE, MTBF_H = 60.0, 5.0  # T* = sqrt(2 * 60 * 18,000) = 1,470 s


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Eight 100-hour one-node jobs on eight 8-GPU nodes: no queueing, only failures."""
    d = tmp_path_factory.mktemp("ckpt")
    cluster, trace = d / "cluster.yaml", d / "trace.csv"
    cluster.write_text("name: ckpt\npools:\n  - name: a100\n    count: 8\n    gpusPerNode: 8\n")
    trace.write_text("job_id,submit_time,duration,queue,workers,gpus_per_worker\n"
                     + "".join(f"j{i},0,360000,team,1,8\n" for i in range(8)))
    return cluster, trace


def test_the_least_waste_is_at_young_daly_t_star(inputs: tuple[Path, Path]) -> None:
    cluster, trace = inputs
    spec = SessionSpec(str(cluster), str(trace), options=SimulationOptions(
        failures=FailureModel(mtbf_hours={"a100": MTBF_H}, checkpoint_write_seconds=WRITE)))
    t_star = math.sqrt(2 * WRITE * MTBF_H * 3600)
    intervals = [round(t_star * f) for f in (0.25, 0.5, 1.0, 2.0, 4.0)]
    result = sweep(IntervalRun(spec, "gang-scheduler"), intervals,
                   target_p95_seconds=math.inf, max_workers=1, progress=False)
    rows = interval_rows([(p.size, p.report) for p in result.points], WRITE, MTBF_H * 3600)
    waste = [r.waste or 0.0 for r in rows]
    assert min(range(len(rows)), key=lambda i: waste[i]) == 2, waste  # at T*
    # Short intervals waste time writing, long ones lose work: the two sides of the trade-off.
    assert rows[0].writing_gpu_hours > rows[-1].writing_gpu_hours
    assert rows[0].lost_gpu_hours < rows[-1].lost_gpu_hours
    for r in rows:  # the simulation follows the model (which over-counts a little: it
        assert r.waste is not None  # divides by useful, not busy, time)
        assert 0.7 * r.expected_waste < r.waste < 1.1 * r.expected_waste, r


def test_the_checkpoint_sweep_writes_its_files(inputs: tuple[Path, Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    cluster, trace = inputs
    code = main(["simulate", "--cluster", str(cluster), "--trace", str(trace), "--no-progress",
                 "--mtbf", f"a100={MTBF_H:g}", "--checkpoint-write", f"{WRITE:g}",
                 "--checkpoint-sweep", "735,1470,2940", "--out", str(tmp_path)])
    assert code == 0
    err = capsys.readouterr().err
    assert "T* = sqrt(2 W MTBF) = 1,470 s" in err and "least waste at T = 1,470 s" in err
    doc = json.loads((tmp_path / "checkpoint_sweep.json").read_text())
    assert round(doc["t_star_seconds"]) == 1470 and len(doc["points"]) == 3
    assert (tmp_path / "checkpoint_tradeoff.png").read_bytes()[:4] == b"\x89PNG"


def test_the_capacity_sweep_writes_its_files(inputs: tuple[Path, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    cluster, trace = inputs
    code = main(["simulate", "--cluster", str(cluster), "--trace", str(trace), "--no-progress",
                 "--sweep", "a100=4,8", "--target-p95", "3600", "--price", "2",
                 "--currency", "EUR", "--out", str(tmp_path)])
    assert code == 0
    err = capsys.readouterr().err
    assert "a100=8 nodes (64 GPUs, 128 EUR/h): p95 queueing 0.00 h" in err
    with (tmp_path / "sweep.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["nodes"], r["gpus"], r["meets_target"]) for r in rows] == [
        ("4", "32", "False"), ("8", "64", "True")]
    assert float(rows[1]["cost"]) == pytest.approx(8 * 8 * 100 * 2)  # GPU-hours x 2 EUR
    assert float(rows[0]["pool_cost_per_hour"]) == 4 * 8 * 2
    assert (tmp_path / "sweep_tradeoff.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("flags", "message"), [
    (["--checkpoint-sweep", "600"], "needs --mtbf and --checkpoint-write"),
    (["--checkpoint-sweep", "x", "--mtbf", "a100=5", "--checkpoint-write", "60"],
     "intervals must be whole seconds"),
    (["--checkpoint-sweep", "600", "--mtbf", "a100=5", "--checkpoint-write", "60",
      "--checkpoint-interval", "600"], "cannot be combined with --checkpoint-interval"),
])
def test_bad_sweep_flags_name_the_flag(inputs: tuple[Path, Path], flags: list[str],
                                       message: str, capsys: pytest.CaptureFixture[str]) -> None:
    cluster, trace = inputs
    assert main(["simulate", "--cluster", str(cluster), "--trace", str(trace), *flags]) == 2
    assert message in capsys.readouterr().err.replace("\n", " ")


def test_a_bad_currency_is_refused() -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", "--currency", "dollars"])
    assert exit_.value.code == 2


def test_a_capacity_sweep_that_misses_its_target_suggests_a_size(
        inputs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 32: the README's sweep missed its own target and said only "try larger sizes".
    Eight one-node jobs arrive at once: 2 and 4 nodes leave some waiting 100 hours, and the
    suggestion is the size that runs them all."""
    cluster, trace = inputs
    code = main(["simulate", "--cluster", str(cluster), "--trace", str(trace), "--no-progress",
                 "--sweep", "a100=2,4", "--target-p95", "3600"])
    assert code == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "no size meets p95 <= 1.00 h; try a100=8 nodes" in err, err
    assert main(["simulate", "--cluster", str(cluster), "--trace", str(trace), "--no-progress",
                 "--sweep", "a100=8", "--target-p95", "3600"]) == 0  # and it does meet it
