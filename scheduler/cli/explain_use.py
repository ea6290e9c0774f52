"""``explain``'s "GPU use" section: a running gang's ranks joined with the GPU metrics.

``explain`` reads the cluster itself rather than asking the running scheduler, so it reads the
GPU metrics itself too: one query to the Prometheus the scheduler's config names
(``gpuMetrics``, or ``--gpu-metrics-url``), joined by the same code the scheduler's views and
metrics use (``scheduler.views.gpu_use``). A read that fails is said in the section, with the
reason, and the rest of the report stands.
"""

from __future__ import annotations

from typing import Any

from scheduler.cli._rows import row
from scheduler.model.durations import format_duration
from scheduler.report.utilisation import GangUse, Thresholds, by_pod
from scheduler.run.config import GpuMetricsConfig
from scheduler.run.gpu_metrics import ReadError, fetch, parse, query_url
from scheduler.views.gpu_use import GpuSamples, use_of

_WORDS = {"idle": "idle", "straggler": "lags the gang's median", "unseen": "no GPU series"}


def gpu_use_text(gang_id: str, cache: Any, config: GpuMetricsConfig | None, now: float) -> str:
    """The section for a running gang ("" when the gang is not running or no GPU metrics
    source is configured)."""
    if config is None:
        return ""
    running = cache.cycle_input(now).snapshot.running.get(gang_id)
    if running is None:
        return ""
    try:
        reading = parse(fetch(query_url(config)), config.metric)
    except ReadError as exc:
        return "\n" + row("GPU use", f"could not read {config.prometheus}: {exc}")
    thresholds = Thresholds(idle=config.idle_below, straggler=config.straggler_below)
    use = use_of(running, cache.gang_pods(gang_id),
                 GpuSamples(by_pod(reading.samples), thresholds))
    window = format_duration(config.window)
    if use is None:
        return "\n" + row("GPU use", f"no series names its pods in {config.metric} (over the "
                          f"last {window}): is dcgm-exporter on its nodes, with pod mapping?")
    return "\n" + "\n".join(lines(use, window))


def lines(use: GangUse, window: str) -> list[str]:
    """The headline, then one line per rank (flagged ones say what is wrong)."""
    mean = "-" if use.utilisation is None else f"{use.utilisation * 100:.0f}%"
    head = f"{mean} mean over the last {window}"
    out = [row("GPU use", f"{head}: {use.summary}" if use.summary else
               f"{head}; every rank busy")]
    for r in use.ranks:
        util = "-" if r.utilisation is None else f"{r.utilisation * 100:.0f}%"
        flag = f"  {_WORDS[r.flag]}" if r.flag else ""
        out.append(f"    rank {r.rank:<4} {r.pod:<40} {r.gpus} GPU(s) {util:>5}{flag}")
    out += [f"    rank {m:<4} {'(no running pod)':<40} missing" for m in use.missing]
    return out
