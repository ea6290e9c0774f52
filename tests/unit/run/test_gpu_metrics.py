"""Reading GPU utilisation back from Prometheus (``scheduler.run.gpu_metrics``): the label
variants of dcgm-exporter behind Prometheus, failures that keep the last good samples, and
samples that grow stale."""

from __future__ import annotations

import json
import math
import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from structlog.testing import capture_logs

from scheduler.report.utilisation import GpuSample
from scheduler.run.config import GpuMetricsConfig
from scheduler.run.gpu_metrics import STALE_WINDOWS, GpuMetrics, ReadError, fetch, parse, query_url

CONFIG = GpuMetricsConfig(prometheus="http://prom:9090/", window=60, interval=5)


def answer(*series: tuple[dict[str, str], Any]) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": labels, "value": [1700000000.0, value]} for labels, value in series]}}).encode()


def test_the_query_averages_the_metric_over_the_window() -> None:
    url = urllib.parse.urlsplit(query_url(CONFIG))
    assert (url.netloc, url.path) == ("prom:9090", "/api/v1/query")
    assert urllib.parse.parse_qs(url.query) == {
        "query": ["avg_over_time(DCGM_FI_DEV_GPU_UTIL[60000ms])"]}


def test_labels_behind_prometheus_with_and_without_honor_labels() -> None:
    reading = parse(answer(
        # Scraped without honorLabels: the exporter's pod labels renamed, the plain ones are
        # the exporter's own pod (a service discovery's target labels).
        ({"exported_namespace": "team-a", "exported_pod": "train-0", "namespace": "gpu-op",
          "pod": "dcgm-exporter-x", "gpu": "3", "UUID": "GPU-aa"}, "95"),
        # With honorLabels (or a static scrape): the exporter's labels as they are.
        ({"namespace": "team-a", "pod": "train-1", "UUID": "GPU-bb"}, "40.5"),
        # A GPU no pod holds: node-level.
        ({"gpu": "7", "UUID": "GPU-cc", "Hostname": "n1"}, "0"),
        ({"gpu": "6", "pod": "", "namespace": ""}, "0"),
    ), "DCGM_FI_DEV_GPU_UTIL")
    assert reading.samples == (GpuSample("team-a", "train-0", "3", 0.95),
                               GpuSample("team-a", "train-1", "GPU-bb", 0.405))
    assert reading.node_level == 2


def test_a_ratio_metric_is_not_scaled_and_values_are_clamped() -> None:
    body = answer(({"namespace": "a", "pod": "p", "gpu": "0"}, "0.5"),
                  ({"namespace": "a", "pod": "q", "gpu": "0"}, "1.2"))
    assert [s.utilisation for s in parse(body, "DCGM_FI_PROF_GR_ENGINE_ACTIVE").samples] == [
        0.5, 1.0]


@pytest.mark.parametrize(("body", "message", "reason"), [
    (b"<html>", "not JSON", "format"),
    (json.dumps({"status": "error", "error": "parse error"}).encode(),
     "status is not success: 'parse error'", "status"),
    (json.dumps({"status": "success", "data": {}}).encode(), "data.result: missing", "format"),
    (answer(({"pod": "p"}, "NaN")), "data.result[0] {'pod': 'p'}: value 'NaN' is not a number",
     "format"),
    (answer(({"pod": "p"}, "busy")), "value 'busy' is not a number", "format"),
])
def test_bad_answers_say_what_is_wrong(body: bytes, message: str, reason: str) -> None:
    with pytest.raises(ReadError, match=message.replace("[", r"\[").replace("{", r"\{")) as err:
        parse(body, "DCGM_FI_DEV_GPU_UTIL")
    assert err.value.reason == reason


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def reader(answers: list[bytes | ReadError], clock: Clock,
           failed: list[str] | None = None) -> GpuMetrics:
    def fake_fetch(url: str) -> bytes:
        got = answers.pop(0)
        if isinstance(got, ReadError):
            raise got
        return got

    return GpuMetrics(CONFIG, clock, fake_fetch,
                      failed=failed.append if failed is not None else None)


GOOD = answer(({"namespace": "a", "pod": "p", "gpu": "0"}, "90"))


def test_a_failed_read_keeps_the_last_good_samples_and_says_why() -> None:
    clock, failed = Clock(), list[str]()
    r = reader([GOOD, ReadError("unreachable: refused", "unreachable"), b"{"], clock, failed)
    assert r.current() is None and math.isnan(r.age())  # never read
    assert r.refresh()
    clock.now += 10
    with capture_logs() as logs:
        assert not r.refresh()
        assert not r.refresh()
    assert r.current() == {("a", "p"): (GpuSample("a", "p", "0", 0.9),)}
    assert r.age() == 10
    assert failed == ["unreachable", "format"]
    warned = [e for e in logs if e["event"] == "gpu_metrics_read_failed"]
    assert (warned[0]["url"], warned[0]["reason"], warned[0]["kept_samples_age_s"]) == (
        r.url, "unreachable: refused", 10.0)
    assert warned[1]["reason"].startswith("not JSON")


def test_samples_older_than_the_stale_limit_are_dropped_and_said_so_once() -> None:
    clock = Clock()
    r = reader([GOOD, GOOD], clock)
    r.refresh()
    clock.now += STALE_WINDOWS * CONFIG.window  # at the limit: still shown
    assert r.current() is not None
    clock.now += 1
    with capture_logs() as logs:
        assert r.current() is None
        assert r.current() is None
    assert [e["event"] for e in logs] == ["gpu_metrics_stale"]
    r.refresh()  # a good read brings them back
    assert r.current() is not None


def test_a_good_read_calls_refreshed() -> None:
    calls: list[int] = []
    r = GpuMetrics(CONFIG, Clock(), lambda url: GOOD, refreshed=lambda: calls.append(1))
    r.refresh()
    assert calls == [1]


def serving(respond: Callable[[BaseHTTPRequestHandler], None]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            respond(self)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_fetch_returns_prometheus_error_bodies_and_names_http_failures() -> None:
    def respond(h: BaseHTTPRequestHandler) -> None:
        json_body = h.path.startswith("/bad-query")
        body = b'{"status":"error","error":"bad"}' if json_body else b"gateway"
        h.send_response(400 if json_body else 502)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    server = serving(respond)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(ReadError, match="status is not success: 'bad'"):
            parse(fetch(f"{base}/bad-query"), "DCGM_FI_DEV_GPU_UTIL")
        with pytest.raises(ReadError, match="HTTP 502"):
            fetch(f"{base}/proxy")
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(ReadError, match="unreachable") as err:
        fetch(base, timeout=1.0)  # nothing listens there any more
    assert err.value.reason == "unreachable"
