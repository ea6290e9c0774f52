"""Every command stops quietly when the reader of its output goes away (``... | head``).

Issue 32: ``gang-scheduler gangs | head`` ended in a BrokenPipeError traceback. Each command
here runs in a child process whose stdout is a pipe already closed at the other end, so its
first write fails as it does once ``head`` has read its lines: the exit code is 141 (128 +
SIGPIPE, what a shell reports for ``git log | head``) and nothing is written to stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.cli.main import CLOSED_PIPE_EXIT_CODE

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("argv", [
    ["scheduler.cli.main", "--help"],  # argparse writes it, inside parse_args
    ["scheduler.cli.main", "--version"],
    ["scheduler.cli.main", "policy", "validate", "deploy/queues/team-a.yaml"],  # a handler
    ["scheduler.cli.main", "simulate", "--sweep", "x"],  # an error goes to stderr: not this
    ["scheduler.cli.kubectl_gang", "--help"],  # the kubectl plugin
], ids=lambda a: " ".join(a[1:]))
def test_a_closed_pipe_ends_a_command_quietly(argv: list[str], unbuffered: bool) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    try:
        proc = subprocess.run([sys.executable, "-m", *argv], stdout=write,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120,
                              check=False, env=env)
    finally:
        os.close(write)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    if argv[1:3] == ["simulate", "--sweep"]:  # a usage error, on stderr, is still reported
        assert proc.returncode == 2 and "--sweep" in proc.stderr, proc.stderr
    elif unbuffered and argv[-1].startswith("--"):
        # argparse drops a failed write of its own --help or --version text, and exits 0
        assert proc.returncode == 0, (proc.returncode, proc.stderr)
    else:
        assert proc.returncode == CLOSED_PIPE_EXIT_CODE, (proc.returncode, proc.stderr)
