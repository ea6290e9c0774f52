"""The interactive tier in a replay: the simulator's pods carry the tier and user labels,
the feed reads them and the same ``decide`` acts on them (no simulator branch)."""

from __future__ import annotations

import logging
from dataclasses import replace

import structlog

from policies.interactive import NO_CAPS, InteractivePolicy
from policies.queues import QueueSet
from simulator.engine import Simulation, SimulationOptions, SimulationResult
from simulator.policies import default_queues, make_preset
from simulator.trace import TraceJob
from tests.unit.simulator.test_engine import cluster, job

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def notebook(job_id: str, t: float, gpus: int, user: str, duration: float = 300.0
             ) -> TraceJob:
    return replace(job(job_id, t, 1, gpus, duration=duration), interactive=True, user=user)


def replay(jobs: list[TraceJob], caps: InteractivePolicy = NO_CAPS,
           nodes: int = 1) -> SimulationResult:
    ns = cluster(nodes)
    queues = QueueSet.of(replace(q, interactive=caps)
                         for q in default_queues((j.queue for j in jobs), ns))
    return Simulation(ns, jobs, make_preset("gang-scheduler", queues), SimulationOptions()).run()


def test_a_notebook_preempts_batch_and_batch_of_higher_priority_waits_for_it() -> None:
    # One 8-GPU node: "train" fills it; the notebook arrives at 100 and takes 2 GPUs by
    # preempting it; "urgent" (priority 100) arrives at 150 and does not take the notebook.
    jobs = [job("train", 0, 1, 8, duration=1000), notebook("nb", 100, 2, "alice"),
            job("urgent", 150, 1, 8, priority=100, duration=100)]
    out = {o.job_id: o for o in replay(jobs).outcomes}
    assert out["train"].preemptions == 1
    assert out["nb"].start_time is not None and out["nb"].start_time < 150
    assert out["nb"].preemptions == 0 and out["nb"].end_time is not None
    # urgent waits for the notebook's end (at about 100 + 300), then runs before train.
    assert out["urgent"].start_time is not None
    assert out["urgent"].start_time >= out["nb"].end_time


def test_a_users_second_notebook_waits_for_the_first_under_the_cap() -> None:
    jobs = [notebook("a1", 0, 2, "alice"), notebook("a2", 10, 2, "alice"),
            notebook("b1", 10, 2, "bob")]
    out = {o.job_id: o for o in replay(jobs, InteractivePolicy(max_gpus_per_user=2)).outcomes}
    assert out["b1"].start_time is not None and out["b1"].start_time < 60
    assert out["a2"].start_time is not None and out["a1"].end_time is not None
    assert out["a2"].start_time >= out["a1"].end_time
