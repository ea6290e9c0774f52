"""The executor seam of the sweeps: results in the order given, whatever order runs finish in;
a failing run named by its position; ``--ray-address`` refused clearly when Ray cannot be used.

The Ray side itself runs against a real Ray head in tests/e2e/test_ray_sweeps.py.
"""

from __future__ import annotations

import functools
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.cli.main import main
from simulator import executors, packing
from simulator.executors import (
    ExecutorError,
    LocalProcesses,
    RayCluster,
    RunFailed,
    executor_for,
)
from simulator.samples import sample_path
from simulator.session import SessionSpec, carry_files, load_inputs
from tests.cli_logging import quiet_cli_logging


@pytest.fixture(autouse=True)
def _cli_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from quiet_cli_logging(monkeypatch)


def square_last_first(n: int, markers: Path | None = None) -> int:
    """With *markers*, run 0 finishes only after runs 1 and 2 have (each leaves a file):
    the finishing order is then 1, 2, 0 or 2, 1, 0, never the order given."""
    if markers is not None:
        if n == 0:
            deadline = time.monotonic() + 60
            while not all((markers / str(i)).exists() for i in (1, 2)):
                assert time.monotonic() < deadline, "runs 1 and 2 never finished"
                time.sleep(0.01)
        else:
            (markers / str(n)).touch()
    return n * n


def test_results_come_back_in_the_order_given(tmp_path: Path) -> None:
    if (os.cpu_count() or 1) < 2:
        pytest.skip("two local processes need two CPUs (LocalProcesses uses at most one each)")
    finished: list[int] = []
    out = LocalProcesses(2).run_all(functools.partial(square_last_first, markers=tmp_path),
                                    [0, 1, 2], lambda i, _r: finished.append(i))
    assert out == [0, 1, 4]
    assert finished[-1] == 0 and sorted(finished) == [0, 1, 2]  # done as each finished
    assert LocalProcesses(1).run_all(square_last_first, [0, 1, 2]) == [0, 1, 4]


@pytest.mark.parametrize("processes", [1, 2])
def test_a_failing_run_is_named_by_its_position(processes: int) -> None:
    with pytest.raises(RunFailed) as info:
        LocalProcesses(processes).run_all(int, ["1", "x", "3"])
    assert info.value.index == 1 and info.value.where == ""
    assert info.value.reason == "ValueError: invalid literal for int() with base 10: 'x'"


def test_without_the_flag_the_runs_stay_local_whatever_the_environment_says(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    assert executor_for(3, None) == LocalProcesses(3)


def test_ray_asked_for_but_not_installed_names_the_extra(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(executors, "ray_installed", lambda: False)
    with pytest.raises(ExecutorError, match=r"pip install 'gang-scheduler\[ray\]'"):
        executor_for(2, "127.0.0.1:6379")
    assert main(["packing", "--seeds", "1", "--no-progress",
                 "--ray-address", "127.0.0.1:6379"]) == 2
    assert "Ray is not installed" in capsys.readouterr().err


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_address_is_named_with_the_reason(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(executors, "ray_installed", lambda: True)
    address = f"127.0.0.1:{_closed_port()}"
    with pytest.raises(ExecutorError) as info:
        executor_for(2, address)
    assert str(info.value) == (f"--ray-address {address}: cannot connect to {address}: "
                               "Connection refused")
    assert main(["simulate", "--sweep", "v100=2,3", "--no-progress",
                 "--ray-address", address]) == 2
    assert f"cannot connect to {address}" in capsys.readouterr().err


@pytest.mark.parametrize(("given", "env", "message"), [
    ("env", None, r"\$RAY_ADDRESS is not set"),
    ("auto", "127.0.0.1:6379", "give the head's HOST:PORT"),
    ("local", None, "give the head's HOST:PORT"),
    ("head-without-port", None, "expected HOST:PORT or ray://HOST:PORT"),
    ("ray://head:99999", None, "expected HOST:PORT or ray://HOST:PORT"),
])
def test_a_bad_address_is_refused(given: str, env: str | None, message: str,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executors, "ray_installed", lambda: True)
    if env is None:
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("RAY_ADDRESS", env)
    with pytest.raises(ExecutorError, match=message):
        executor_for(2, given)


def test_env_takes_the_address_from_ray_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executors, "ray_installed", lambda: True)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        address = f"127.0.0.1:{listening.getsockname()[1]}"
        monkeypatch.setenv("RAY_ADDRESS", address)
        assert executor_for(2, "env") == RayCluster(address)


def test_ray_address_without_a_sweep_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--no-progress", "--ray-address", "127.0.0.1:6379"]) == 2
    assert "--ray-address: only meaningful with --sweep or --checkpoint-sweep" in \
        capsys.readouterr().err


def test_a_failing_packing_run_names_its_policy_and_seed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    header, *rows = sample_path("openb-nodes").read_text().splitlines()
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("\n".join([header, *rows[::50]]) + "\n")  # 31 nodes: quick
    real = packing.run

    def fails_on_seed_1(*args: object, **kwargs: object) -> packing.Curve:
        if args[3] == 1:
            raise RuntimeError("no GPU left\nsecond line")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("simulator.packing_report.run", fails_on_seed_1)
    assert main(["packing", "--seeds", "2", "--jobs", "1", "--policy", "best-fit",
                 "--nodes", str(nodes), "--no-progress"]) == 1
    assert ("the best-fit run with seed 1 failed: RuntimeError: no GPU left"
            in capsys.readouterr().err)


def test_carried_files_are_read_instead_of_the_paths(tmp_path: Path) -> None:
    cluster, trace = tmp_path / "cluster.yaml", tmp_path / "trace.csv"
    cluster.write_text("name: c\npools:\n  - name: a100\n    count: 2\n    gpusPerNode: 8\n")
    trace.write_text("job_id,submit_time,duration,queue,workers,gpus_per_worker\n"
                     "j0,0,60,team,1,8\n")
    spec = carry_files(SessionSpec(cluster=str(cluster), trace=str(trace)))
    cluster.unlink()
    trace.unlink()  # as on another machine: the paths hold nothing
    inputs = load_inputs(spec)
    assert [p.count for p in inputs.spec.pools] == [2] and len(inputs.jobs) == 1
    shipped = carry_files(SessionSpec(cluster=spec.cluster, trace="philly-sample"))
    assert shipped.carried == ()  # neither exists here any more; a sample goes with the code
