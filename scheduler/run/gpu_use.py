"""The GPU metrics joined with the running gangs, for the views and the gauges.

``GpuMetrics`` reads the samples on a thread of its own; this holds it and, on the scheduling
loop's thread, turns the last cycle's running gangs and the last good samples into the
gauges (idle allocated GPUs per queue, namespace and pool; per flagged gang its idle GPUs,
straggler and missing ranks) and the idle GPUs the chargeback charges (``Accrual.set_idle``).
The gauges follow both what changes them: a cycle (the running set) and a read (the samples).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence

from scheduler.model import RunningGang
from scheduler.model.workloads import PodInfo
from scheduler.run import gpu_metrics
from scheduler.run.config import GpuMetricsConfig
from scheduler.run.gpu_metrics import GpuMetrics
from scheduler.run.metrics import SchedulerMetrics
from scheduler.views.gpu_use import GpuSamples, idle_by_pool, use_of

Idle = Mapping[tuple[str, str, str], int]  # (queue, namespace, pool) -> idle allocated GPUs


class GpuUse:
    """The reader, and the gauges it feeds. *refreshed*: called on the reading thread after
    each good read (the runner wakes its loop, which calls ``update``); *clock* and *fetch*
    are the reader's (for the tests)."""

    def __init__(self, config: GpuMetricsConfig, metrics: SchedulerMetrics,
                 refreshed: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.time,
                 fetch: Callable[[str], bytes] = gpu_metrics.fetch) -> None:
        self.metrics = metrics
        self.reader = GpuMetrics(
            config, clock, fetch,
            failed=lambda reason: metrics.gpu_metrics_read_failures.labels(reason).inc(),
            refreshed=self._refreshed)
        self._on_refresh = refreshed
        metrics.gpu_metrics_age.set_function(self.reader.age)
        self._fresh = threading.Event()  # a read since the gauges were last set
        #: The running gangs' members the gauges were last set from (None: never set).
        self._placed: dict[str, tuple[tuple[str, str, int], ...]] | None = None
        self._shown = False  # the gauges show samples (not stale, not none)

    def _refreshed(self) -> None:
        self._fresh.set()
        if self._on_refresh is not None:
            self._on_refresh()

    @property
    def due(self) -> bool:
        """Samples were read, or the ones the gauges show went stale, since they were set
        (stale figures must not keep an alert firing)."""
        return self._fresh.is_set() or (self._shown and self.reader.current() is None)

    def source(self) -> GpuSamples | None:
        """What the views join with; None while no good samples are at hand (never read, or
        stale)."""
        samples = self.reader.current()
        return None if samples is None else GpuSamples(samples, self.reader.thresholds)

    def update(self, running: Mapping[str, RunningGang],
               pods_of: Callable[[str], Sequence[PodInfo]], pool_of: Mapping[str, str],
               set_idle: Callable[[Idle], None] | None = None) -> None:
        """Set the gauges from *running* (the last cycle's gangs) and the last good samples;
        *pool_of*: node -> pool; *set_idle*: where the chargeback takes the idle GPUs.

        Nothing to do when neither the samples (read, or gone stale) nor the running gangs'
        members changed since the last update (most cycles of a busy cluster bind or wait,
        and leave them be)."""
        placed = {gid: rg.members for gid, rg in running.items()}
        source = self.source()
        if (not self._fresh.is_set() and placed == self._placed
                and (source is not None) == self._shown):
            return
        self._fresh.clear()
        self._placed, self._shown = placed, source is not None
        idle: dict[tuple[str, str, str], int] = {}
        flagged: dict[tuple[str, str, str], tuple[int, int, int]] = {}
        for gid, rg in running.items():
            pods = pods_of(gid)
            use = use_of(rg, pods, source) if source is not None else None
            if use is None:
                continue
            for key, gpus in idle_by_pool(rg, pods, use, pool_of).items():
                idle[key] = idle.get(key, 0) + gpus
            if use.flagged:
                g = rg.gang
                stragglers = sum(1 for r in use.ranks if r.flag == "straggler")
                flagged[(g.queue, g.namespace, gid.partition("/")[2])] = (
                    use.idle_gpus, stragglers, len(use.missing))
        self.metrics.set_gpu_use(idle, flagged)
        if set_idle is not None:
            set_idle(idle)
