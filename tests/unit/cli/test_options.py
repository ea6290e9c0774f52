"""Options the docs print, accepted where they are printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.cli import main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib import metadata

    with pytest.raises(SystemExit) as exit_:
        main.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"gang-scheduler {metadata.version('gang-scheduler')}"


@pytest.mark.parametrize("argv", [
    ["dev-cluster", "--state-dir", "{d}", "env"],
    ["dev-cluster", "env", "--state-dir", "{d}"],
    ["dev-cluster", "env", "--kubeconfig-path", "--state-dir", "{d}"],
    ["dev-cluster", "down", "--state-dir", "{d}"],
])
def test_state_dir_before_or_after_the_subcommand(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """`dev-cluster up --state-dir X` and `dev-cluster --state-dir X up` name the same cluster
    (the first used to fail with the top-level usage)."""
    state = tmp_path / "state"
    status = main.main([a.format(d=state) for a in argv])
    captured = capsys.readouterr()
    if argv[1] == "down":
        assert status == 0
        assert f"no dev cluster running from {state}" in captured.out
    else:
        assert status == 1
        assert f"no dev cluster running from {state}" in captured.err


def test_state_dir_is_parsed_in_either_position(
        tmp_path: Path) -> None:
    parser = main.build_parser()
    args = parser.parse_args(["dev-cluster", "--state-dir", str(tmp_path / "a"), "env"])
    assert args.state_dir == tmp_path / "a"
    args = parser.parse_args(["dev-cluster", "env", "--state-dir", str(tmp_path / "b")])
    assert args.state_dir == tmp_path / "b"
    args = parser.parse_args(["dev-cluster", "env"])
    assert args.state_dir is None


def test_kubeconfig_is_found_as_kubectl_finds_it(tmp_path: Path) -> None:
    """--kubeconfig, then the first existing file of $KUBECONFIG, then ~/.kube/config, then
    in-cluster: explain and run used to ignore $KUBECONFIG and go straight to in-cluster."""
    from scheduler.cli._kube import kubeconfig_source

    home = tmp_path / "home"
    a, b = tmp_path / "a", tmp_path / "b"
    b.write_text("x")
    assert kubeconfig_source("flag.yaml", {"KUBECONFIG": str(b)}, home)[0] == "flag.yaml"
    assert kubeconfig_source(None, {"KUBECONFIG": f"{a}:{b}"}, home) == (
        str(b), f"$KUBECONFIG {b}")
    assert kubeconfig_source(None, {"KUBECONFIG": str(a)}, home)[0] == str(a)  # named, missing
    assert kubeconfig_source(None, {}, home) == (None, "the in-cluster service account")
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text("x")
    assert kubeconfig_source(None, {}, home)[0] == str(home / ".kube" / "config")


@pytest.mark.parametrize("argv", [
    ["dev-cluster", "--kubernetes", "1.37", "--state-dir", "{d}", "env"],
    ["dev-cluster", "--state-dir", "{d}", "env", "--kubernetes", "1.37"],
])
def test_kubernetes_release_before_or_after_the_subcommand_chooses_the_pins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        argv: list[str]) -> None:
    from scheduler.tools.devcluster import build

    # Recorded by monkeypatch, so the value the CLI sets is undone after the test.
    monkeypatch.setenv(build.RELEASE_ENV, build.DEFAULT_RELEASE)
    main.main([a.format(d=tmp_path / "state") for a in argv])
    assert build.release() == "1.37"
    assert build.KUBE_APISERVER.version.startswith("v1.37.")


def test_an_unknown_kubernetes_release_is_refused_with_the_choices(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main.main(["dev-cluster", "--kubernetes", "1.30", "build"])
    assert "1.36" in capsys.readouterr().err
