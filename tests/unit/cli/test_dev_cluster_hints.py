"""What ``gang-scheduler dev-cluster`` tells a person to run next reaches the same cluster.

Issue 32: ``up --state-dir DIR`` said "stop with: gang-scheduler dev-cluster down", which
stops the default directory's cluster (or finds none). The hints carry ``--state-dir`` when
one was given, wherever it was given; without it they are the plain commands. The cluster
itself is not started here (``DevCluster.up`` is replaced): only the words are under test.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from scheduler.cli.main import main
from scheduler.tools.devcluster import autoscaler, cluster, state


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(cluster.DevCluster, "up", lambda *args, **kwargs: None)
    monkeypatch.setenv(state.STATE_DIR_ENV, str(tmp_path / "default"))


@pytest.mark.parametrize("where", ["after", "before"])
def test_up_says_how_to_stop_the_cluster_it_started(
        where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "my cluster"
    flag = ["--state-dir", str(mine)]
    argv = (["dev-cluster", "up", *flag] if where == "after" else ["dev-cluster", *flag, "up"])
    assert main([*argv, "--without-training-operators"]) == 0
    out = capsys.readouterr().out
    assert f"# stop with: gang-scheduler dev-cluster --state-dir {shlex.quote(str(mine))} down" \
        in out, out
    assert f"export KUBECONFIG={shlex.quote(str(mine / 'kubeconfig'))}" in out


def test_without_a_state_dir_the_hints_are_the_plain_commands(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dev-cluster", "up", "--without-training-operators"]) == 0
    assert "# stop with: gang-scheduler dev-cluster down" in capsys.readouterr().out
    assert main(["dev-cluster", "env"]) == 1  # nothing recorded: up was a stand-in
    assert "run `gang-scheduler dev-cluster up`" in capsys.readouterr().err


def test_env_without_a_cluster_names_the_up_that_would_start_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dev-cluster", "--state-dir", str(tmp_path / "x"), "env"]) == 1
    err = capsys.readouterr().err
    assert f"run `gang-scheduler dev-cluster --state-dir {tmp_path / 'x'} up`" in err, err


def test_up_autoscale_starts_the_autoscaler_with_groups_of_the_described_pools(
        monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[tuple[list[str], list[autoscaler.NodeGroupSpec]]] = []
    monkeypatch.setattr(cluster.DevCluster, "start_autoscaler",
                        lambda self, spec, groups: started.append(
                            ([p.name for p in spec.pools], list(groups))))
    assert main(["dev-cluster", "up", "--autoscale", "a100=8", "--autoscale", "h100=1:2"]) == 0
    assert started == [(["a100", "h100"], [autoscaler.NodeGroupSpec("a100", 8),
                                           autoscaler.NodeGroupSpec("h100", 2, 1)])]


@pytest.mark.parametrize(("option", "said"), [
    ("v100=8", "no pool of that name in the cluster description (pools: a100, h100)"),
    ("a100", "expected POOL=MAX or POOL=MIN:MAX")])
def test_up_refuses_a_bad_autoscale_before_starting_anything(
        option: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dev-cluster", "up", "--autoscale", option]) == 2
    assert said in capsys.readouterr().err
