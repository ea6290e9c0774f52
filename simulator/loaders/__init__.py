"""Trace loaders, one module per format, and `load_trace` which picks the right one.

Every loader returns `TraceJob` records sorted by (submit_time, job_id) and raises `TraceError`
naming the file, line, column and reason. `load_trace` dispatches on an explicit ``format`` or
sniffs it: ``.yaml``/``.yml`` files are synthetic specs, CSVs are recognised by their header.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from simulator import samples
from simulator.loaders.csvrows import read_header
from simulator.loaders.generic_csv import load_generic_csv
from simulator.loaders.mixed import load_mixed
from simulator.loaders.openb import load_openb_cluster, load_openb_pods
from simulator.loaders.philly import load_philly
from simulator.loaders.synthetic import load_synthetic, read_spec_data
from simulator.trace import TraceError, TraceJob

FORMATS = ("philly", "openb", "synthetic", "mixed", "csv")

__all__ = [
    "FORMATS", "detect_format", "load_generic_csv", "load_mixed", "load_openb_cluster",
    "load_openb_pods", "load_philly", "load_synthetic", "load_trace", "resolve",
]


def resolve(path_or_name: str | Path) -> Path:
    """A path as given if it exists, else a shipped sample by short name (``philly-sample``)."""
    path = Path(path_or_name)
    if path.exists() or str(path_or_name) not in samples.SAMPLES:
        return path
    return samples.sample_path(str(path_or_name))


def detect_format(path: Path) -> str:
    """Which loader reads *path*: by suffix for specs (a spec's ``format`` field tells the
    class mix from the plain synthetic spec), by header columns for CSVs."""
    if path.suffix.lower() in (".yaml", ".yml"):
        data = read_spec_data(path)
        return "mixed" if isinstance(data, dict) and data.get("format") == "mixed" \
            else "synthetic"
    if path.is_dir():
        raise TraceError(str(path), None, "", "is a directory, expected a trace file")
    if not path.is_file():
        names = sorted(n for n in samples.SAMPLES if n.endswith("-sample"))
        raise TraceError(str(path), None, "", "no such file or shipped sample "
                         f"(samples: {', '.join(names)})")
    header = set(read_header(path))
    if not header:
        raise TraceError(str(path), None, "", "empty file, expected a CSV header row "
                         f"(formats: {', '.join(FORMATS)}; see simulator/README.md)")
    if {"timestamp", "num_gpus", "cluster"} <= header:
        return "philly"
    if {"name", "num_gpu", "gpu_milli"} <= header:
        return "openb"
    if {"job_id", "submit_time", "duration"} <= header:
        return "csv"
    if {"sn", "gpu", "model"} <= header:
        raise TraceError(
            str(path), 1, "", "an openb node list describes a cluster, not a trace: "
            "read it with load_openb_cluster"
        )
    raise TraceError(
        str(path), 1, "", f"unrecognised header {sorted(header)}; formats: {', '.join(FORMATS)} "
        "(see simulator/README.md)"
    )


def load_trace(
    path_or_name: str | Path, *, format: str | None = None, time_scale: float = 1.0,
    limit: int | None = None, seed: int | None = None,
) -> tuple[TraceJob, ...]:
    """Load any supported trace, the same options for every format: *time_scale* multiplies
    submit times (< 1 raises the load), *limit* keeps the first N jobs, *seed* overrides a
    synthetic spec's seed (other formats are data, not draws: it does not apply to them)."""
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise ValueError(f"time_scale must be a finite number > 0, got {time_scale}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    path = resolve(path_or_name)
    fmt = format or detect_format(path)
    if fmt == "philly":  # scales and cuts while reading: the full trace is large
        return load_philly(path, time_scale=time_scale, limit=limit)
    if fmt == "openb":
        jobs = load_openb_pods(path, limit=limit).jobs
    elif fmt == "synthetic":
        jobs = load_synthetic(path, seed=seed)
    elif fmt == "mixed":
        jobs = load_mixed(path, seed=seed)
    elif fmt == "csv":
        jobs = load_generic_csv(path, limit=limit)
    else:
        raise ValueError(f"unknown trace format {fmt!r} (known: {', '.join(FORMATS)})")
    jobs = jobs[:limit] if limit is not None else jobs
    if time_scale != 1.0:  # sorted by submit time already; scaling keeps the order
        jobs = tuple(replace(j, submit_time=j.submit_time * time_scale) for j in jobs)
    return jobs
