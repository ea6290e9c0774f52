"""`gang-scheduler queues | gangs | top` and `kubectl gang` without a cluster: reading the
scheduler's /api/v1/state, the output formats, the plugin's commands, and clear errors."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import yaml
from prometheus_client import CollectorRegistry

from scheduler.cli import kubectl_gang
from scheduler.cli._kube import CONTEXT_HELP, KUBECONFIG_HELP
from scheduler.cli.main import main
from scheduler.run.serve import Health, serve
from tests.cli_logging import quiet_cli_logging
from tests.unit.test_views import scene


@pytest.fixture(autouse=True)
def _cli_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from quiet_cli_logging(monkeypatch)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    view = scene()
    server = serve(CollectorRegistry(), Health(), "127.0.0.1", 0, view=lambda: view)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_gangs_from_the_schedulers_state_as_json_and_yaml(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gangs", "--scheduler", url, "-n", "ns", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"pending", "running", "failed"}
    assert [g["id"] for g in doc["pending"]] == ["ns/wide"]
    assert [g["id"] for g in doc["running"]] == ["ns/train"]
    assert main(["queues", "--scheduler", url, "-o", "yaml"]) == 0
    queues = yaml.safe_load(capsys.readouterr().out)["queues"]
    assert [q["name"] for q in queues] == ["org", "team-a", "team-b"]


def test_top_once_draws_every_table(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["top", "--scheduler", url, "--iterations", "1"]) == 0
    out = capsys.readouterr().out
    for title in ("Queues", "Pending gangs", "Running gangs", "Nodes"):
        assert title in out, title


def test_an_unreachable_scheduler_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gangs", "--scheduler", "http://127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --scheduler http://127.0.0.1:9: cannot read its state")
    assert "Traceback" not in err


def test_the_kubectl_plugin_offers_the_read_only_commands(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        kubectl_gang.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: kubectl gang")
    for command in ("queues", "gangs", "top", "explain"):
        assert command in out
    for hidden in ("run", "simulate", "dev-cluster"):
        assert f"    {hidden} " not in out


def test_the_plugin_passes_its_flags_through(url: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert kubectl_gang.main(["gangs", "--scheduler", url, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["pending"][0]["id"] == "ns/wide"


@pytest.mark.parametrize("view", ["queues", "gangs", "top"])
def test_the_views_say_where_their_kubeconfig_comes_from_and_take_a_context(
        view: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 32: their --kubeconfig help said "default: the in-cluster service account" (they
    read $KUBECONFIG and ~/.kube/config first, as kubectl does), and --context was missing."""
    with pytest.raises(SystemExit):
        main([view, "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert " ".join(KUBECONFIG_HELP.split()) in shown
    assert f"--context NAME {CONTEXT_HELP}" in shown
