"""The chargeback CSV of a simulated run matches the accounting metrics (issue 39, item 4:
"the chargeback CSV for a simulated day matches the accounting metrics").

The replay runs the live scheduler's own accrual (``scheduler.run.accrual``) on the virtual
clock, with ``SchedulerMetrics`` on a fresh registry: the CSV's GPU-hours and cost per
(queue, namespace, pool), summed over its days, must equal the counters read from that
registry. Nothing here computes a charge of its own.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from pathlib import Path

import pytest

from scheduler.cli.main import main
from scheduler.report.chargeback import COLUMNS, write_csv
from simulator import session
from simulator.engine import SimulationOptions

DAY = 86400.0
SPEC = session.SessionSpec(cluster=str(Path(session.__file__).parents[1] / "scheduler" /
                                       "examples" / "clusters" / "sim-small.yaml"),
                           trace="philly-sample", trace_options={"limit": 40},
                           options=SimulationOptions(max_time=DAY), price_per_gpu_hour=2.5,
                           currency="EUR")


def _csv_sums(text: str) -> tuple[list[str], dict[tuple[str, str, str], list[float]]]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader)
    sums: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for period, queue, namespace, pool, allocated, used, idle, cost, idle_cost, cur in reader:
        assert (used, idle, idle_cost, cur) == ("", "", "", "EUR")  # no utilisation source
        assert period.startswith("1970-01-0")  # the trace starts at time 0
        sums[(queue, namespace, pool)][0] += float(allocated)
        sums[(queue, namespace, pool)][1] += float(cost)
    return header, dict(sums)


def test_a_simulated_days_csv_equals_the_counters_of_its_registry() -> None:
    session.quiet_scheduler_logs()
    inputs = session.load_inputs(SPEC)
    charged = session.charged(inputs)
    session.run_policy(inputs, "gang-scheduler", SPEC.options, charged=charged)
    out = io.StringIO()
    write_csv(charged.ledger.rows("day"), out)
    header, sums = _csv_sums(out.getvalue())
    assert tuple(header) == COLUMNS
    registry = charged.metrics.registry
    counted = {}
    for family in registry.collect():
        if family.name == "gang_scheduler_allocated_gpu_seconds":
            for s in family.samples:
                if s.name.endswith("_total"):
                    counted[(s.labels["queue"], s.labels["namespace"], s.labels["pool"])] = s.value
    assert len(counted) >= 2 and set(sums) == set(counted)  # several teams were charged
    for key, (gpu_hours, cost) in sums.items():
        labels = dict(zip(("queue", "namespace", "pool"), key, strict=True))
        assert math.isclose(gpu_hours, counted[key] / 3600, rel_tol=1e-6)
        assert math.isclose(cost, registry.get_sample_value(
            "gang_scheduler_gpu_cost_total", {**labels, "currency": "EUR"}) or 0.0,
            rel_tol=1e-6)
        price = session.pricing_config(inputs.pricing).price(key[2])  # the pool's, or --price
        assert math.isclose(cost, gpu_hours * price, rel_tol=1e-6)


def test_simulate_writes_the_chargeback_csv(tmp_path: Path) -> None:
    bill = tmp_path / "bill.csv"
    assert main(["simulate", "--no-progress", "--limit", "20", "--policy", "fifo-gang",
                 "--price", "2", "--chargeback", str(bill),
                 "--chargeback-start", "2026-12-31"]) == 0
    lines = bill.read_text().splitlines()
    assert lines[0] == ",".join(COLUMNS)
    periods = {line.split(",")[0] for line in lines[1:]}
    assert "2026-12-31" in periods and periods <= {"2026-12-31", *(f"2027-01-{d:02}"
                                                                    for d in range(1, 32))}


@pytest.mark.parametrize(("extra", "message"), [
    (["--chargeback", "x.csv"], "--chargeback: needs exactly one --policy"),
    (["--policy", "fifo-gang", "--chargeback", "/nonexistent/dir/x.csv"],
     "--chargeback /nonexistent/dir/x.csv: its directory /nonexistent/dir does not exist"),
    (["--policy", "fifo-gang", "--chargeback-start", "2026-12-01"],
     "--chargeback-start: only meaningful with --chargeback"),
])
def test_chargeback_flags_that_cannot_work_are_named(
        extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--no-progress", "--limit", "5", *extra]) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_a_bad_start_date_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["simulate", "--chargeback-start", "2026-13-01"])
    assert "--chargeback-start: must be a date YYYY-MM-DD, got '2026-13-01'" in \
        capsys.readouterr().err
