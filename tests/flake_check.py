"""The flake check: the whole suite, N times in a row, on clean clones, beside its own load.

A test that fails one run in twenty loses a whole submission now and then, so "no flaky tests"
is a count, not a feeling. This script makes that count reproducible:

- each *lane* is a clean clone of the repository at one commit, with its own virtualenv, its
  own ``TMPDIR`` and ``XDG_STATE_HOME``; lanes run the README's test command (``pytest``) at
  the same time, so each run has the others as its load (two lanes on two cores is a loaded
  machine; add ``--lanes 3`` or run the simulator beside it for more);
- runs are numbered in the order they start; a failed run stops the lanes after their current
  run (``--keep-going`` runs them all), and the result is the number of green runs in a row
  since the last failure, with the failed test ids of every red one;
- one line per finished run is printed and appended to ``runs.tsv`` in ``--out``, beside each
  run's full log (and a red run's temp dirs, which contain its dev clusters' logs), so a count
  may be continued later (``--resume``) at the same commit.

Usage::

    .venv/bin/python tests/flake_check.py --runs 20 --lanes 2
    .venv/bin/python tests/flake_check.py --runs 2 --lanes 1 -- tests/unit/test_config.py -q
"""

from __future__ import annotations

import argparse
import calendar
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(
    r"^(?:=+ )?(\d+ (?:passed|failed|error|errors|skipped|deselected|xfailed|xpassed|warnings?)\b"
    r".* in [0-9.]+s.*?)(?: =+)?$|^=+ (no tests ran.*?) =+$")
FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)")


@dataclass(frozen=True)
class Run:
    """One finished run of the suite in one lane."""

    number: int
    lane: str
    commit: str
    started: float  # epoch seconds
    seconds: float
    load: tuple[float, float]  # 1-minute load average at start and at end
    returncode: int
    summary: str  # pytest's last line, without its ===
    failed: tuple[str, ...]  # test ids of FAILED and ERROR lines

    @property
    def green(self) -> bool:
        return self.returncode == 0

    def line(self) -> str:
        """The run as one tab-separated line of ``runs.tsv``."""
        return "\t".join([str(self.number), self.lane, self.commit,
                          time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
                          f"{self.seconds:.0f}", f"{self.load[0]:.2f}-{self.load[1]:.2f}",
                          str(self.returncode), self.summary, " ".join(self.failed)])

    @classmethod
    def parse(cls, line: str) -> Run:
        number, lane, commit, started, seconds, load, rc, summary, failed = \
            line.rstrip("\n").split("\t")
        low, high = load.split("-")
        return cls(int(number), lane, commit,
                   calendar.timegm(time.strptime(started, "%Y-%m-%dT%H:%M:%SZ")),
                   float(seconds), (float(low), float(high)), int(rc), summary,
                   tuple(failed.split()))


def read_log(text: str) -> tuple[str, tuple[str, ...]]:
    """pytest's summary line and the ids of its failed and erroring tests, from a run's log."""
    summary = ""
    failed: list[str] = []
    for line in text.splitlines():
        if m := SUMMARY.match(line.strip()):
            summary = (m.group(1) or m.group(2)).strip()
        elif m := FAILED.match(line):
            failed.append(m.group(1))
    return summary or "no pytest summary (crashed or killed?)", tuple(failed)


def streak(runs: list[Run]) -> int:
    """Green runs in a row at the end of `runs`, in the order they started."""
    count = 0
    for run in sorted(runs, key=lambda r: r.number, reverse=True):
        if not run.green:
            break
        count += 1
    return count


def load1() -> float:
    return os.getloadavg()[0]


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def prepare(lane: Path, commit: str) -> Path:
    """A clean clone at `commit` with its own venv; reused (and re-checked-out) if present."""
    repo = lane / "main"
    if not (repo / ".git").exists():
        lane.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
    shared = ROOT.parent / "shared"
    if shared.is_dir() and not (lane / "shared").exists():
        (lane / "shared").symlink_to(shared)  # the traces and seeds the docs tests read
    git("fetch", "-q", str(ROOT), commit, cwd=repo)
    git("checkout", "-q", "--detach", commit, cwd=repo)
    if not (repo / ".venv").exists():
        subprocess.run([sys.executable, "-m", "venv", ".venv"], cwd=repo, check=True)
    subprocess.run([".venv/bin/pip", "install", "-q", "-e", ".[dev]"], cwd=repo, check=True)
    return repo


