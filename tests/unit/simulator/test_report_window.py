"""The figures a capacity planner misread before: utilization over the arrival window and its
steady state beside the whole horizon, the backlog, and the generated "what this means"."""

from __future__ import annotations

import pytest

from simulator.metrics import JobOutcome, PolicyReport, UtilizationSample, compute_report
from simulator.report.meaning import what_this_means


def report(policy: str = "gang-scheduler", wait: float = 10.0) -> PolicyReport:
    """Two 10-GPU-hour-ish jobs on 10 GPUs: submitted at 0 and 100 s; the cluster fills at
    *wait* s, stays full until 200 s, then drains; the horizon ends at 400 s."""
    outcomes = (JobOutcome("a", "q", 10, 0.0, wait, 100.0),
                JobOutcome("b", "q", 10, 100.0, 100.0, 200.0))
    samples = (UtilizationSample(0.0, 10, 0, 0, 0, pending_gpus=10),
               UtilizationSample(wait, 10, 10, 10, 0, pending_gpus=0),
               UtilizationSample(200.0, 10, 0, 0, 0, pending_gpus=0))
    return compute_report(policy, outcomes, samples, end_time=400.0)


def test_utilization_over_the_arrival_window_its_steady_state_and_the_horizon() -> None:
    r = report()
    assert (r.arrival_start, r.arrival_end) == (0.0, 100.0)
    assert r.gpu_utilization == pytest.approx(10 * 190 / (10 * 400))  # the drain included
    assert r.gpu_utilization_arrivals == pytest.approx(10 * 90 / (10 * 100))
    assert r.gpu_utilization_steady == pytest.approx(1.0)  # from 10 s: warm-up left out
    assert r.backlog_gpus_mean == pytest.approx(10 * 10 / 100)


def test_what_this_means_names_the_best_policy_and_reads_the_figures() -> None:
    slow, fast = report("fifo-gang", wait=50.0), report("gang-scheduler", wait=10.0)
    text = " ".join(what_this_means([slow, fast]))
    assert text.startswith("gang-scheduler made jobs wait least")
    assert "90.0% busy under gang-scheduler (100.0% once warmed up)" in text
    assert "whole-horizon 47.5%" in text and "0.08 h after the last arrival" in text
    assert "1.0 GPUs of submitted work waited" in text and "capacity to spare" in text
    assert what_this_means([]) == []


def test_a_backlog_above_the_cluster_says_it_is_too_small() -> None:
    outcomes = (JobOutcome("a", "q", 40, 0.0, None, None),
                JobOutcome("b", "q", 40, 100.0, None, None))
    samples = (UtilizationSample(0.0, 10, 0, 0, 0, pending_gpus=40),
               UtilizationSample(100.0, 10, 0, 0, 0, pending_gpus=80))
    text = " ".join(what_this_means([compute_report("p", outcomes, samples, end_time=200.0)]))
    assert "work arrived faster than it could be served" in text
