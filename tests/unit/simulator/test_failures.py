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
    from simulator.actuator import SimulatedCluster

    nodes = cluster(1)
    sim = Simulation(nodes, [], make_preset("gang-scheduler", default_queues(["team"], nodes)),
                     SimulationOptions(failures=FailureModel(mtbf_hours={"a100": 10.0},
                                                             checkpoint_write_seconds=60.0)))
    sim._young_daly()
    assert isinstance(sim.cluster, SimulatedCluster)
    write, mtbf = sim.cluster.young_daly or (0.0, 0.0)
    assert (write, mtbf) == (60.0, 36_000.0)  # sqrt(2 * 60 * 36000) ~ 2078 s for one node
