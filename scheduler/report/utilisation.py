"""What a gang's GPUs actually do: its GPU metrics joined with its ranks.

The scheduler knows who is *allocated* GPUs; the GPU metrics the field already exports
(NVIDIA dcgm-exporter, read back from Prometheus by ``scheduler.run.gpu_metrics``) say how busy
each device is, labelled with the pod that holds it. Joined here, per running gang:

- an **idle** rank: every GPU it holds is below ``Thresholds.idle`` over the window (allocated
  and paid for, doing nothing: a hung rank, a job stuck before its first step);
- a **straggler**: a rank whose utilisation is below ``Thresholds.straggler`` of the gang's
  median while the gang as a whole works (median at least ``Thresholds.floor``). In
  synchronous data-parallel training the slow rank is the one whose GPU waits on its own input
  or a throttled device; the others wait for it inside the all-reduce, which keeps their GPUs
  busy, so the laggard shows *lower* utilisation than its peers;
- an **unseen** rank: running, holding GPUs, but no series names its pod (the exporter is not
  on its node, or its pod labels are not mapped): unknown, never counted as idle;
- **missing** ranks: ranks a gang of indexed pods should have (0..size-1) with no running pod.

Pure: samples and ranks in, values out; no clock, no I/O. The same function serves the live
views, the metrics and the tests.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.model.numerals import is_digits


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One device's mean utilisation over the window, as the exporter labelled it."""

    namespace: str
    pod: str
    device: str  # the GPU's index or UUID on its node
    utilisation: float  # 0..1


@dataclass(frozen=True, slots=True)
class Thresholds:
    idle: float = 0.05  # a GPU below this mean utilisation is idle
    straggler: float = 0.75  # a rank below this fraction of the gang's median lags
    floor: float = 0.20  # a median below this: the gang idles as a whole, nobody lags


@dataclass(frozen=True, slots=True)
class RankInput:
    """A running rank of a gang, as the views know it."""

    rank: str
    pod: str
    gpus: int  # GPUs allocated to the pod


@dataclass(frozen=True, slots=True)
class RankUse:
    rank: str
    pod: str
    gpus: int  # allocated
    utilisation: float | None  # mean over its devices seen (None: unseen)
    idle_gpus: int  # allocated devices seen below the idle threshold
    flag: str  # "" | "idle" | "straggler" | "unseen"


@dataclass(frozen=True, slots=True)
class GangUse:
    utilisation: float | None  # mean over every device seen (None: none seen)
    median: float | None  # the median working rank's utilisation, its idle devices left out
    allocated: int  # GPUs of its running ranks
    idle_gpus: int
    ranks: tuple[RankUse, ...]  # in the order given
    missing: tuple[str, ...] = ()  # ranks 0..size-1 without a running pod
    summary: str = ""  # "2 of 8 GPUs idle (rank 3); rank 5 lags: 41% vs median 93%"

    @property
    def flagged(self) -> bool:
        return bool(self.idle_gpus or self.missing
                    or any(r.flag == "straggler" for r in self.ranks))


def by_pod(samples: Sequence[GpuSample]) -> dict[tuple[str, str], tuple[GpuSample, ...]]:
    """Samples keyed by (namespace, pod), so each gang's join is a lookup per rank."""
    out: dict[tuple[str, str], list[GpuSample]] = {}
    for s in samples:
        out.setdefault((s.namespace, s.pod), []).append(s)
    return {k: tuple(v) for k, v in out.items()}


def gang_use(namespace: str, ranks: Sequence[RankInput], size: int,
             samples: Mapping[tuple[str, str], Sequence[GpuSample]],
             thresholds: Thresholds = Thresholds()) -> GangUse:
    """Join one running gang's ranks with the samples of their pods.

    *size*: the members the gang needs; with numeric ranks, those of 0..size-1 that no running
    rank holds are missing. A rank with more series than GPUs (a device reused within the
    window) is averaged over what was seen; its idle count never exceeds its GPUs."""
    seen: list[tuple[RankInput, float | None, float | None, int]] = []
    for r in ranks:
        devices = samples.get((namespace, r.pod), ())
        if not devices:
            seen.append((r, None, None, 0))
            continue
        mean = sum(d.utilisation for d in devices) / len(devices)
        working = [d.utilisation for d in devices if d.utilisation >= thresholds.idle]
        busy = sum(working) / len(working) if working else None
        idle = min(r.gpus, len(devices) - len(working))
        seen.append((r, mean, busy, idle))
    # Lag is judged on working devices only: an idle device is reported as idle, and must not
    # also drag its rank below the median.
    working_ranks = [b for _, _, b, _ in seen if b is not None]
    median = statistics.median(working_ranks) if working_ranks else None
    uses = tuple(RankUse(r.rank, r.pod, r.gpus, u, idle,
                         _flag(r, u, busy, idle, median, thresholds))
                 for r, u, busy, idle in seen)
    devices_seen = [d.utilisation for r in ranks for d in samples.get((namespace, r.pod), ())]
    use = GangUse(
        utilisation=sum(devices_seen) / len(devices_seen) if devices_seen else None,
        median=median, allocated=sum(r.gpus for r in ranks),
        idle_gpus=sum(u.idle_gpus for u in uses), ranks=uses,
        missing=_missing(ranks, size))
    return dataclasses.replace(use, summary=summary(use))


def _flag(rank: RankInput, utilisation: float | None, busy: float | None, idle: int,
          median: float | None, thresholds: Thresholds) -> str:
    if utilisation is None:
        return "unseen" if rank.gpus else ""
    if busy is None or (rank.gpus and idle >= rank.gpus):
        return "idle"
    if (median is not None and median >= thresholds.floor
            and busy < thresholds.straggler * median):
        return "straggler"
    return ""


def _missing(ranks: Sequence[RankInput], size: int) -> tuple[str, ...]:
    """Ranks 0..size-1 with no running pod, when the gang's ranks are numbers (an Indexed
    Job's completion indexes, a trainer's rank label); else nothing can be said."""
    if not ranks or not all(is_digits(r.rank) for r in ranks):
        return ()
    held = {int(r.rank) for r in ranks}
    return tuple(str(i) for i in range(size) if i not in held)


def _percent(value: float) -> str:
    return f"{value * 100:.0f}%"


def summary(use: GangUse) -> str:
    """One line for ``top``, ``explain`` and the dashboard; "" when nothing is flagged."""
    parts = []
    idle = [r.rank for r in use.ranks if r.flag == "idle"]
    if use.idle_gpus:
        where = f" ({', '.join('rank ' + r for r in idle)})" if idle else ""
        parts.append(f"{use.idle_gpus} of {use.allocated} GPUs idle{where}")
    for r in use.ranks:
        if r.flag == "straggler" and r.utilisation is not None and use.median is not None:
            parts.append(f"rank {r.rank} lags: {_percent(r.utilisation)} vs median "
                         f"{_percent(use.median)}")
    if use.missing:
        ranks = ", ".join(use.missing)
        parts.append(f"rank{'s' if len(use.missing) > 1 else ''} {ranks} missing")
    return "; ".join(parts)
