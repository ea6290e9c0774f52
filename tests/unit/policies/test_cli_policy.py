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


def test_kustomizations_beside_the_queues_are_skipped_and_said(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`policy validate deploy/queues/*.yaml` as the README prints it: the kustomization.yaml
    in that folder is passed over with a line saying so, not reported as a bad Queue."""
    deploy = Path(__file__).parents[3] / "deploy" / "queues"
    files = [str(p) for p in sorted(deploy.glob("*.yaml"))]
    assert any(f.endswith("kustomization.yaml") for f in files)
    assert main.main(["policy", "validate", *files]) == 0
    out = capsys.readouterr().out
    assert "kustomization.yaml#1: Kustomization: not a Queue or SchedulerPolicy" in out
    assert "4 queue(s)" in out


def test_only_foreign_objects_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    deploy = Path(__file__).parents[3] / "deploy" / "queues" / "kustomization.yaml"
    assert main.main(["policy", "validate", str(deploy)]) == 1
    assert "no Queue or SchedulerPolicy objects" in capsys.readouterr().out


def test_a_typo_in_our_own_kind_is_still_an_error(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "q.yaml"
    bad.write_text("apiVersion: gangscheduler.io/v1alpha1\nkind: Queu\nmetadata: {name: a}\n")
    assert main.main(["policy", "validate", str(bad)]) == 1
    assert "a: kind: must be Queue or SchedulerPolicy" in capsys.readouterr().out


def test_every_error_of_a_queue_is_reported_parent_included(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A queue with a bad weight and a misspelt parent gets both errors in one run (the
    parent used to be checked only for queues that parsed), in document order."""
    bad = tmp_path / "q.yaml"
    bad.write_text("apiVersion: gangscheduler.io/v1alpha1\nkind: Queue\nmetadata: {name: a}\n"
                   "spec: {weight: -1, parent: nope}\n---\n"
                   "apiVersion: gangscheduler.io/v1alpha1\nkind: Queue\nmetadata: {name: b}\n"
                   "spec: {weight: 0}\n")
    assert main.main(["policy", "validate", str(bad)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"{bad}#1: a: spec.weight: must be > 0, got -1",
                     f"{bad}#1: a: spec.parent: unknown queue 'nope'",
                     f"{bad}#2: b: spec.weight: must be > 0, got 0",
                     "3 error(s)"]
