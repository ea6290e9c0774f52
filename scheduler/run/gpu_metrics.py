"""GPU utilisation read back from Prometheus, for the join with gangs (``gpuMetrics``).

NVIDIA dcgm-exporter exports each device's utilisation labelled with the pod that holds it;
Prometheus keeps it. Every ``interval`` seconds a thread of its own asks Prometheus for
``avg_over_time(<metric>[<window>])`` (``/api/v1/query``, 2 s timeout) and keeps the samples;
the views and the metrics read the last good ones (``current``). Nothing here is on the
decision path: ``decide`` never sees GPU metrics, and a cycle never waits for Prometheus.

What the exporter's labels become here:

- the pod: ``exported_namespace``/``exported_pod`` when the exporter was scraped without
  ``honorLabels`` (Prometheus renames the exporter's own ``namespace``/``pod`` labels so,
  and the plain ones then name the exporter's pod), else ``namespace``/``pod``;
- the device: ``gpu`` (its index on the node), else ``UUID``;
- a series with no pod is a GPU no pod holds (node-level): not joined, only counted.

A read that fails (Prometheus unreachable, not JSON, a non-success status, a value that is not
a number) is logged naming the URL or the series and why, counted, and changes nothing: the
last good samples stay, with their age. Samples older than ``STALE_WINDOWS`` windows are no
longer shown (said once in the log): an old figure read as current would blame the wrong rank.
"""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from scheduler.report.utilisation import GpuSample, Thresholds, by_pod
from scheduler.run.config import GpuMetricsConfig

log = structlog.get_logger("gang_scheduler.gpu_metrics")

#: Seconds a read may take: Prometheus answers an instant query in milliseconds.
TIMEOUT_SECONDS = 2.0
#: Samples older than this many windows are dropped.
STALE_WINDOWS = 3
#: Metrics in percent (0..100); every other metric is taken as a ratio (0..1), as
#: dcgm-exporter's profiling metrics (``DCGM_FI_PROF_*``) are.
PERCENT_METRICS = frozenset({"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL"})

BySamples = Mapping[tuple[str, str], Sequence[GpuSample]]


class ReadError(Exception):
    """A read that gave no samples; *reason* is a short label for the failure counter."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Reading:
    samples: tuple[GpuSample, ...]
    node_level: int  # series without a pod: GPUs no pod holds


def query_url(config: GpuMetricsConfig) -> str:
    """The instant query for each device's mean over the window (in milliseconds: a
    Prometheus duration takes whole numbers only)."""
    window = f"{max(1, round(config.window * 1000))}ms"
    query = f"avg_over_time({config.metric}[{window}])"
    return (f"{config.prometheus.rstrip('/')}/api/v1/query?"
            f"{urllib.parse.urlencode({'query': query})}")


def _label(metric: Mapping[str, str], *names: str) -> str:
    return next((v for n in names if (v := metric.get(n, ""))), "")


def parse(body: bytes, metric: str) -> Reading:
    """An ``/api/v1/query`` answer as samples; ReadError naming what is wrong."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReadError(f"not JSON: {exc}", "format") from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        what = doc.get("error") if isinstance(doc, dict) else None
        raise ReadError(f"status is not success: {what or str(doc)[:200]!r}", "status")
    data = doc.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise ReadError("data.result: missing or not a list", "format")
    full_scale = 100.0 if metric in PERCENT_METRICS else 1.0
    samples, node_level = [], 0
    for i, series in enumerate(data["result"]):
        labels = series.get("metric") if isinstance(series, dict) else None
        value = series.get("value") if isinstance(series, dict) else None
        if not isinstance(labels, dict) or not isinstance(value, list) or len(value) != 2:
            raise ReadError(f"data.result[{i}]: not a vector sample", "format")
        number = _number(value[1])
        if number is None:
            raise ReadError(f"data.result[{i}] {labels}: value {value[1]!r} is not a number",
                            "format")
        pod = _label(labels, "exported_pod", "pod")
        if not pod:
            node_level += 1
            continue
        namespace = _label(labels, "exported_namespace", "namespace")
        samples.append(GpuSample(namespace, pod, _label(labels, "gpu", "UUID"),
                                 min(1.0, max(0.0, number / full_scale))))
    return Reading(tuple(samples), node_level)


