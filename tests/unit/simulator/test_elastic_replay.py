"""Elastic gangs in a replay: the simulator's PodGroup says the job's minimum, the feed reads
it and the same ``decide`` starts the job at what fits, grows it, and has a preemptor take
members above its minimum back (no simulator branch: only the cluster carries it out)."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
import structlog

from simulator.engine import Simulation, SimulationOptions
from simulator.policies import default_queues, make_preset
from simulator.trace import TraceJob
from tests.unit.simulator.test_engine import cluster, job

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def test_an_elastic_job_starts_small_grows_and_gives_members_back() -> None:
    # Four 8-GPU nodes. "other" holds two until 500; "el" (4 pods, minimum 2) comes at 10
    # and starts on the other two at once, grows to 4 when "other" ends; "hi" (priority
    # 100, 2 pods) arrives at 1000 and takes two of el's members back; el runs on at its
    # minimum, grows back when hi ends, and finishes.
    el = replace(job("el", 10, 4, 8, duration=3000), min_pods=2)
    jobs = [job("other", 0, 2, 8, duration=500), el,
            job("hi", 1000, 2, 8, priority=100, duration=200)]
    nodes = cluster(4)
    sim = Simulation(nodes, jobs, make_preset("gang-scheduler", default_queues(
        (j.queue for j in jobs), nodes)), SimulationOptions())
    result = sim.run()
    out = {o.job_id: o for o in result.outcomes}
    assert out["el"].start_time is not None and out["el"].start_time < 100
    busy = {s.time: s.busy_gpus for s in result.samples}
    assert busy[10] == 32  # other's 16 and el's minimum, 16
    assert busy[500.0] == 32  # other ended: el grew to its 4 pods
    assert busy[1200.0] == 32  # hi ended: el grew back
    assert out["el"].preemptions == 0 and out["el"].end_time is not None
    assert sim.cluster.jobs["el"].shrinks == 1
    assert out["hi"].start_time is not None and out["hi"].start_time < 1100
    assert out["other"].preemptions == 0


def test_min_pods_is_validated() -> None:
    with pytest.raises(ValueError, match="min_pods must be between 1 and its 4 pods, got 5"):
        replace(job("el", 0, 4, 8), min_pods=5)


def test_an_elastic_job_is_not_below_its_minimum_at_start() -> None:
    # Room for one pod only: a job of minimum 2 does not start with one.
    el: TraceJob = replace(job("el", 0, 4, 8, duration=100), min_pods=2)
    nodes = cluster(1)
    sim = Simulation(nodes, [el], make_preset("gang-scheduler", default_queues(
        ["team"], nodes)), SimulationOptions())
    out = {o.job_id: o for o in sim.run().outcomes}
    assert out["el"].start_time is None
