"""The loaders on the full public traces, checked against figures computed independently with
the `csv` module (so a loader bug cannot agree with itself)."""

from __future__ import annotations

import csv
import math
from datetime import datetime
from pathlib import Path

import pytest

from simulator.loaders import load_trace
from simulator.loaders.openb import load_openb_cluster, load_openb_pods
from simulator.loaders.philly import load_philly
from simulator.trace import TraceError, TraceJob

Jobs = tuple[TraceJob, ...]
Rows = list[dict[str, str]]


@pytest.fixture(scope="module")
def philly_rows(traces_dir: Path) -> Rows:
    with (traces_dir / "philly" / "philly.csv").open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def philly(traces_dir: Path) -> Jobs:
    return load_philly(traces_dir / "philly" / "philly.csv")


def test_philly_every_row_becomes_one_job_in_order(philly: Jobs, philly_rows: Rows) -> None:
    assert len(philly) == len(philly_rows) == 82_247
    keys = [(j.submit_time, j.job_id) for j in philly]
    assert keys == sorted(keys)
    assert len({j.job_id for j in philly}) == len(philly)


def test_philly_times_are_relative_to_the_earliest_row(philly: Jobs, philly_rows: Rows) -> None:
    stamps = [datetime.fromisoformat(r["timestamp"]) for r in philly_rows]
    assert philly[0].submit_time == 0.0
    assert philly[-1].submit_time == (max(stamps) - min(stamps)).total_seconds()


def test_philly_gpus_durations_and_queues_are_preserved(philly: Jobs, philly_rows: Rows) -> None:
    assert sum(j.total_gpus for j in philly) == sum(int(r["num_gpus"]) for r in philly_rows)
    assert math.isclose(
        sum(j.gpu_seconds for j in philly), sum(float(r["gpu_time"]) for r in philly_rows)
    )
    assert {j.queue for j in philly} == {r["cluster"] for r in philly_rows}
    assert len({j.queue for j in philly}) == 15


def test_philly_large_jobs_become_gangs_of_8_gpu_workers(philly: Jobs) -> None:
    gangs = [j for j in philly if j.total_gpus > 8]
    assert len(gangs) == 289
    for job in gangs:
        worker = job.roles[0]
        assert (worker.name, worker.gpus) == ("worker", 8)
        assert worker.count == job.total_gpus // 8
    twelve = [j for j in philly if j.total_gpus == 12]
    assert len(twelve) == 7
    assert all([(r.name, r.count, r.gpus) for r in j.roles]
               == [("worker", 1, 8), ("worker-rest", 1, 4)] for j in twelve)
    assert all(j.total_pods == 1 for j in philly if j.total_gpus <= 8)


def test_philly_time_scale_compresses_arrivals_and_limit_keeps_the_earliest(
    traces_dir: Path, philly: Jobs
) -> None:
    path = traces_dir / "philly" / "philly.csv"
    half = load_philly(path, time_scale=0.5, limit=1000)
    assert [j.job_id for j in half] == [j.job_id for j in philly[:1000]]
    assert [j.submit_time for j in half] == [j.submit_time * 0.5 for j in philly[:1000]]
    assert [j.duration for j in half] == [j.duration for j in philly[:1000]]


def test_openb_pods_follow_the_documented_rules(traces_dir: Path) -> None:
    path = traces_dir / "openb" / "openb_pod_list_default.csv"
    with path.open(newline="") as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    loaded = load_openb_pods(path)
    assert len(loaded.jobs) == len(rows) == 8152
    shared = sum(1 for r in rows.values() if r["num_gpu"] == "1" and int(r["gpu_milli"]) < 1000)
    assert loaded.shared_gpus == shared == 3078
    assert loaded.pending_lifetime == sum(1 for r in rows.values() if not r["scheduled_time"])
    for job in loaded.jobs:
        row = rows[job.job_id]
        (role,) = job.roles
        assert job.submit_time == int(row["creation_time"])
        assert role.gpus == int(row["num_gpu"])
        assert role.cpu_millis == int(row["cpu_milli"])
        assert role.memory_bytes == int(row["memory_mib"]) * 2**20
        assert job.queue == row["qos"]
        begin = int(row["scheduled_time"] or row["creation_time"])
        assert job.duration == max(1.0, int(row["deletion_time"]) - begin)
    skipped = load_openb_pods(path, pending="skip")
    assert len(skipped.jobs) == 8152 - 897 and skipped.skipped == 897


def test_openb_cluster_keeps_every_node_and_gpu(traces_dir: Path) -> None:
    doc = load_openb_cluster(traces_dir / "openb" / "openb_node_list_gpu_node.csv")
    pools = doc["pools"]
    assert isinstance(pools, list)
    assert sum(p["count"] for p in pools) == 1213
    assert sum(p["count"] * p["gpusPerNode"] for p in pools) == 6212
    assert len({p["name"] for p in pools}) == len(pools)
    assert {p["gpuModel"] for p in pools} == {"A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"}


def test_openb_cluster_is_a_valid_cluster_description(traces_dir: Path) -> None:
    clusterspec = pytest.importorskip("scheduler.world.clusterspec")
    doc = load_openb_cluster(traces_dir / "openb" / "openb_node_list_gpu_node.csv")
    spec = clusterspec.parse(doc)
    assert spec.node_count() == 1213


def test_timeless_openb_variant_is_rejected_with_a_reason(traces_dir: Path) -> None:
    with pytest.raises(TraceError, match=r"multigpu20.csv:1: creation_time: missing column"):
        load_trace(traces_dir / "openb" / "openb_pod_list_multigpu20.csv")


def test_load_trace_sniffs_the_real_formats(traces_dir: Path, philly: Jobs) -> None:
    assert load_trace(traces_dir / "philly" / "philly.csv", limit=5) == philly[:5]
    assert len(load_trace(traces_dir / "openb" / "openb_pod_list_default.csv")) == 8152
    with pytest.raises(TraceError, match="describes a cluster, not a trace"):
        load_trace(traces_dir / "openb" / "openb_node_list_gpu_node.csv")