class Check:
    """The shared state of the lanes: the next run's number and the runs finished so far."""

    def __init__(self, args: argparse.Namespace, commit: str, earlier: list[Run]) -> None:
        self.args = args
        self.commit = commit
        self.runs = list(earlier)
        self.next = max((r.number for r in earlier), default=0) + 1
        self.last = self.next + args.runs - 1
        self.lock = threading.Lock()
        self.stop = False
        self.failed_lanes: list[str] = []

    def take(self) -> int | None:
        with self.lock:
            if self.stop or self.next > self.last:
                return None
            self.next += 1
            return self.next - 1

    def record(self, run: Run) -> None:
        with self.lock:
            self.runs.append(run)
            with open(self.args.out / "runs.tsv", "a", encoding="utf-8") as f:
                f.write(run.line() + "\n")
            if not run.green and not self.args.keep_going:
                self.stop = True
            state = "green" if run.green else "RED " + " ".join(run.failed)
            print(f"run {run.number:>3} lane {run.lane}: {state} in {run.seconds:.0f} s, "
                  f"load {run.load[0]:.1f}-{run.load[1]:.1f}: {run.summary}; "
                  f"{streak(self.runs)} green in a row", flush=True)

    def lane(self, name: str) -> None:
        root = self.args.workdir / f"lane{name}"
        try:
            repo = prepare(root, self.commit)
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"lane {name}: could not prepare its clone in {root}: {exc}", flush=True)
            with self.lock:
                self.failed_lanes.append(name)
            return
        while (number := self.take()) is not None:
            tmp, state = root / "tmp", root / "state"
            tmp.mkdir(exist_ok=True)
            state.mkdir(exist_ok=True)
            env = {**os.environ, "TMPDIR": str(tmp), "XDG_STATE_HOME": str(state), "CI": "true"}
            log = self.args.out / f"run{number:03d}-lane{name}.log"
            start, load = time.time(), load1()
            with open(log, "w", encoding="utf-8") as out:
                rc = subprocess.run([".venv/bin/pytest", "-p", "no:cacheprovider",
                                     *self.args.pytest], cwd=repo, env=env, stdout=out,
                                    stderr=subprocess.STDOUT, check=False).returncode
            summary, failed = read_log(log.read_text(encoding="utf-8", errors="replace"))
            self.record(Run(number, name, self.commit[:12], start, time.time() - start,
                            (load, load1()), rc, summary, failed))
            if rc != 0:  # a red run's temp dirs contain its clusters' logs: kept, to find why
                shutil.move(tmp, self.args.out / f"run{number:03d}-lane{name}-tmp")
            else:
                shutil.rmtree(tmp, ignore_errors=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    argv = sys.argv[1:] if argv is None else argv
    ours, pytest_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) \
        if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(
        prog="tests/flake_check.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(__doc__ or "").split("\nUsage::")[0],
        epilog="Arguments after -- go to pytest (default: none, the README's test command).\n"
               "examples:\n"
               "  .venv/bin/python tests/flake_check.py --runs 20 --lanes 2\n"
               "  .venv/bin/python tests/flake_check.py --resume --runs 5   # 5 more\n"
               "  .venv/bin/python tests/flake_check.py --runs 2 --lanes 1 -- "
               "tests/unit/test_config.py -q")
    parser.add_argument("--runs", type=int, default=20, help="runs to start (default 20)")
    parser.add_argument("--lanes", type=int, default=2,
                        help="clones running the suite at once (default 2)")
    parser.add_argument("--commit", default="HEAD",
                        help="commit to check (default HEAD; must be committed)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/gang-scheduler-flake"),
                        help="where the lanes' clones live (default /tmp/gang-scheduler-flake)")
    parser.add_argument("--out", type=Path, default=Path("flake-out"),
                        help="runs.tsv and each run's log (default flake-out)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the count in --out's runs.tsv (same commit only)")
    parser.add_argument("--keep-going", action="store_true",
                        help="start every run even after a red one")
    parser.add_argument("--stagger", type=float, default=60.0,
                        help="seconds between the lanes' first runs (default 60)")
    args = parser.parse_args(ours)
    args.pytest = pytest_args
    if args.runs < 1:
        parser.error(f"--runs: must be at least 1, got {args.runs}")
    if args.lanes < 1:
        parser.error(f"--lanes: must be at least 1, got {args.lanes}")
    if args.stagger < 0:
        parser.error(f"--stagger: must be >= 0 seconds, got {args.stagger}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        commit = git("rev-parse", "--verify", f"{args.commit}^{{commit}}", cwd=ROOT)
    except subprocess.CalledProcessError:
        print(f"--commit: {args.commit!r} is not a commit of {ROOT}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    tsv = args.out / "runs.tsv"
    earlier = [Run.parse(line) for line in tsv.read_text(encoding="utf-8").splitlines()
               if line.strip()] if args.resume and tsv.exists() else []
    other = {r.commit for r in earlier} - {commit[:12]}
    if other:
        print(f"--resume: {tsv} counts runs of {', '.join(sorted(other))}, not {commit[:12]}; "
              "a count is of one commit (use another --out)", file=sys.stderr)
        return 2
    if not args.resume and tsv.exists():
        tsv.unlink()  # a fresh count
    check = Check(args, commit, earlier)
    print(f"flake check of {commit[:12]}: {args.runs} runs on {args.lanes} lanes "
          f"(pytest {' '.join(args.pytest) or '(the whole suite)'}), "
          f"{streak(earlier)} green in a row before", flush=True)
    threads = [threading.Thread(target=check.lane, args=(chr(ord("A") + i),), daemon=True)
               for i in range(args.lanes)]
    for i, thread in enumerate(threads):
        thread.start()
        if i < len(threads) - 1:
            time.sleep(args.stagger)  # the lanes' busiest minutes (start-up) apart
    for thread in threads:
        thread.join()
    red = [r for r in check.runs if not r.green]
    print(f"\n{len(check.runs)} runs of {commit[:12]}, {len(red)} red; "
          f"{streak(check.runs)} green in a row at the end")
    for run in red:
        print(f"  run {run.number} (lane {run.lane}): {run.summary}: {' '.join(run.failed)}")
    if check.failed_lanes:
        print(f"lanes {', '.join(check.failed_lanes)} never ran: see above")
    return 0 if not red and not check.failed_lanes else 1


if __name__ == "__main__":
    sys.exit(main())
