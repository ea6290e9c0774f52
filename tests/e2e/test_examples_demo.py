"""``gang-scheduler demo`` end to end, as a user runs it (a subprocess), fast and without the
live view: every job of the story runs to completion, the acts happen, and nothing is left
running afterwards, also when interrupted."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from scheduler.tools.demo import scenario
from tests.e2e.test_deploy_support import CLI, REPO

pytestmark = pytest.mark.e2e


def processes_under(path: Path) -> list[str]:
    """Command lines of live processes that mention `path` (the cluster's state dir)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(path) in cmd and int(pid) != os.getpid():
            found.append(f"{pid}: {cmd[:200]}")
    return found


def test_the_demo_runs_every_job_and_cleans_up(tmp_path: Path) -> None:
    state = tmp_path / "demo-cluster"
    started = time.monotonic()
    proc = subprocess.run([str(CLI), "demo", "--no-live", "--speed", "4", "--timeout", "240",
                           "--state-dir", str(state)], cwd=REPO, capture_output=True,
                          text=True, timeout=400, check=False)
    took = time.monotonic() - started
    out = proc.stdout + proc.stderr
    print(out)
    print(f"demo took {took:.1f}s")
    assert proc.returncode == 0, out[-4000:]
    jobs = scenario.load()
    for job in jobs:
        assert f"] started {job.name}: all {job.workers} bound at once" in out, job.name
        assert f"] finished {job.name} " in out, job.name
    assert f"{len(jobs)} of {len(jobs)} gangs ran to completion." in out
    # The acts: one ddp gang waits whole for the other, b-llm is reserved, a-eval backfills,
    # a-sweep waits behind the reservation, a-urgent preempts the whole of a-bulk.
    assert "b-ddp waits: Reserved" in out or "a-ddp waits: Reserved" in out
    assert "b-llm waits: Reserved" in out and "; reserved 4 node(s)" in out
    # The estimated start is the PodGroup's status field, not in the reason: read from there.
    assert re.search(r"\] b-llm estimated to start in \d+s \(its PodGroup's "
                     r"status\.estimatedStart\)", out), out[-4000:]
    assert "a-eval started after b-llm was submitted but before it started" in out
    assert "behind the reservation of team-b/b-llm" in out
    assert "preempted a-bulk after" in out and "resubmitted a-bulk (attempt 2" in out
    assert not (state / "state.json").exists()
    assert processes_under(state) == []


def test_ctrl_c_stops_the_cluster(tmp_path: Path) -> None:
    state = tmp_path / "demo-cluster"
    # SIGINT back to its default in the child: a shell starts background jobs (e.g. a nohup'ed
    # test run) with SIGINT ignored, and Python then installs no KeyboardInterrupt handler.
    proc = subprocess.Popen([str(CLI), "demo", "--no-live", "--state-dir", str(state)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None
    lines = []
    try:
        for line in proc.stdout:  # until the story is under way
            lines.append(line)
            if "started b-warmup" in line:
                break
        assert processes_under(state), "the cluster should be running now:\n" + "".join(lines)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # never leave a demo running behind a failed test
            proc.terminate()
            proc.wait(timeout=30)
    out = "".join(lines) + rest
    assert proc.returncode == 1, out
    assert "interrupted: cleaning up" in out
    assert processes_under(state) == [], out