def _number(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def fetch(url: str, timeout: float = TIMEOUT_SECONDS) -> bytes:
    """GET *url*; ReadError when Prometheus does not answer or answers with an error.

    Prometheus answers a bad query with 400 and a JSON body saying why: that body is
    returned, for ``parse`` to report."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return bytes(resp.read())
    except urllib.error.HTTPError as exc:
        body = exc.read()
        if body[:1] == b"{":
            return bytes(body)
        raise ReadError(f"HTTP {exc.code} {exc.reason}", "status") from None
    except (OSError, ValueError) as exc:  # URLError, timeouts, refused, a malformed URL
        reason = getattr(exc, "reason", exc)
        raise ReadError(f"unreachable: {reason}", "unreachable") from None


class GpuMetrics:
    """The last good GPU samples, refreshed by ``run`` at most every ``interval`` seconds.

    *fetch* and *clock* are parameters for the tests; *failed*: called with a reason label
    on each failed read (the metrics' counter); *refreshed*: called after each good read
    (to update the gauges from it, off the reading thread's lock)."""

    def __init__(self, config: GpuMetricsConfig, clock: Callable[[], float] = time.time,
                 fetch: Callable[[str], bytes] = fetch,
                 failed: Callable[[str], None] | None = None,
                 refreshed: Callable[[], None] | None = None) -> None:
        self.config, self.clock, self._fetch = config, clock, fetch
        self.failed, self.refreshed = failed, refreshed
        self.url = query_url(config)
        self.thresholds = Thresholds(idle=config.idle_below, straggler=config.straggler_below)
        self._lock = threading.Lock()
        self._good: tuple[float, dict[tuple[str, str], tuple[GpuSample, ...]]] | None = None
        self._said_stale = False
        self.node_level = 0  # series without a pod in the last good read

    def refresh(self) -> bool:
        """Read once now; True when the samples were replaced."""
        try:
            reading = parse(self._fetch(self.url), self.config.metric)
        except ReadError as exc:
            age = self.age()
            log.warning("gpu_metrics_read_failed", url=self.url, reason=str(exc),
                        kept_samples_age_s=None if math.isnan(age) else round(age, 1))
            if self.failed is not None:
                self.failed(exc.reason)
            return False
        with self._lock:
            self._good = (self.clock(), by_pod(reading.samples))
            self._said_stale = False
            self.node_level = reading.node_level
        log.debug("gpu_metrics_read", series=len(reading.samples),
                  node_level=reading.node_level)
        if self.refreshed is not None:
            self.refreshed()
        return True

    def age(self) -> float:
        """Seconds since the last good read; NaN when there was none."""
        good = self._good
        return math.nan if good is None else max(0.0, self.clock() - good[0])

    def current(self) -> BySamples | None:
        """The last good samples by (namespace, pod); None when never read or stale."""
        with self._lock:
            good = self._good
            if good is None:
                return None
            age = self.clock() - good[0]
            if age > STALE_WINDOWS * self.config.window:
                if not self._said_stale:
                    log.warning("gpu_metrics_stale", url=self.url, age_s=round(age, 1),
                                dropped_after_s=STALE_WINDOWS * self.config.window)
                    self._said_stale = True
                return None
            return good[1]

    def run(self, stop: threading.Event) -> None:
        """Read every ``interval`` seconds until *stop* is set; a failure never ends it."""
        while not stop.is_set():
            try:
                self.refresh()
            except Exception:  # a bug in a callback must not end the reads
                log.exception("gpu_metrics_refresh_failed")
            stop.wait(self.config.interval)

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="gpu-metrics",
                                  daemon=True)
        thread.start()
        return thread
