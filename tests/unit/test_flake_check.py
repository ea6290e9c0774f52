"""The flake check's count (tests/flake_check.py): what a run's log says, and runs in a row.

The clones and the suite runs themselves are what the script is for (its figures are in
issue 18's notes); here are the parts a mistake in would make it report a wrong count.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import flake_check
from tests.flake_check import Run, read_log, streak

GREEN_LOG = """\
tests/unit/test_config.py ........                                       [100%]
============================= slowest 30 durations =============================
0.01s call     tests/unit/test_config.py::test_x
===== 2153 passed, 1 skipped, 2 deselected, 1 xfailed in 774.36s (0:12:54) =====
"""
RED_LOG = """\
FAILED tests/e2e/test_examples_apply.py::test_trainer_gang - AssertionError: kubectl apply
ERROR tests/e2e/test_a.py::test_b - TimeoutError
= 1 failed, 2152 passed, 1 skipped, 2 deselected, 1 xfailed, 1 error in 739.77s (0:12:19) =
"""


@pytest.mark.parametrize(("log", "summary", "failed"), [
    (GREEN_LOG, "2153 passed, 1 skipped, 2 deselected, 1 xfailed in 774.36s (0:12:54)", ()),
    (RED_LOG, "1 failed, 2152 passed, 1 skipped, 2 deselected, 1 xfailed, 1 error in 739.77s "
              "(0:12:19)",
     ("tests/e2e/test_examples_apply.py::test_trainer_gang", "tests/e2e/test_a.py::test_b")),
    ("....\n16 passed in 0.59s\n", "16 passed in 0.59s", ()),  # pytest -q
    ("===== no tests ran in 0.01s =====\n", "no tests ran in 0.01s", ()),
    ("Killed\n", "no pytest summary (crashed or killed?)", ()),
])
def test_a_runs_log_gives_its_summary_and_failed_tests(log: str, summary: str,
                                                       failed: tuple[str, ...]) -> None:
    assert read_log(log) == (summary, failed)


def run(number: int, green: bool, lane: str = "A") -> Run:
    return Run(number, lane, "b630f4a", 1_764_676_000.0 + number, 770.0, (1.5, 2.75),
               0 if green else 1, "x passed in 1.00s", () if green else ("t.py::t",))


@pytest.mark.parametrize(("greens", "expected"), [
    ([], 0),
    ([True] * 5, 5),
    ([True, True, False, True], 1),
    ([True, False], 0),
    ([False, True, True, True], 3),
])
def test_the_count_is_green_runs_in_a_row_since_the_last_red(greens: list[bool],
                                                            expected: int) -> None:
    runs = [run(i + 1, g, lane="AB"[i % 2]) for i, g in enumerate(greens)]
    assert streak(runs) == expected
    assert streak(list(reversed(runs))) == expected, "by run number, not by finishing order"


def test_a_run_line_reads_back_as_the_same_run() -> None:
    red = run(7, False)
    assert Run.parse(red.line()) == red
    green = run(8, True)
    assert Run.parse(green.line() + "\n") == green


@pytest.mark.parametrize(("argv", "message"), [
    (["--runs", "0"], "--runs: must be at least 1, got 0"),
    (["--lanes", "0"], "--lanes: must be at least 1, got 0"),
    (["--stagger", "-1"], "--stagger: must be >= 0 seconds, got -1.0"),
    (["-q"], "unrecognized arguments: -q"),
])
def test_bad_flags_are_named(argv: list[str], message: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        flake_check.parse_args(argv)
    assert message in capsys.readouterr().err


def test_pytest_arguments_go_after_the_separator() -> None:
    args = flake_check.parse_args(["--runs", "3", "--", "tests/unit", "-q", "--runs", "9"])
    assert (args.runs, args.pytest) == (3, ["tests/unit", "-q", "--runs", "9"])


def test_a_count_resumes_only_at_its_own_commit(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "runs.tsv").write_text(run(1, True).line() + "\n", encoding="utf-8")
    rc = flake_check.main(["--resume", "--out", str(tmp_path), "--workdir",
                           str(tmp_path / "lanes"), "--commit", "HEAD"])
    assert rc == 2
    assert "counts runs of b630f4a" in capsys.readouterr().err
    assert not (tmp_path / "lanes").exists(), "refused before any clone"


def test_an_unknown_commit_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = flake_check.main(["--commit", "no-such-ref", "--out", str(tmp_path)])
    assert rc == 2
    assert "--commit: 'no-such-ref' is not a commit" in capsys.readouterr().err
