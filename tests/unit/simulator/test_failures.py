"""Node failures: jobs on a failed node lose the work since their last checkpoint and rerun."""

from __future__ import annotations

import logging

import pytest
import structlog

from simulator.engine import FailureModel, Simulation, SimulationOptions
from simulator.policies import default_queues, make_preset
from tests.unit.simulator.test_engine import cluster, job

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def run(options: SimulationOptions):
    nodes = cluster(2)
    jobs = [job(f"j{i}", i * 5.0, pods=1, gpus=8, duration=20_000.0, checkpoint=600.0)
            for i in range(2)]
    sim = Simulation(nodes, jobs, make_preset("gang-scheduler",
                                              default_queues((j.queue for j in jobs), nodes)),
                     options)
    return jobs, sim.run()


def test_failures_cost_work_and_time_but_conserve_gpu_hours() -> None:
    options = SimulationOptions(seed=3, failures=FailureModel(mtbf_hours={"a100": 2.0},
                                                              repair_seconds=300.0))
    jobs, res = run(options)
    assert all(o.end_time is not None for o in res.outcomes)
    lost = sum(o.gpu_seconds_lost for o in res.outcomes)
    assert lost > 0, "with a 2 h MTBF and 5.5 h jobs some work must be lost"
    # Work lost is bounded by the checkpoint interval per failure hit.
    for o in res.outcomes:
        assert o.end_time - o.start_time >= 20_000.0
    busy = sum(a.busy_gpus * (b.time - a.time)
               for a, b in zip(res.samples, res.samples[1:], strict=False))
    assert busy == pytest.approx(sum(j.gpu_seconds for j in jobs) + lost)


def test_same_seed_same_failures() -> None:
    options = SimulationOptions(seed=7, failures=FailureModel(mtbf_hours={"a100": 3.0}))
    assert run(options)[1].outcomes == run(options)[1].outcomes


def test_young_daly_interval_is_used_without_a_job_interval() -> None:
    from simulator.actuator import young_daly

    nodes = cluster(1)
    jobs = [job("solo", 0.0, pods=1, gpus=8, duration=5000.0)]
    sim = Simulation(nodes, jobs, make_preset("gang-scheduler", default_queues(["team"], nodes)),
                     SimulationOptions(failures=FailureModel(mtbf_hours={"a100": 10.0},
                                                             checkpoint_write_seconds=60.0)))
    sim._young_daly()
    sim._arrive(jobs[0], 0.0)
    interval = sim.cluster._checkpoint_interval(sim.cluster.jobs["solo"])
    assert interval == young_daly(60.0, 36_000.0) == pytest.approx(2078.46, abs=0.01)


def test_every_checkpoint_costs_its_write_time() -> None:
    """3,000 s of work, a checkpoint every 1,000 s taking 100 s: two are written (none at the
    end), so the job runs 3,200 s, 200 s of them writing, on all its 8 GPUs."""
    nodes = cluster(1)
    jobs = [job("solo", 0.0, pods=1, gpus=8, duration=3000.0, checkpoint=1000.0)]
    sim = Simulation(nodes, jobs, make_preset("gang-scheduler", default_queues(["team"], nodes)),
                     SimulationOptions(failures=FailureModel(checkpoint_write_seconds=100.0)))
    (outcome,) = sim.run().outcomes
    assert (outcome.start_time, outcome.end_time) == (0.0, 3200.0)
    assert outcome.gpu_seconds_checkpointing == 200.0 * 8
    assert outcome.gpu_seconds_lost == 0.0


def test_a_failure_keeps_the_work_of_completed_checkpoints_only() -> None:
    """Interval 1,000 s, write 100 s: a failure 2,500 s into the run has seen two completed
    checkpoints (at 1,100 s and 2,200 s of running), keeps 2,000 s of work and loses the
    300 s since, on 8 GPUs; the rerun does the remaining 1,000 s without writing."""
    nodes = cluster(1)
    jobs = [job("solo", 0.0, pods=1, gpus=8, duration=3000.0, checkpoint=1000.0)]
    sim = Simulation(nodes, jobs, make_preset("gang-scheduler", default_queues(["team"], nodes)),
                     SimulationOptions(failures=FailureModel(checkpoint_write_seconds=100.0,
                                                             repair_seconds=500.0)))
    from simulator.clock import EventKind

    sim.clock.push(2500.0, EventKind.NODE_FAILURE, nodes[0].name)
    (outcome,) = sim.run().outcomes
    assert outcome.gpu_seconds_lost == 300.0 * 8
    assert outcome.gpu_seconds_checkpointing == 200.0 * 8
    assert outcome.end_time == 2500.0 + 500.0 + 1000.0  # repaired, then the last 1,000 s
