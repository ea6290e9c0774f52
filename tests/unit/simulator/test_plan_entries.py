"""The simulated cluster carries out the same plan entries as the live actuator, from the plan
alone: evictions by the victims' pods, rollbacks of partly bound gangs, give-ups."""

from __future__ import annotations

import math

from scheduler.decide.plan import (
    Bind,
    CyclePlan,
    Eviction,
    Rollback,
    RollbackCause,
)
from scheduler.feed.cache import ClusterCache
from scheduler.feed.grouping import GroupingConfig
from scheduler.model import PodRef
from scheduler.placement.types import Assignment, Placement
from simulator.actuator import SimulatedCluster
from simulator.clock import VirtualClock
from simulator.engine import SCHEDULER_NAME
from simulator.workload import job_objects
from tests.unit.policies.builders import victim
from tests.unit.simulator.test_engine import cluster, job


def setup() -> tuple[SimulatedCluster, ClusterCache, tuple[PodRef, ...]]:
    nodes = cluster(2)
    cache = ClusterCache(GroupingConfig(scheduler_name=SCHEDULER_NAME), assume_ttl=math.inf)
    for n in nodes:
        cache.upsert_node(n)
    sim = SimulatedCluster(nodes, cache, VirtualClock())
    trace_job = job("j", 0.0, pods=2, gpus=8)
    objs = job_objects(trace_job, scheduler_name=SCHEDULER_NAME, now=0.0, runtime_estimate=None)
    sim.add_job(trace_job, objs.pods)
    assert objs.group is not None
    cache.upsert_group(objs.group)
    for pod in objs.pods:
        cache.upsert_pod(pod)
    return sim, cache, tuple(PodRef(p.namespace, p.name, p.uid) for p in objs.pods)


def bind(refs: tuple[PodRef, ...]) -> CyclePlan:
    nodes = [f"a100-{i:04d}" for i in range(len(refs))]
    placement = Placement("team/j", tuple(Assignment("worker", n, 1) for n in nodes))
    return CyclePlan(now=0.0, binds=(Bind("team/j", "team", placement,
                                          tuple(zip(refs, nodes, strict=True))),))


def test_a_rollback_returns_the_bound_members_to_pending() -> None:
    sim, cache, refs = setup()
    sim.apply(bind(refs[:1]), 0.0)  # a partly bound gang (as a crash mid-bind leaves it)
    assert sim.partial == {"j"} and sim.allocated == 8
    sim.apply(CyclePlan(now=5.0, rollbacks=(Rollback("team/j", refs[:1], "cannot finish",
                                                        RollbackCause.NO_ROOM),)),
              5.0)
    assert sim.partial == set() and sim.allocated == 0
    assert all(not p.node_name for p in cache.gang_pods("team/j"))
    assert sim.jobs["j"].failures == 0  # it never ran: nothing lost, nothing failed


def test_an_eviction_stops_the_jobs_of_the_victims_pods() -> None:
    sim, cache, refs = setup()
    sim.apply(bind(refs), 0.0)
    assert sim.running_jobs == 1
    sim.apply(CyclePlan(now=50.0, evictions=(Eviction(victim("team/j", refs), "team/x", ""),)),
              50.0)
    assert sim.running_jobs == 0 and sim.jobs["j"].preemptions == 1
    assert all(not p.node_name for p in cache.gang_pods("team/j"))
