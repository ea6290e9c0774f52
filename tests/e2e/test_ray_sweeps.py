"""Sweeps on a real Ray cluster: a Ray head started on loopback, the commands run with
``--ray-address`` against it, and their files byte for byte those of the local run.

What the unit tests (tests/unit/simulator/test_executors.py) cannot show: that the runs,
their code (shipped as ``py_modules``) and their inputs reach Ray's workers, that the
results come back in the order the files need, and that a run failing on a worker is named.
The simulate sweep is given its files by relative path from a directory Ray's workers do
not run in, so it passes only if the files travel with the runs.

Ray is the optional extra ``ray``; .ci/run installs it, and under CI a missing Ray fails
this test instead of skipping it. The head gets 2 CPUs and a small object store, runs in its
own process group, and at the end that group and every process it started are killed by
their ids (not ``ray stop``, which stops every Ray on the machine).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.cli.main import main
from simulator.executors import ray_installed
from simulator.samples import sample_path
from tests.cli_logging import quiet_cli_logging

pytestmark = pytest.mark.e2e

#: Every twentieth node of the openb cluster (tests/unit/cli/test_documented_commands.py
#: takes every tenth, for the same reason): pods are drawn until they ask for 130% of the
#: cluster's GPUs, so a twentieth of the pods, each choosing among a twentieth of the nodes.
NODE_STRIDE = 20
START_TIMEOUT = 120.0  # a loaded 2-core machine took 15 s


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ray_head() -> Iterator[str]:
    """The address of a Ray head on 127.0.0.1 with 2 CPUs, for this module."""
    if not ray_installed():
        message = "Ray is not installed: pip install -e '.[dev,ray]' (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    port = _free_port()
    # Short: Ray's socket paths live under it and a Unix socket path has 107 bytes at most.
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    log = Path(temp, "head.log")
    ray = Path(sys.executable).with_name("ray")
    with log.open("wb") as out:
        head = subprocess.Popen(
            [str(ray), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
             f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
             "--object-store-memory=100000000", "--disable-usage-stats", f"--temp-dir={temp}"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while b"Ray runtime started" not in log.read_bytes():
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Ray head did not start: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        _kill_group(head)
        shutil.rmtree(temp, ignore_errors=True)


def _kill_group(head: subprocess.Popen[bytes]) -> None:
    """The head and every process it started: the GCS and the raylet share its process
    group, but Ray's workers make groups of their own, so they are found as descendants.
    Nothing of a test cluster needs a graceful end."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(head.pid, signal.SIGSTOP)  # the raylet starts no worker while we look
    for pid in _descendants(head.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(head.pid, signal.SIGKILL)
    head.wait(timeout=30)


def _descendants(root: int) -> list[int]:
    """*root*'s children, theirs and so on (from /proc: each process's parent)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


@pytest.fixture(autouse=True)
def _cli_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from quiet_cli_logging(monkeypatch)


def _locally(argv: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """The command in this process, on local processes: (stdout, stderr)."""
    monkeypatch.chdir(cwd)
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


def _on_ray(argv: list[str], cwd: Path, address: str) -> tuple[str, str]:
    """The command as a user runs it, in its own process, with ``--ray-address``."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-m", "scheduler.cli.main", *argv,
                           "--ray-address", address], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=env, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_packing_on_ray_writes_the_files_of_the_local_run(
        ray_head: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    header, *rows = sample_path("openb-nodes").read_text().splitlines()
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("\n".join([header, *rows[::NODE_STRIDE]]) + "\n")
    common = ["packing", "--nodes", str(nodes), "--policy", "best-fit", "--policy",
              "random", "--seeds", "2", "--no-progress"]
    local, _ = _locally([*common, "--out", "local", "--jobs", "2"], tmp_path, monkeypatch,
                        capsys)
    remote, _ = _on_ray([*common, "--out", "ray"], tmp_path, ray_head)
    files = _files(tmp_path / "local")
    assert set(files) == {"packing.csv", "packing.md", "packing.png"}
    assert _files(tmp_path / "ray") == files
    assert remote == local.replace("local/", "ray/")  # the table, the files written


def test_a_capacity_sweep_on_ray_reads_the_files_it_was_given(
        ray_head: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cluster.yaml").write_text(
        "name: sweep\npools:\n  - name: a100\n    count: 4\n    gpusPerNode: 8\n")
    (tmp_path / "trace.csv").write_text(
        "job_id,submit_time,duration,queue,workers,gpus_per_worker\n"
        + "".join(f"j{i},{600 * i},3600,team,1,8\n" for i in range(8)))
    common = ["simulate", "--cluster", "cluster.yaml", "--trace", "trace.csv", "--no-progress",
              "--sweep", "a100=2,8", "--target-p95", "600"]
    _, local = _locally([*common, "--out", "local"], tmp_path, monkeypatch, capsys)
    _, remote = _on_ray([*common, "--out", "ray"], tmp_path, ray_head)
    files = _files(tmp_path / "local")
    assert set(files) == {"sweep.csv", "sweep.json", "sweep_tradeoff.png"}
    assert _files(tmp_path / "ray") == files
    assert "smallest a100 pool meeting p95 <= 0.17 h: 8 nodes" in remote
    assert remote.replace("ray/", "local/") == local  # every size's line


#: A sweep whose second run fails on a worker, run in a process of its own: importing Ray and
#: connecting replace this process's SIGTERM handler and excepthook, which the session's
#: dev cluster relies on for its teardown.
FAILING_SWEEP = """
import json, sys
from simulator.executors import RayCluster, RunFailed
try:
    RayCluster(sys.argv[1]).run_all(int, ["1", "x", "3"])
except RunFailed as failed:
    print(json.dumps([failed.index, failed.where, failed.reason]))
"""


def test_a_run_failing_on_ray_is_named_with_its_error(ray_head: str) -> None:
    done = subprocess.run([sys.executable, "-c", FAILING_SWEEP, ray_head], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    index, where, reason = json.loads(done.stdout)
    assert index == 1 and where == f" on Ray at {ray_head}"
    assert reason == "ValueError: invalid literal for int() with base 10: 'x'"
