"""Report figures on a small scenario computed by hand.

Scenario: an 8-GPU cluster from t=0 to t=160. Jobs a and b (4 GPUs each, different queues)
arrive at 0; a runs 10..110; b waits, is preempted once (1 GPU-hour lost) and runs 110..160.
While a runs, the other 4 GPUs of its node are stranded.
"""

from __future__ import annotations

import json

import pytest

from simulator.metrics import (
    JobOutcome,
    PolicyReport,
    Pricing,
    UtilizationSample,
    compute_report,
)

OUTCOMES = (
    JobOutcome("a", "qa", 4, 0.0, 10.0, 110.0),
    JobOutcome("b", "qb", 4, 0.0, 110.0, 160.0, preemptions=1, gpu_seconds_lost=3600.0),
)
SAMPLES = (
    UtilizationSample(0.0, 8, 0, 0, 0, {}),
    UtilizationSample(10.0, 8, 4, 4, 4, {"qa": 4}, {"qa": {"x": 4}}),
    UtilizationSample(110.0, 8, 4, 4, 0, {"qb": 4}, {"qb": {"y": 4}}),
    UtilizationSample(160.0, 8, 0, 0, 0, {}),
)


@pytest.fixture
def report() -> PolicyReport:
    return compute_report(
        "gang", OUTCOMES, SAMPLES, entitlements={"qa": 0.5, "qb": 0.5},
        pricing=Pricing(per_gpu_hour=2.0), end_time=160.0,
    )


def test_utilization_and_fragmentation_are_ratios_of_integrals(report: PolicyReport) -> None:
    assert report.horizon_seconds == 160.0
    assert report.gpu_hours_total == pytest.approx(1280 / 3600)
    assert report.gpu_utilization == pytest.approx(600 / 1280)
    assert report.gpu_allocation == pytest.approx(600 / 1280)
    assert report.stranded_gpus_mean == pytest.approx(2.5)  # 4 GPUs for 100 of 160 s
    assert report.stranded_fraction == pytest.approx(400 / 1280)


def test_delays_and_jct(report: PolicyReport) -> None:
    assert (report.jobs, report.started, report.finished, report.never_started) == (2, 2, 2, 0)
    d = report.queueing_delay
    assert (d.count, d.mean, d.p50, d.max) == (2, 60.0, 60.0, 110.0)
    assert d.p95 == pytest.approx(105.0)
    assert report.jct.mean == 135.0 and report.jct.p99 == pytest.approx(159.5)


def test_fairness_shares_and_jain(report: PolicyReport) -> None:
    qa, qb = report.queues
    assert qa.mean_share == pytest.approx(400 / 1280) and qb.mean_share == pytest.approx(200 / 1280)
    # x = share / entitlement = [0.625, 0.3125] -> (0.9375^2) / (2 * 0.48828125) = 0.9
    assert report.jain_index == pytest.approx(0.9)
    # Fair shares: both owed 4 GPUs while both wait or run; qb owed 4 after qa finished.
    assert qa.mean_fair_share == pytest.approx(440 / 1280)
    assert qb.mean_fair_share == pytest.approx(640 / 1280)
    # Jain of allocated/fair per interval: [0,10) 1.0 (both at 0), [10,110) 0.5, [110,160) 1.0.
    assert report.jain_index_demand == pytest.approx((10 * 1 + 100 * 0.5 + 50 * 1) / 160)


def test_equal_shares_have_jain_one() -> None:
    outcomes = [JobOutcome(q, q, 4, 0.0, 0.0, 10.0) for q in ("x", "y")]
    samples = [UtilizationSample(0.0, 8, 8, 8, 0, {"x": 4, "y": 4}),
               UtilizationSample(10.0, 8, 0, 0, 0, {})]
    report = compute_report("p", outcomes, samples)  # no entitlements: equal
    assert report.jain_index == 1.0 and report.jain_index_demand == 1.0
    assert [q.entitlement for q in report.queues] == [0.5, 0.5]


def test_preemption_cost_and_gpu_hours(report: PolicyReport) -> None:
    assert report.preemptions == 1 and report.gpu_hours_lost == 1.0
    qa, qb = report.queues
    assert qa.gpu_hours == pytest.approx(400 / 3600) and qa.cost == pytest.approx(800 / 3600)
    assert report.total_cost == pytest.approx(1200 / 3600)
    assert qb.preemptions == 1 and qb.queueing_delay_p95 == 110.0


def test_goodput_is_busy_time_less_the_work_thrown_away(report: PolicyReport) -> None:
    assert report.gpu_goodput is not None and report.gpu_utilization is not None
    lost = report.gpu_hours_lost / report.gpu_hours_total  # the preempted job's redone work
    assert report.gpu_goodput == pytest.approx(report.gpu_utilization - lost)
    assert report.gpu_goodput < report.gpu_utilization


def test_per_pool_prices_apply_where_the_pool_is_known() -> None:
    report = compute_report(
        "gang", OUTCOMES, SAMPLES, pricing=Pricing(per_gpu_hour=2.0, per_pool={"x": 3.0}),
        end_time=160.0,
    )
    qa, qb = report.queues
    assert qa.cost == pytest.approx(400 / 3600 * 3.0)  # pool x at 3.0
    assert qb.cost == pytest.approx(200 / 3600 * 2.0)  # pool y unpriced -> default


def test_never_started_and_partial_gangs_are_counted() -> None:
    outcomes = [
        JobOutcome("done", "q", 1, 0.0, 0.0, 5.0),
        JobOutcome("stuck", "q", 16, 1.0, None, None, gpu_seconds_idle_partial=7200.0),
        JobOutcome("running", "q", 1, 2.0, 3.0, None),
    ]
    samples = [UtilizationSample(0.0, 8, 1, 1, 0, {"q": 1})]
    report = compute_report("per-pod", outcomes, samples, end_time=10.0)
    assert (report.started, report.finished, report.never_started) == (2, 1, 1)
    assert report.queueing_delay.count == 2 and report.queueing_delay.max == 1.0
    assert report.jct.count == 1
    assert report.gpu_hours_idle_partial == 2.0
    assert report.queues[0].never_started == 1


def test_report_round_trips_through_json(report: PolicyReport) -> None:
    text = json.dumps(report.to_dict(), allow_nan=False)
    assert PolicyReport.from_dict(json.loads(text)) == report


def test_empty_timeline_gives_undefined_not_zero() -> None:
    report = compute_report("p", [], [])
    assert report.gpu_utilization is None and report.jain_index_demand is None
    assert report.queueing_delay.p95 is None
