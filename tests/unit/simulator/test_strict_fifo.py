"""The simulator runs the same StrictFIFO rule as the live scheduler: a head that can never
start (a 16-GPU pod on 8-GPU nodes) does not block its queue for the whole trace."""

from __future__ import annotations

import dataclasses

from policies.queues import QueueingPolicy, QueueingStrategy, QueueSet
from simulator.engine import Simulation, SimulationOptions
from simulator.policies import default_queues, make_preset
from tests.unit.simulator.test_engine import cluster, job


def test_a_never_fitting_head_does_not_block_a_strict_queue_in_a_simulation() -> None:
    nodes = cluster(2)
    jobs = [job("huge", 0, 1, 16), job("small", 1, 1, 8, duration=100.0)]
    queues = default_queues(["team"], nodes)
    strict = QueueSet.of(
        dataclasses.replace(q, queueing=QueueingPolicy(QueueingStrategy.STRICT_FIFO))
        if q.name == "team" else q for q in queues)
    result = Simulation(nodes, jobs, make_preset("gang-scheduler", strict),
                        SimulationOptions()).run()
    ends = {o.job_id: o.end_time for o in result.outcomes}
    assert ends == {"huge": None, "small": 101.0}
