"""Loader for the processed Microsoft Philly trace
(``timestamp,duration,num_gpus,gpu_time,cluster``).

The file is the Pollux (OSDI '21) artifact's processed copy of the Philly traces (Jeon et al.,
USENIX ATC '19; CC-BY-4.0). Rows are not in time order and timestamps are absolute wall times,
so the loader makes them relative to the earliest row and sorts.

Modelling choices (see `simulator/README.md`):

- the virtual cluster (``cluster``) is the queue;
- ``num_gpus`` <= 8 is one pod; more is a gang of 8-GPU workers, and a remainder (12 -> 8 + 4)
  becomes one extra ``worker-rest`` pod with the leftover GPUs (`trace.roles_for_gpus`);
- the trace has no CPU or memory: each pod asks for *cpu_millis_per_gpu* and
  *memory_bytes_per_gpu* per GPU it has;
- timestamps are naive wall-clock times; they are read as-is (no time zone, no DST shifts);
- ``gpu_time`` is ignored (it is num_gpus x duration); jobs get ids ``philly-<line>`` so every
  job can be traced back to its line in the file.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

from simulator.loaders.csvrows import iter_rows, parse_float, parse_int, require_text
from simulator.trace import TraceError, TraceJob, TraceRole, roles_for_gpus, sort_jobs

COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")
DEFAULT_CPU_MILLIS_PER_GPU = 4_000
DEFAULT_MEMORY_BYTES_PER_GPU = 16 * 2**30
GPUS_PER_WORKER = 8
_EPOCH = datetime(1970, 1, 1)

_Row = tuple[float, str, float, int, str]  # (absolute seconds, job id, duration, gpus, cluster)


def load_philly(
    path: str | Path,
    *,
    time_scale: float = 1.0,
    limit: int | None = None,
    cpu_millis_per_gpu: int = DEFAULT_CPU_MILLIS_PER_GPU,
    memory_bytes_per_gpu: int = DEFAULT_MEMORY_BYTES_PER_GPU,
) -> tuple[TraceJob, ...]:
    """Load the Philly CSV as sorted `TraceJob` records.

    *time_scale* multiplies every submit time (0.5 packs the same jobs into half the time, i.e.
    doubles the arrival rate; durations are unchanged). *limit* keeps the earliest N jobs.
    """
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise ValueError(f"time_scale must be a finite number > 0, got {time_scale}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    p = Path(path)
    name = str(path)
    rows: list[_Row] = []
    fromiso = datetime.fromisoformat
    for index, line, cells in iter_rows(p, COLUMNS):
        i_ts, i_dur, i_gpus, i_cluster = (index[c] for c in COLUMNS)
        try:
            seconds = (fromiso(cells[i_ts]) - _EPOCH).total_seconds()
            duration = float(cells[i_dur])
            gpus = int(cells[i_gpus])
            cluster = cells[i_cluster].strip()
            if not (duration > 0 and math.isfinite(duration)) or gpus < 1 or not cluster:
                raise ValueError
        except ValueError:
            seconds, duration, gpus, cluster = _parse_precisely(name, line, cells, index)
        rows.append((seconds, f"philly-{line:06d}", duration, gpus, cluster))
    if not rows:
        return ()
    start = min(r[0] for r in rows)
    rows.sort()
    if limit is not None:
        rows = rows[:limit]
    role_cache: dict[int, tuple[TraceRole, ...]] = {}
    jobs = []
    for seconds, job_id, duration, gpus, cluster in rows:
        roles = role_cache.get(gpus)
        if roles is None:
            roles = roles_for_gpus(gpus, GPUS_PER_WORKER, cpu_millis_per_gpu, memory_bytes_per_gpu)
            role_cache[gpus] = roles
        jobs.append(TraceJob(job_id, (seconds - start) * time_scale, duration, cluster, roles))
    # Scaling keeps the order except for float ties, so the canonical sort stays authoritative.
    return sort_jobs(jobs) if time_scale != 1.0 else tuple(jobs)


def _parse_precisely(
    name: str, line: int, cells: list[str], index: dict[str, int]
) -> tuple[float, float, int, str]:
    """The slow path: re-parse a row that failed the fast path, naming the bad column."""
    text = cells[index["timestamp"]].strip()
    try:
        seconds = (datetime.fromisoformat(text) - _EPOCH).total_seconds()
    except ValueError:
        raise TraceError(
            name, line, "timestamp", f"not a timestamp 'YYYY-MM-DD HH:MM:SS': {text!r}"
        ) from None
    duration = parse_float(name, line, "duration", cells[index["duration"]], positive=True)
    gpus = parse_int(name, line, "num_gpus", cells[index["num_gpus"]], minimum=1)
    cluster = require_text(name, line, "cluster", cells[index["cluster"]])
    return seconds, duration, gpus, cluster
