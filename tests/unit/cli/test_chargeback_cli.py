"""`gang-scheduler chargeback` from both sources, and the scheduler's /api/v1/chargeback.

The scheduler source is the real HTTP server (``scheduler.run.serve``) over a real ledger;
the Prometheus source a stub that answers /api/v1/query from a table of (query, time).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from prometheus_client import CollectorRegistry

from scheduler.cli import chargeback
from scheduler.cli.main import build_parser, main
from scheduler.report.chargeback import COLUMNS, Interval, Ledger
from scheduler.run.serve import Health, serve

KEY = ("team-a", "ns-a", "a100")


def at(text: str) -> float:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()


@pytest.fixture
def scheduler_url() -> Iterator[str]:
    ledger = Ledger("EUR")
    ledger.add([Interval(at("2026-11-30T22:00"), at("2026-12-01T02:00"), KEY, 2, 1, 1.5),
                Interval(at("2026-12-01T00:00"), at("2026-12-01T01:00"),
                         ("team-b", "ns-b", "a100"), 8, None, 1.5)])
    srv = serve(CollectorRegistry(), Health(), "127.0.0.1", 0,
                chargeback=lambda period: ledger.rows(period))
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_the_endpoint_serves_rows_per_period_and_namespace(scheduler_url: str) -> None:
    with urllib.request.urlopen(f"{scheduler_url}/api/v1/chargeback?period=month"
                                "&namespace=ns-a") as r:
        body = json.load(r)
    assert [(row["period"], row["queue"], row["allocated_gpu_hours"], row["used_gpu_hours"])
            for row in body["rows"]] == [("2026-11", "team-a", 4.0, 2.0),
                                         ("2026-12", "team-a", 4.0, 2.0)]
    assert "restart" in body["note"]
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{scheduler_url}/api/v1/chargeback?period=week")
    assert refused.value.code == 400
    assert b"period: must be one of day, month" in refused.value.read()


def test_a_standby_answers_503() -> None:
    srv = serve(CollectorRegistry(), Health(), "127.0.0.1", 0, chargeback=lambda period: None)
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{srv.server_address[1]}/api/v1/chargeback")
        assert refused.value.code == 503
    finally:
        srv.shutdown()


def test_csv_from_the_scheduler(scheduler_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chargeback", "--scheduler", scheduler_url, "--since", "2026-12-01",
                 "--until", "2026-12-31"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        ",".join(COLUMNS),
        "2026-12-01,team-a,ns-a,a100,4.000000,2.000000,2.000000,6.000000,3.000000,EUR",
        "2026-12-01,team-b,ns-b,a100,8.000000,,,12.000000,,EUR",
    ]


def test_table_shows_unknown_used_as_a_dash(scheduler_url: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chargeback", "--scheduler", scheduler_url, "--since", "2026-11-01",
                 "--until", "2026-12-31", "--period", "month", "-o", "table"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["PERIOD", "QUEUE", "NAMESPACE", "POOL"]
    assert lines[-1].split() == ["2026-12", "team-b", "ns-b", "a100", "8.00", "-", "-",
                                 "12.00", "-", "EUR"]


class _Prometheus(BaseHTTPRequestHandler):
    """Answers instant queries from ``answers[(metric, time)]``: a list of (labels, value)."""

    answers: ClassVar[Mapping[tuple[str, float], list[tuple[dict[str, str], float]]]] = {}
    seen: ClassVar[list[tuple[str, float]]] = []

    def do_GET(self) -> None:
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        query, time = q["query"][0], float(q["time"][0])
        self.seen.append((query, time))
        metric = next(m for m, _ in chargeback.METRICS.values() if m in query)
        result = [{"metric": labels, "value": [time, str(v)]}
                  for labels, v in self.answers.get((metric, time), [])]
        body = json.dumps({"status": "success",
                           "data": {"resultType": "vector", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


def test_prometheus_days_are_the_counters_increase_over_each_utc_day() -> None:
    a = {"queue": "team-a", "namespace": "ns-a", "pool": "a100"}
    end1, end2 = at("2026-12-02T00:00"), at("2026-12-03T00:00")
    _Prometheus.seen = []
    _Prometheus.answers = {
        ("gang_scheduler_allocated_gpu_seconds_total", end1): [(a, 7200.0)],
        ("gang_scheduler_gpu_cost_total", end1): [({**a, "currency": "EUR"}, 3.0)],
        ("gang_scheduler_idle_gpu_seconds_total", end1): [(a, 1800.0)],
        ("gang_scheduler_allocated_gpu_seconds_total", end2): [(a, 3600.0)],
        ("gang_scheduler_gpu_cost_total", end2): [({**a, "currency": "EUR"}, 1.5)],
    }
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        rows = chargeback._from_prometheus(
            f"http://127.0.0.1:{srv.server_address[1]}", dt.date(2026, 12, 1),
            dt.date(2026, 12, 3), now=dt.datetime(2026, 12, 3, 6, tzinfo=dt.UTC))
    finally:
        srv.shutdown()
    assert [(r.period, r.allocated_gpu_hours, r.used_gpu_hours, r.cost, r.idle_cost)
            for r in rows] == [("2026-12-01", 2.0, 1.5, 3.0, 0.75),
                               ("2026-12-02", 1.0, None, 1.5, None)]
    # a whole day is a 1-day window at its end; today, the window since midnight, until now
    windows = {(q.split("[")[1].split("]")[0], t) for q, t in _Prometheus.seen}
    assert windows == {("86400s", end1), ("86400s", end2), ("21600s", at("2026-12-03T06:00"))}
    assert all("sum by (queue, namespace, pool" in q for q, _ in _Prometheus.seen)


@pytest.mark.parametrize(("argv", "message"), [
    (["--scheduler", "localhost:8080"], "argument --scheduler: must be an http:// or https://"),
    (["--prometheus", "http://p", "--since", "2026-02-30"],
     "argument --since: must be a date YYYY-MM-DD, got '2026-02-30'"),
    (["--prometheus", "http://p", "--until", "yesterday"], "argument --until: must be a date"),
])
def test_bad_flags_are_named_by_argparse(argv: list[str], message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["chargeback", *argv])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["--scheduler", "http://127.0.0.1:1", "--since", "2026-12-02", "--until", "2026-12-01"],
     2, "error: --since 2026-12-02: after --until 2026-12-01"),
    (["--scheduler", "http://127.0.0.1:1", "--file", "/nonexistent/x.csv"],
     2, "error: --file /nonexistent/x.csv: its directory /nonexistent does not exist"),
    (["--scheduler", "http://127.0.0.1:1"], 1, "error: --scheduler: cannot reach"),
])
def test_flags_that_cannot_work_are_named(argv: list[str], code: int, message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chargeback", *argv]) == code
    assert message in capsys.readouterr().err


def test_json_output_to_a_file(scheduler_url: str, tmp_path: Path) -> None:
    out = tmp_path / "bill.json"
    assert main(["chargeback", "--scheduler", scheduler_url, "--since", "2026-11-30",
                 "--until", "2026-11-30", "-o", "json", "--file", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    assert (row["period"], row["allocated_gpu_hours"], row["currency"]) == (
        "2026-11-30", 4.0, "EUR")


def test_help_teaches_with_an_example() -> None:
    out = io.StringIO()
    with pytest.raises(SystemExit), contextlib.redirect_stdout(out):
        build_parser().parse_args(["chargeback", "--help"])
    text = out.getvalue()
    assert "gang-scheduler chargeback --prometheus http://prometheus:9090" in text
    assert "restart" in text and "used_gpu_hours" in text
