"""A simulation session: load the inputs once, run each policy, turn results into reports.

This is the glue the ``simulate`` command and the capacity sweep share. Inputs are named by
path (so a sweep worker process can reload them) and every run is deterministic for a seed.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from policies.queues import QueueSet, SchedulerPolicy
from policies.validation import load_policies
from scheduler import clusterspec
from scheduler.model import Node
from simulator.engine import FailureModel, Simulation, SimulationOptions
from simulator.loaders import load_trace
from simulator.metrics import PolicyReport, PolicyRun, Pricing, compute_report
from simulator.policies import default_queues, make_preset
from simulator.trace import TraceJob
from simulator.workload import nodes_from_spec


@dataclass(frozen=True, slots=True)
class SessionSpec:
    """Everything that defines a simulation, by value or by path (picklable for sweeps)."""

    cluster: str
    trace: str
    queues: str | None = None
    trace_options: Mapping[str, Any] = field(default_factory=dict)
    options: SimulationOptions = field(default_factory=SimulationOptions)
    price_per_gpu_hour: float = 0.0
    #: Override of one pool's node count (what the capacity sweep varies).
    pool_override: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class Inputs:
    spec: clusterspec.ClusterSpec
    nodes: list[Node]
    queues: QueueSet
    jobs: tuple[TraceJob, ...]
    entitlements: Mapping[str, float]
    pricing: Pricing
    #: The policy file's SchedulerPolicy (the defaults without one), for ``gang-scheduler``.
    scheduler: SchedulerPolicy | None = None


def quiet_scheduler_logs() -> None:
    """The scheduler logs a line per busy cycle; a simulation runs thousands of them."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def load_inputs(s: SessionSpec) -> Inputs:
    spec = clusterspec.load(s.cluster)
    if s.pool_override is not None:
        pool, count = s.pool_override
        if pool not in {p.name for p in spec.pools}:
            known = ", ".join(p.name for p in spec.pools)
            raise ValueError(f"--sweep: unknown pool {pool!r} (pools: {known})")
        spec = dataclasses.replace(spec, pools=tuple(
            dataclasses.replace(p, count=count) if p.name == pool else p for p in spec.pools))
    nodes = nodes_from_spec(spec)
    jobs = tuple(load_trace(s.trace, **dict(s.trace_options)))
    # A policy file with no Queue (only a SchedulerPolicy) keeps the default queues.
    policies = load_policies([s.queues]) if s.queues else None
    queues = (policies.queues if policies is not None and len(policies.queues)
              else default_queues((j.queue for j in jobs), nodes))
    return Inputs(spec, nodes, queues, jobs, entitlements(queues, nodes),
                  pricing(spec, s.price_per_gpu_hour),
                  policies.scheduler if policies is not None else None)


def entitlements(queues: QueueSet, nodes: Sequence[Node]) -> dict[str, float]:
    """Each leaf queue's nominal GPUs as a fraction of the cluster's GPUs."""
    total = sum(n.allocatable.gpus for n in nodes) or 1
    out: dict[str, float] = {}
    for q in queues:
        if queues.is_leaf(q.name):
            out[q.name] = sum(pq.nominal.gpus for pq in q.quotas) / total
    return out


def pricing(spec: clusterspec.ClusterSpec, default: float) -> Pricing:
    per_pool = {p.name: p.cost_per_gpu_hour for p in spec.pools if p.cost_per_gpu_hour is not None}
    return Pricing(per_gpu_hour=default, per_pool=per_pool)


def run_policy(inputs: Inputs, policy: str, options: SimulationOptions,
               progress: Callable[[int, int], None] | None = None) -> PolicyRun:
    sim = Simulation(inputs.nodes, inputs.jobs,
                     make_preset(policy, inputs.queues, inputs.scheduler), options)
    result = sim.run(progress)
    report = compute_report(policy, result.outcomes, result.samples,
                            entitlements=inputs.entitlements, pricing=inputs.pricing,
                            end_time=result.end_time)
    return PolicyRun(report=report, outcomes=result.outcomes, samples=result.samples)


@dataclass(frozen=True, slots=True)
class SizedRun:
    """``run_one(size)`` for the capacity sweep: picklable, reloads inputs in the worker."""

    spec: SessionSpec
    pool: str
    policy: str

    def __call__(self, size: int) -> PolicyReport:
        quiet_scheduler_logs()
        s = dataclasses.replace(self.spec, pool_override=(self.pool, size))
        return run_policy(load_inputs(s), self.policy, s.options).report


def describe_inputs(inputs: Inputs, s: SessionSpec) -> str:
    gpus = sum(n.allocatable.gpus for n in inputs.nodes)
    return (f"{len(inputs.jobs):,} jobs from {Path(s.trace).name} on {len(inputs.nodes)} nodes "
            f"({gpus:,} GPUs), {len(inputs.queues)} queues")


__all__ = ["FailureModel", "Inputs", "SessionSpec", "SizedRun", "load_inputs", "run_policy"]
