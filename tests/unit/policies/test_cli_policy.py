"""`gang-scheduler policy validate`: exit codes, error lines, summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.cli import main

EXAMPLES = Path(__file__).parents[3] / "scheduler" / "examples" / "queues"


def test_valid_files_print_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(p) for p in sorted(EXAMPLES.glob("*.yaml"))]
    assert main.main(["policy", "validate", *files]) == 0
    out = capsys.readouterr().out
    assert "3 queue(s)" in out
    assert "    team-a  weight 1" in out  # indented under its parent
    assert "a100: 384 cpu, 4Ti memory, 32 nvidia.com/gpu" in out


def test_invalid_file_prints_every_error(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "q.yaml"
    bad.write_text("apiVersion: gangscheduler.io/v1alpha1\nkind: Queue\n"
                   "metadata: {name: team-a}\n"
                   "spec:\n  weight: 0\n  quotas: [{pool: a100, nominal: {nvidia.com/gpu: -1}}]\n")
    assert main.main(["policy", "validate", str(bad)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert f"{bad}#1: team-a: spec.weight: must be > 0, got 0" in lines
    assert f"{bad}#1: team-a: spec.quotas[0].nominal.nvidia.com/gpu: must be >= 0, got -1" in lines
    assert lines[-1] == "2 error(s)"


@pytest.mark.parametrize(("reservation", "shown"), [
    ("true", "reservation on,"),
    ("false", "reservation off,"),
    ("{afterSeconds: 900}", "reservation on (after 900s pending),"),
    ("{maxGangs: 2}", "reservation on (at most 2 gangs at once),"),
])
def test_the_summary_shows_the_reservation_settings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], reservation: str, shown: str) -> None:
    f = tmp_path / "policy.yaml"
    f.write_text("apiVersion: gangscheduler.io/v1alpha1\nkind: SchedulerPolicy\n"
                 f"metadata: {{name: p}}\nspec:\n  reservation: {reservation}\n")
    assert main.main(["policy", "validate", str(f)]) == 0
    assert shown in capsys.readouterr().out
