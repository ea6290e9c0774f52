"""Machine-readable outputs for scripts: JSON and CSV.

``summary.json`` contains everything (run info + every `PolicyReport`, loadable again with
`PolicyReport.from_dict`); the CSVs are flat tables for spreadsheets and pandas: one row per
policy (``summary.csv``), per (policy, queue) (``queues.csv``), per (policy, class of work)
(``classes.csv``) and per (policy, job) (``outcomes.csv``). Floats are written with ``repr``
precision so nothing is lost.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import operator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulator.classes import ClassReport
from simulator.metrics import JobOutcome, PolicyReport, PolicyRun, QueueReport
from simulator.report.info import RunInfo

#: Column names that differ from the field they hold (``class`` is a Python keyword).
_COLUMNS = {"job_class": "class"}


def _column(field: str) -> str:
    return _COLUMNS.get(field, field)


def write_json(path: Path, reports: Sequence[PolicyReport], info: RunInfo) -> Path:
    doc = {"run": info.to_dict(), "policies": [r.to_dict() for r in reports]}
    path.write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return path


def summary_rows(reports: Sequence[PolicyReport]) -> list[dict[str, Any]]:
    """One flat dict per policy; distributions become ``queueing_delay_p95`` and so on."""
    rows = []
    for report in reports:
        row: dict[str, Any] = {}
        for key, value in report.to_dict().items():
            if key in ("queues", "classes"):
                continue
            if isinstance(value, dict):
                row.update({f"{key}_{k}": v for k, v in value.items()})
            else:
                row[key] = value
        rows.append(row)
    return rows


def write_summary_csv(path: Path, reports: Sequence[PolicyReport]) -> Path:
    return _write(path, summary_rows(reports))


def write_queues_csv(path: Path, reports: Sequence[PolicyReport]) -> Path:
    fields = ["policy", *(f.name for f in dataclasses.fields(QueueReport))]
    rows = [
        {"policy": r.policy, **dataclasses.asdict(q)} for r in reports for q in r.queues
    ]
    return _write(path, rows, fields)


def write_classes_csv(path: Path, reports: Sequence[PolicyReport]) -> Path:
    """One row per (policy, class of work): ``simulator.classes``."""
    fields = ["policy", *(_column(f.name) for f in dataclasses.fields(ClassReport))]
    rows = [{"policy": r.policy, **{_column(k): v for k, v in dataclasses.asdict(c).items()}}
            for r in reports for c in r.classes]
    return _write(path, rows, fields)


def write_outcomes_csv(path: Path, runs: Sequence[PolicyRun]) -> Path:
    """Per-job rows; written with a plain csv.writer because there can be 100,000s of them."""
    names = [f.name for f in dataclasses.fields(JobOutcome)]
    fields_of = operator.attrgetter(*names)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["policy", *map(_column, names)])
        for run in runs:
            policy = run.report.policy
            for values in map(fields_of, run.outcomes):
                writer.writerow([policy, *("" if v is None else v for v in values)])
    return path


def _write(path: Path, rows: list[dict[str, Any]], fields: list[str] | None = None) -> Path:
    if fields is None:
        fields = list(rows[0]) if rows else []
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return path
