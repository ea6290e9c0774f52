"""Loader for the documented generic trace CSV, the format users write or export themselves.

One row per role of a job; most jobs are one row. Columns (``simulator/README.md`` has the
full table): ``job_id,submit_time,duration`` are required; ``queue`` (default ``default``),
``role`` (``worker``), ``workers`` (1), ``gpus_per_worker`` (1), ``cpu_per_worker`` (``1``),
``memory_per_worker`` (``1Gi``), ``priority`` (0), ``gpu_model`` (empty = any; ``A100|H100``
lists alternatives), ``checkpoint_interval`` (empty = never) and ``gpus_as_devices``
(``true``: the pods claim their GPUs as DRA devices; ``false``) are optional. Times are seconds.
CPU and memory are Kubernetes quantities (``500m``, ``4``, ``16Gi``, ``128974848``).

Several rows with the same ``job_id`` and different ``role`` make one job with several roles
(an MPI launcher and its workers); their job-level columns (submit_time, duration, queue,
priority, checkpoint_interval) must agree.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import NamedTuple

from kubernetes.utils.quantity import parse_quantity

from simulator.loaders.csvrows import iter_rows, parse_float, parse_int, require_text
from simulator.trace import TraceError, TraceJob, TraceRole, sort_jobs

REQUIRED = ("job_id", "submit_time", "duration")
OPTIONAL = (
    "queue", "role", "workers", "gpus_per_worker", "cpu_per_worker", "memory_per_worker",
    "priority", "gpu_model", "checkpoint_interval", "gpus_as_devices",
)
DEFAULTS = {
    "queue": "default", "role": "worker", "workers": "1", "gpus_per_worker": "1",
    "cpu_per_worker": "1", "memory_per_worker": "1Gi", "priority": "0", "gpu_model": "",
    "checkpoint_interval": "", "gpus_as_devices": "false",
}
_BOOLEANS = {"true": True, "false": False}


class _JobFields(NamedTuple):
    """The columns every row of one job must agree on."""

    submit_time: float
    duration: float
    queue: str
    priority: int
    checkpoint_interval: float | None


def load_generic_csv(path: str | Path, *, limit: int | None = None) -> tuple[TraceJob, ...]:
    """Load a generic trace CSV into sorted `TraceJob` records."""
    name = str(path)
    jobs: dict[str, tuple[int, _JobFields, list[TraceRole]]] = {}
    quantities: dict[tuple[str, bool], int] = {}  # quantity strings repeat: parse each once
    for index, line, cells in iter_rows(Path(path), REQUIRED, OPTIONAL):

        def cell(col: str, index: dict[str, int] = index, cells: list[str] = cells) -> str:
            i = index.get(col)
            text = cells[i].strip() if i is not None else ""
            return text or DEFAULTS.get(col, "")

        def quantity(col: str, milli: bool, line: int = line) -> int:
            text = cell(col)
            value = quantities.get((text, milli))
            if value is None:
                value = quantities[text, milli] = _quantity(name, line, col, text, milli=milli)
            return value

        models_text = cell("gpu_model")

        job_id = require_text(name, line, "job_id", cell("job_id"))
        ci_text = cell("checkpoint_interval")
        fields = _JobFields(
            parse_float(name, line, "submit_time", cell("submit_time")),
            parse_float(name, line, "duration", cell("duration"), positive=True),
            cell("queue"),
            parse_int(name, line, "priority", cell("priority")),
            parse_float(name, line, "checkpoint_interval", ci_text, positive=True)
            if ci_text
            else None,
        )
        gpus = parse_int(name, line, "gpus_per_worker", cell("gpus_per_worker"), minimum=0)
        role = TraceRole(
            cell("role"),
            parse_int(name, line, "workers", cell("workers"), minimum=1),
            gpus,
            quantity("cpu_per_worker", True),
            quantity("memory_per_worker", False),
            tuple(m.strip() for m in models_text.split("|") if m.strip()) if models_text else (),
            _devices(name, line, cell("gpus_as_devices"), gpus),
        )
        if job_id not in jobs:
            jobs[job_id] = (line, fields, [role])
            continue
        first_line, first, roles = jobs[job_id]
        for col in _JobFields._fields:
            mine, theirs = getattr(fields, col), getattr(first, col)
            if mine != theirs:
                raise TraceError(
                    name, line, col,
                    f"job {job_id}: {mine!r} differs from {theirs!r} on line {first_line}",
                )
        if any(r.name == role.name for r in roles):
            raise TraceError(name, line, "role", f"job {job_id} already has a role {role.name!r}")
        roles.append(role)
    records = [
        TraceJob(job_id, f.submit_time, f.duration, f.queue, tuple(roles), f.priority,
                 f.checkpoint_interval)
        for job_id, (_, f, roles) in jobs.items()
    ]
    ordered = sort_jobs(records)
    return ordered[:limit] if limit is not None else ordered


def _devices(name: str, line: int, text: str, gpus: int) -> bool:
    """The ``gpus_as_devices`` cell: ``true`` or ``false`` (a role without GPUs claims none)."""
    value = _BOOLEANS.get(text.lower())
    if value is None:
        raise TraceError(name, line, "gpus_as_devices", f"must be true or false, got {text!r}")
    if value and gpus == 0:
        raise TraceError(name, line, "gpus_as_devices",
                         "true, but gpus_per_worker is 0: no GPU to claim")
    return value


def _quantity(name: str, line: int, column: str, text: str, *, milli: bool) -> int:
    """A Kubernetes quantity in canonical integer units, rounded up like Kubernetes does."""
    try:
        value: Decimal = parse_quantity(text)
    except (ValueError, InvalidOperation, TypeError):
        raise TraceError(name, line, column, f"not a Kubernetes quantity: {text!r}") from None
    if value < 0:
        raise TraceError(name, line, column, f"must be >= 0, got {text!r}")
    return math.ceil(value * 1000 if milli else value)
