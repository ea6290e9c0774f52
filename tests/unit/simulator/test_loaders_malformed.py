"""Malformed rows are rejected with the file, the 1-based line, the column and the reason.

Each case writes a header, one good row and the bad row, so the bad row is always on line 3
(line 4 when the file starts with a comment)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from simulator.loaders import load_trace
from simulator.trace import TraceError

PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster"
PHILLY_OK = "2017-10-09 07:01:55,66.0,1,66.0,11cb48"
OPENB = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time"
)
OPENB_OK = "p0,12000,16384,1,1000,,LS,Running,0,100,0"
GENERIC = "job_id,submit_time,duration,queue,workers,gpus_per_worker,memory_per_worker"
GENERIC_OK = "a,0,10,t,1,8,16Gi"


@dataclass(frozen=True)
class Bad:
    id: str
    header: str
    good: str
    bad: str
    column: str
    reason: str
    line: int = 3


CASES = [
    Bad("philly-gpus-text", PHILLY, PHILLY_OK, "2017-10-09 07:01:55,66.0,x,66.0,c", "num_gpus",
        "not an integer: 'x'"),
    Bad("philly-gpus-zero", PHILLY, PHILLY_OK, "2017-10-09 07:01:55,66.0,0,0,c", "num_gpus",
        "must be >= 1"),
    Bad("philly-timestamp", PHILLY, PHILLY_OK, "yesterday,66.0,1,66.0,c", "timestamp",
        "not a timestamp"),
    Bad("philly-duration-zero", PHILLY, PHILLY_OK, "2017-10-09 07:01:55,0,1,0,c", "duration",
        "must be > 0"),
    Bad("philly-duration-nan", PHILLY, PHILLY_OK, "2017-10-09 07:01:55,nan,1,0,c", "duration",
        "must be finite"),
    Bad("philly-cluster-empty", PHILLY, PHILLY_OK, "2017-10-09 07:01:55,5,1,5, ", "cluster",
        "must not be empty"),
    Bad("philly-short-row", PHILLY, PHILLY_OK, "2017-10-09 07:01:55,5,1", "",
        "expected 5 fields, got 3"),
    Bad("openb-cpu", OPENB, OPENB_OK, "p1,lots,16384,1,1000,,LS,Running,0,100,0", "cpu_milli",
        "not an integer: 'lots'"),
    Bad("openb-milli-over", OPENB, OPENB_OK, "p1,1,1,1,1500,,LS,Running,0,100,0", "gpu_milli",
        "must be <= 1000"),
    Bad("openb-milli-without-gpu", OPENB, OPENB_OK, "p1,1,1,0,500,,LS,Running,0,100,0",
        "gpu_milli", "num_gpu is 0"),
    Bad("openb-negative-time", OPENB, OPENB_OK, "p1,1,1,1,1000,,LS,Running,-5,100,0",
        "creation_time", "must be >= 0"),
    Bad("openb-scheduled-before-created", OPENB, OPENB_OK, "p1,1,1,1,1000,,LS,Running,50,100,10",
        "scheduled_time", "before creation_time"),
    Bad("openb-deleted-before-created", OPENB, OPENB_OK, "p1,1,1,1,1000,,LS,Running,50,10,50",
        "deletion_time", "before creation_time"),
    Bad("generic-memory", GENERIC, GENERIC_OK, "b,0,10,t,1,8,16Gb", "memory_per_worker",
        "not a Kubernetes quantity: '16Gb'"),
    Bad("generic-workers-zero", GENERIC, GENERIC_OK, "b,0,10,t,0,8,1Gi", "workers",
        "must be >= 1"),
    Bad("generic-submit-negative", GENERIC, GENERIC_OK, "b,-1,10,t,1,8,1Gi", "submit_time",
        "must be >= 0"),
    Bad("generic-job-id-empty", GENERIC, GENERIC_OK, ",0,10,t,1,8,1Gi", "job_id",
        "must not be empty"),
    Bad("generic-role-clash", GENERIC, GENERIC_OK, "a,0,10,t,2,8,1Gi", "role",
        "already has a role 'worker'"),
    Bad("generic-job-level-disagrees", "job_id,submit_time,duration,role", "a,0,10,launcher",
        "a,0,99,worker", "duration", "differs from 10.0 on line 2"),
    Bad("generic-after-comment", "# note\n" + GENERIC, GENERIC_OK, "b,0,ten,t,1,8,1Gi",
        "duration", "not a number: 'ten'", line=4),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_malformed_row_names_line_and_column(tmp_path: Path, case: Bad) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(f"{case.header}\n{case.good}\n{case.bad}\n")
    with pytest.raises(TraceError) as info:
        load_trace(path)
    err = info.value
    assert (err.line, err.column) == (case.line, case.column)
    assert case.reason in err.reason
    prefix = f"{path}:{case.line}: {case.column}: " if case.column else f"{path}:{case.line}: "
    assert str(err).startswith(prefix)


@pytest.mark.parametrize(
    ("header", "column"),
    [(PHILLY.replace("num_gpus", "gpus"), "num_gpus"), ("job_id,duration", "submit_time")],
)
def test_missing_column_is_named_on_the_header_line(
    tmp_path: Path, header: str, column: str
) -> None:
    path = tmp_path / "t.csv"
    path.write_text(header + "\n")
    with pytest.raises(TraceError, match=rf":1: {column}: missing column"):
        load_trace(path, format="philly" if "timestamp" in header else "csv")


def test_unrecognised_header_lists_the_formats(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(TraceError, match="formats: philly, openb, synthetic, mixed, csv"):
        load_trace(path)


def test_missing_file_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        load_trace(tmp_path / "nope.csv")
