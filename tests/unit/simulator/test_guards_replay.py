"""The runaway guards in a replay: the simulator runs the same ``decide``, and its clock
wakes when a guard acts (a runtime limit, a budget period's end) even if nothing else
happens then."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
import structlog

from policies.guards import Budget, Guards, Period
from policies.queues import QueueSet
from simulator.engine import Simulation, SimulationOptions, SimulationResult
from simulator.policies import default_queues, make_preset
from simulator.trace import TraceJob
from tests.unit.simulator.test_engine import cluster, job

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

DAY = 86400.0


def replay(policy: str, jobs: list[TraceJob], guards: Guards, nodes: int = 1
           ) -> SimulationResult:
    ns = cluster(nodes)
    base = default_queues((j.queue for j in jobs), ns)
    queues = QueueSet.of(replace(q, guards=guards) if q.name == "team" else q for q in base)
    return Simulation(ns, jobs, make_preset(policy, queues), SimulationOptions()).run()


def starts(res: SimulationResult) -> list[float]:
    """The jobs' first starts, sorted (-1: never started)."""
    return sorted(-1.0 if o.start_time is None else o.start_time for o in res.outcomes)


@pytest.mark.parametrize("policy", ["fifo-gang", "gang-scheduler"])
def test_a_runaway_job_is_stopped_at_its_limit_and_the_next_starts_then(policy: str) -> None:
    # One 8-GPU node: "long" would run 10,000 s, its queue allows 500; "next" waits for it.
    jobs = [job("long", 0, 1, 8, duration=10_000), job("next", 10, 1, 8, duration=100)]
    res = replay(policy, jobs, Guards(max_runtime_seconds=500))
    out = {o.job_id: o for o in res.outcomes}
    assert out["long"].stopped and out["long"].end_time is None
    assert out["long"].gpu_seconds_lost == 500 * 8
    # Nothing else happens at 500 s: the clock woke for the guard.
    assert out["next"].start_time == 500 and out["next"].end_time == 600
    assert not out["next"].stopped


def test_a_queue_over_its_daily_budget_starts_nothing_until_the_next_day() -> None:
    # 4 GPU-h a day; each job holds the 8-GPU node for 30 min = 4 GPU-h. The trace starts on
    # Thursday 1970-01-01 00:00 UTC (epoch 0).
    jobs = [job(f"j{i}", 0, 1, 8, duration=1800) for i in range(3)]
    res = replay("gang-scheduler", jobs, Guards(budget=Budget(4, Period.DAY)))
    assert starts(res) == [0, DAY, 2 * DAY]  # never started while the day's budget was used up
    assert all(o.end_time is not None for o in res.outcomes)


def test_running_cap_in_a_replay() -> None:
    jobs = [job(f"j{i}", 0, 1, 1, duration=100) for i in range(4)]
    res = replay("gang-scheduler", jobs, Guards(max_running_gangs=2))
    assert starts(res) == [0, 0, 100, 100]


def test_without_guards_the_clock_wakes_for_nothing_new() -> None:
    jobs = [job("a", 0, 1, 8, duration=1000), job("b", 5, 1, 8, duration=10)]
    plain = replay("gang-scheduler", jobs, Guards())
    ns = cluster(1)
    again = Simulation(ns, jobs, make_preset("gang-scheduler", default_queues(["team"], ns)),
                       SimulationOptions()).run()
    assert plain.cycles == again.cycles and plain.events == again.events
    assert plain.outcomes == again.outcomes


def test_the_limit_counts_a_jobs_runs_across_a_preemption() -> None:
    """"long" runs 300 s, is preempted by "high" (100 s), and runs again: its queue's 500 s
    count both runs, so it is stopped 200 s into the second, not 500 s."""
    jobs = [job("long", 0, 1, 8, duration=10_000),
            job("high", 300, 1, 8, duration=100, priority=100)]
    res = replay("gang-scheduler", jobs, Guards(max_runtime_seconds=500))
    out = {o.job_id: o for o in res.outcomes}
    assert out["long"].preemptions == 2  # preempted, then stopped by the guard
    assert out["long"].stopped and out["long"].stop_time == 600.0
