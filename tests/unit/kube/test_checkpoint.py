"""The trainer's checkpoint helper: what it sends, where, and its errors (a loopback HTTP
server plays the apiserver; tests/e2e/test_resume.py runs it against the real one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from scheduler import checkpoint
from scheduler.checkpoint import (
    CheckpointError,
    Connection,
    mark,
    stamp,
)
from scheduler.cli import main as cli
from scheduler.model.durations import parse_time
from scheduler.model.workloads import LAST_CHECKPOINT_ANNOTATION


class Apiserver(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, Any]]] = []
    status: ClassVar[int] = 200

    def do_PATCH(self) -> None:  # (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Apiserver.seen.append({"path": self.path, "body": body,
                               "auth": self.headers["Authorization"],
                               "type": self.headers["Content-Type"]})
        reply = b"{}" if self.status == 200 else json.dumps(
            {"message": 'pods "x" is forbidden: cannot patch'}).encode()
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Connection]:
    Apiserver.seen, Apiserver.status = [], 200
    httpd = HTTPServer(("127.0.0.1", 0), Apiserver)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield Connection(f"http://127.0.0.1:{httpd.server_address[1]}", "tok", None, "team-a")
    httpd.shutdown()


def test_stamp_is_what_the_scheduler_parses() -> None:
    at = datetime(2026, 12, 1, 10, 30, 15, 900000, tzinfo=timezone(timedelta(hours=1)))
    assert stamp(at) == "2026-12-01T09:30:15Z"
    assert parse_time(stamp(at)) == int(at.timestamp())
    with pytest.raises(CheckpointError, match="no time zone"):
        stamp(datetime(2026, 12, 1))


@pytest.mark.parametrize(("target", "name", "path"), [
    ("pod", "train-0", "/api/v1/namespaces/team-a/pods/train-0"),
    ("job", "train", "/apis/batch/v1/namespaces/team-a/jobs/train"),
    ("podgroup", "g", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/team-a/podgroups/g"),
])
def test_mark_merge_patches_the_annotation(server: Connection, target: str, name: str,
                                           path: str) -> None:
    at = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    assert mark(at, target=target, name=name, connection=server) == "2026-12-01T09:00:00Z"
    (req,) = Apiserver.seen
    assert req == {"path": path, "auth": "Bearer tok", "type": "application/merge-patch+json",
                   "body": {"metadata": {"annotations": {
                       "gangscheduler.io/last-checkpoint": "2026-12-01T09:00:00Z"}}}}


def test_the_pod_defaults_to_pod_name(server: Connection,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "ddp-0-abcde")
    mark(connection=server)
    assert Apiserver.seen[0]["path"] == "/api/v1/namespaces/team-a/pods/ddp-0-abcde"


def test_errors_name_the_object_and_the_reason(server: Connection,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAME", raising=False)
    with pytest.raises(CheckpointError, match="set POD_NAME"):
        mark(connection=server)
    with pytest.raises(CheckpointError, match="target 'deployment'"):
        mark(target="deployment", name="x", connection=server)
    Apiserver.status = 403
    with pytest.raises(CheckpointError, match=r"pod team-a/x: HTTP 403: .*cannot patch"):
        mark(name="x", connection=server)


def test_in_cluster_reads_the_service_account(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa-token\n")
    (tmp_path / "namespace").write_text("team-b")
    conn = Connection.in_cluster(tmp_path, {"KUBERNETES_SERVICE_HOST": "10.0.0.1",
                                            "KUBERNETES_SERVICE_PORT": "443"})
    assert conn == Connection("https://10.0.0.1:443", "sa-token", str(tmp_path / "ca.crt"),
                              "team-b")
    with pytest.raises(CheckpointError, match="not running in a pod"):
        Connection.in_cluster(tmp_path, {})
    with pytest.raises(CheckpointError, match="no service account token"):
        Connection.in_cluster(tmp_path / "nope", {"KUBERNETES_SERVICE_HOST": "h",
                                                  "KUBERNETES_SERVICE_PORT": "1"})


def test_the_cli_reports_a_bad_time_and_a_failed_write(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli.main(["checkpoint", "mark", "--at", "yesterday"]) == 2
    assert "--at yesterday: not an RFC 3339 time" in capsys.readouterr().err
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert cli.main(["checkpoint", "mark", "--job", "train"]) == 1
    assert "not running in a pod" in capsys.readouterr().err
    assert checkpoint.ANNOTATION == LAST_CHECKPOINT_ANNOTATION  # (a copy: stdlib only)


def test_the_cli_marks_the_job_inside_a_pod(server: Connection, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(Connection, "in_cluster", classmethod(lambda cls: server))
    args = ["checkpoint", "mark", "--job", "ddp-train", "--at", "2026-12-01T09:30:00Z"]
    assert cli.main(args) == 0
    assert capsys.readouterr().out.strip() == (
        "gangscheduler.io/last-checkpoint=2026-12-01T09:30:00Z on the job")
    assert Apiserver.seen[0]["path"] == "/apis/batch/v1/namespaces/team-a/jobs/ddp-train"


def test_the_module_copied_into_an_image_runs_as_a_script(tmp_path: Path) -> None:
    """``python3 checkpoint.py``: the file alone, outside this package, standard library only."""
    copy = tmp_path / "checkpoint.py"
    copy.write_text(Path(checkpoint.__file__).read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    done = subprocess.run([sys.executable, "-I", str(copy)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == ("checkpoint: not running in a pod: "
                                   "KUBERNETES_SERVICE_HOST/PORT unset")
