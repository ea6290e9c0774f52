"""The shipped samples load by short name, are small, and say where they came from."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulator import samples
from simulator.loaders import load_trace
from simulator.loaders.generic_csv import load_generic_csv
from simulator.trace import TraceJob, TraceRole

SAMPLE_DIR = Path(samples.__file__).parent


@pytest.mark.parametrize(
    ("name", "jobs"),
    [("philly-sample", 2131), ("openb-sample", 500), ("synthetic-sample", 1000),
     ("synthetic-two-pools-sample", 600),
     ("generic-sample", 11)],
)
def test_sample_loads_by_name_sorted(name: str, jobs: int) -> None:
    loaded = load_trace(name)
    assert len(loaded) == jobs
    keys = [(j.submit_time, j.job_id) for j in loaded]
    assert keys == sorted(keys)


def test_philly_sample_keeps_real_gangs() -> None:
    loaded = load_trace("philly-sample")
    assert sum(1 for j in loaded if j.total_gpus > 8) == 9
    assert len({j.queue for j in loaded}) > 5


def test_samples_are_small_and_attributed() -> None:
    total = sum(p.stat().st_size for p in SAMPLE_DIR.iterdir() if p.is_file())
    assert total < 300_000
    readme = (SAMPLE_DIR / "README.md").read_text()
    for needle in ("CC-BY-4.0", "Jeon", "USENIX ATC 2019", "Pollux", "Weng", "USENIX ATC 2023"):
        assert needle in readme


def test_shipped_openb_cluster_matches_the_node_list_totals() -> None:
    doc = yaml.safe_load(samples.sample_path("openb").read_text())
    assert sum(p["count"] for p in doc["pools"]) == 1213
    assert sum(p["count"] * p["gpusPerNode"] for p in doc["pools"]) == 6212


def test_unknown_sample_name_lists_the_known_ones() -> None:
    with pytest.raises(FileNotFoundError, match="philly-sample"):
        samples.sample_path("nope")


def test_generic_example_builds_the_two_role_mpi_gang() -> None:
    jobs = {j.job_id: j for j in load_trace("generic-sample")}
    mpi = jobs["mpi-bert"]
    assert mpi == TraceJob(
        "mpi-bert", 120.0, 14400.0, "research",
        (TraceRole("launcher", 1, 0, 2000, 4 * 2**30),
         TraceRole("worker", 4, 8, 32000, 256 * 2**30)),
        checkpoint_interval=1800.0,
    )
    assert jobs["serve-canary"].roles[0].gpu_models == ("A100", "H100")
    assert jobs["serve-canary"].priority == 100
    assert jobs["eval-small"].roles[0].cpu_millis == 500


def test_generic_csv_defaults_for_absent_and_empty_columns(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_time,duration,gpus_per_worker\nb,7,1.5,\na,7,2,4\n")
    b, a = sorted(load_generic_csv(path), key=lambda j: j.job_id, reverse=True)
    assert b == TraceJob("b", 7.0, 1.5, "default", (TraceRole("worker", 1, 1, 1000, 2**30),))
    assert a.roles[0].gpus == 4
    # Canonical order: same submit time -> by job id.
    assert [j.job_id for j in load_generic_csv(path)] == ["a", "b"]


def test_every_sample_named_by_simulate_help_loads() -> None:
    """`simulate --help` listed `synthetic`, which `--trace synthetic` then said did not exist."""
    import re

    from scheduler.cli.simulate import EPILOG

    listed = re.search(r"samples by name: (.*?)\. See", EPILOG, re.S)
    assert listed is not None
    names = [n.strip() for n in listed.group(1).replace("\n", " ").split(",")]
    assert names
    for name in [*names, "synthetic", "generic-example"]:
        assert load_trace(name), name
