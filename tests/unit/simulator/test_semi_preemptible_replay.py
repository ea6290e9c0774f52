"""Semi-preemptible queues in a replay: the same ``decide`` as the live scheduler keeps what
runs within queue a's quota when queue b reclaims, with no simulator branch (only the queue
field differs between the runs). Four 8-GPU nodes; a and b under one parent."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
import structlog

from policies.queues import PoolQuota, Queue, QueueSet
from scheduler.model.resources import GPU, Resources
from simulator.engine import Simulation, SimulationOptions
from simulator.metrics import JobOutcome
from simulator.policies import ROOT_QUEUE, make_preset
from simulator.trace import TraceJob
from tests.unit.simulator.test_engine import cluster, job

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def _queues(a_gpus: int, b_gpus: int, semi: bool) -> QueueSet:
    def team(name: str, gpus: int, semi: bool = False) -> Queue:
        q = Queue(name=name, parent=ROOT_QUEUE, namespaces=(name,), quotas=(
            PoolQuota("a100", Resources({GPU: gpus}), frozenset({GPU})),))
        return replace(q, preemption=replace(q.preemption, semi_preemptible=semi))
    return QueueSet.of([Queue(name=ROOT_QUEUE), team("a", a_gpus, semi), team("b", b_gpus)])


def _replay(jobs: list[TraceJob], queues: QueueSet) -> tuple[dict[str, JobOutcome], Simulation]:
    sim = Simulation(cluster(4), jobs, make_preset("gang-scheduler", queues),
                     SimulationOptions())
    return {o.job_id: o for o in sim.run().outcomes}, sim


@pytest.mark.parametrize(("semi", "preempted"), [(True, "big"), (False, "s")])
def test_reclaim_takes_the_gang_above_the_quota_not_the_cheaper_one_within_it(
        semi: bool, preempted: str) -> None:
    # a (16 GPUs of quota) runs "big" (24 GPUs, from 0) and "s" (8, from 500): 16 borrowed.
    # b's "bx" (8 GPUs) reclaims at 1000. The cheapest to lose is s (8 GPUs x 500 s against
    # 24 x 1000), but s's GPUs are within a's quota (big's 24 never fit in it): with the
    # field, big goes.
    jobs = [job("big", 0, 3, 8, duration=5000, queue="a"),
            job("s", 500, 1, 8, duration=5000, queue="a"),
            job("bx", 1000, 1, 8, duration=100, queue="b")]
    out, _ = _replay(jobs, _queues(16, 16, semi))
    assert {j: out[j].preemptions for j in out} == {
        "big": int(preempted == "big"), "s": int(preempted == "s"), "bx": 0}
    start = out["bx"].start_time
    assert start is not None and start < 1100


def test_reclaim_never_takes_an_elastic_gangs_minimum_within_the_quota() -> None:
    # "el" (4 pods, minimum 2) fills the cluster; a's 16 GPUs hold its minimum. b (24 GPUs
    # of quota) wants 24 at 100: the 16 above el's minimum do not suffice, so with the field
    # bx waits for el to end; without it, el is evicted whole.
    el = replace(job("el", 0, 4, 8, duration=3000, queue="a"), min_pods=2)
    jobs = [el, job("bx", 100, 3, 8, duration=100, queue="b")]
    kept, sim = _replay(jobs, _queues(16, 24, semi=True))
    assert kept["el"].preemptions == 0 and sim.cluster.jobs["el"].shrinks == 0
    start = kept["bx"].start_time
    assert start is not None and start >= 3000
    taken, _ = _replay(jobs, _queues(16, 24, semi=False))
    assert taken["el"].preemptions == 1
    start = taken["bx"].start_time
    assert start is not None and start < 200
