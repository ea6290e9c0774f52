"""The simulation engine: the same scheduler code under a virtual clock.

Deadlock of the per-pod baseline, no partial gangs under gang policies, conservation of
GPU-hours, determinism, and preemption losing only un-checkpointed work.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import structlog

from scheduler.world import clusterspec
from simulator.engine import Simulation, SimulationOptions
from simulator.loaders import load_trace
from simulator.policies import default_queues, make_preset
from simulator.trace import TraceJob, TraceRole
from simulator.workload import nodes_from_spec

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def cluster(nodes: int, gpus: int = 8) -> list:
    spec = clusterspec.parse({"pools": [{"name": "a100", "count": nodes, "gpusPerNode": gpus}]})
    return nodes_from_spec(spec)


def job(job_id: str, t: float, pods: int, gpus: int, duration: float = 100.0,
        queue: str = "team", priority: int = 0, checkpoint: float | None = None) -> TraceJob:
    return TraceJob(job_id=job_id, submit_time=t, duration=duration, queue=queue,
                    roles=(TraceRole("worker", pods, gpus, 1000, 1 << 30),), priority=priority,
                    checkpoint_interval=checkpoint)


def run(policy: str, nodes: list, jobs: list[TraceJob], **opts: Any):
    queues = default_queues((j.queue for j in jobs), nodes)
    return Simulation(nodes, jobs, make_preset(policy, queues), SimulationOptions(**opts)).run()


def test_per_pod_deadlocks_where_gangs_do_not() -> None:
    # Two 8-worker jobs of 1 GPU each on 12 GPUs (3 nodes x 4): the deadlock picture.
    nodes = cluster(3, gpus=4)
    jobs = [job("a", 0, 8, 1), job("b", 0, 8, 1)]
    per_pod = run("per-pod", nodes, jobs)
    assert all(o.end_time is None for o in per_pod.outcomes), "per-pod should deadlock"
    assert sum(o.gpu_seconds_idle_partial for o in per_pod.outcomes) == 0  # horizon ends at 0
    assert per_pod.samples[-1].allocated_gpus == 12 and per_pod.samples[-1].busy_gpus == 0
    for policy in ("fifo-gang", "gang-scheduler"):
        res = run(policy, nodes, jobs)
        ends = sorted(o.end_time for o in res.outcomes)
        assert ends == [100.0, 200.0], policy


def test_gang_policies_never_run_a_partial_gang() -> None:
    nodes = cluster(4)
    jobs = [job(f"j{i}", i * 10.0, pods=1 + i % 4, gpus=8, duration=50 + i) for i in range(30)]
    for policy in ("fifo-gang", "gang-scheduler"):
        res = run(policy, nodes, jobs)
        for s in res.samples:
            assert s.allocated_gpus == s.busy_gpus, (policy, s)  # nothing allocated while idle
        assert all(o.end_time is not None for o in res.outcomes)


def test_conservation_of_gpu_hours() -> None:
    """Busy GPU-seconds equal the jobs' GPU-seconds plus the work lost to preemption."""
    nodes = cluster(2)
    jobs = [job("low", 0, 2, 8, duration=1000, priority=0, checkpoint=300),
            job("high", 500, 2, 8, duration=100, priority=100)]
    res = run("gang-scheduler", nodes, jobs)
    busy = sum(a.busy_gpus * (b.time - a.time) for a, b in zip(res.samples, res.samples[1:],
                                                             strict=False))
    useful = sum(j.gpu_seconds for j in jobs)
    lost = sum(o.gpu_seconds_lost for o in res.outcomes)
    assert busy == pytest.approx(useful + lost)
    low = next(o for o in res.outcomes if o.job_id == "low")
    assert low.preemptions == 1
    assert low.gpu_seconds_lost == pytest.approx(200 * 16)  # 500 s run, checkpoint at 300


def test_deterministic_on_a_real_trace_slice() -> None:
    jobs = list(load_trace("simulator/samples/philly_sample.csv"))[:150]
    nodes = cluster(8)
    a = run("gang-scheduler", nodes, jobs)
    b = run("gang-scheduler", nodes, jobs)
    assert a.outcomes == b.outcomes
    assert a.samples == b.samples
