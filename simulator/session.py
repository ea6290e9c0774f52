"""A simulation session: load the inputs once, run each policy, turn results into reports.

This is the glue the ``simulate`` command and the capacity sweep share. Inputs are named by
path (so a sweep worker process can reload them) and every run is deterministic for a seed.
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from policies.queues import QueueSet, SchedulerPolicy
from policies.validation import load_policies
from scheduler.model import GPU_PRODUCT_LABEL, Node
from scheduler.model.demand import gpus_of
from scheduler.report.chargeback import Ledger
from scheduler.run.config import PricingConfig
from scheduler.run.metrics import SchedulerMetrics
from scheduler.world import clusterspec
from simulator.devices import NO_DEVICES, ClusterDevices, cluster_devices, node_gpus
from simulator.engine import FailureModel, Simulation, SimulationOptions
from simulator.loaders import load_trace
from simulator.metrics import PolicyReport, PolicyRun, Pricing, compute_report
from simulator.policies import default_queues, make_preset
from simulator.trace import TraceJob, TraceRole
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
    currency: str = "USD"
    #: Override of one pool's node count (what the capacity sweep varies).
    pool_override: tuple[str, int] | None = None
    #: ``--gpus-as-devices``: the cluster offers the GPUs of its ``draDevices`` pools as DRA
    #: devices (``gpusAsDevices``) and every job's pods claim their GPUs as devices.
    gpus_as_devices: bool = False
    #: ``--batch-only``: every job is batch, the trace's interactive tier dropped (the
    #: baseline against which the tier's effect is measured).
    batch_only: bool = False
    #: The input files by value, ``(name as given, content)`` (``carry_files``): a run on
    #: another machine reads these, not whatever that machine has under the same path.
    carried: tuple[tuple[str, bytes], ...] = ()


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
    devices: ClusterDevices = NO_DEVICES


def trace_options(limit: int | None = None, time_scale: float | None = None,
                  seed: int | None = None) -> dict[str, Any]:
    """The ``load_trace`` options a command line gave (those left unset are not passed)."""
    given = {"limit": limit, "time_scale": time_scale, "seed": seed}
    return {k: v for k, v in given.items() if v is not None}


def quiet_scheduler_logs() -> None:
    """The scheduler logs a line per busy cycle; a simulation runs thousands of them."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def carry_files(s: SessionSpec) -> SessionSpec:
    """*s* carrying the files it names (cluster, trace, queues), for runs on other machines
    (a Ray cluster's workers), where those paths may not exist or may hold other data. A
    shipped sample named by name travels with the code and is not carried."""
    named = dict.fromkeys(n for n in (s.cluster, s.trace, s.queues)
                          if n is not None and Path(n).is_file())
    return dataclasses.replace(s, carried=tuple((n, Path(n).read_bytes()) for n in named))


def load_inputs(s: SessionSpec) -> Inputs:
    if s.carried:  # written where this machine can read them, under their own file names
        with tempfile.TemporaryDirectory(prefix="gang-scheduler-inputs-") as tmp:
            where: dict[str, str] = {}
            for i, (name, content) in enumerate(s.carried):
                path = Path(tmp, str(i), Path(name).name)
                path.parent.mkdir()
                path.write_bytes(content)
                where[name] = str(path)
            return load_inputs(dataclasses.replace(
                s, cluster=where.get(s.cluster, s.cluster), trace=where.get(s.trace, s.trace),
                queues=None if s.queues is None else where.get(s.queues, s.queues), carried=()))
    spec = clusterspec.load(s.cluster)
    if s.pool_override is not None:
        pool, count = s.pool_override
        if pool not in {p.name for p in spec.pools}:
            known = ", ".join(p.name for p in spec.pools)
            raise ValueError(f"--sweep: unknown pool {pool!r} (pools: {known})")
        spec = dataclasses.replace(spec, pools=tuple(
            dataclasses.replace(p, count=count) if p.name == pool else p for p in spec.pools))
    jobs = tuple(load_trace(s.trace, **dict(s.trace_options)))
    if s.gpus_as_devices:
        spec = dataclasses.replace(spec, gpus_as_devices=True)
        jobs = tuple(claim_devices(j) for j in jobs)
    if s.batch_only:
        jobs = tuple(dataclasses.replace(j, interactive=False) if j.interactive else j
                     for j in jobs)
    nodes = nodes_from_spec(spec)
    devices = cluster_devices(spec)
    # A policy file with no Queue (only a SchedulerPolicy) keeps the default queues.
    policies = load_policies([s.queues]) if s.queues else None
    queues = (policies.queues if policies is not None and len(policies.queues)
              else default_queues((j.queue for j in jobs), nodes, devices.gpus))
    return Inputs(spec, nodes, queues, jobs, entitlements(queues, nodes, devices),
                  pricing(spec, s.price_per_gpu_hour, s.currency),
                  policies.scheduler if policies is not None else None, devices)


def claim_devices(job: TraceJob) -> TraceJob:
    """*job* with every role that asks for GPUs claiming them as devices."""
    return dataclasses.replace(job, roles=tuple(
        dataclasses.replace(r, devices=True) if r.gpus else r for r in job.roles))


def entitlements(queues: QueueSet, nodes: Sequence[Node],
                 devices: ClusterDevices = NO_DEVICES) -> dict[str, float]:
    """Each leaf queue's nominal GPUs as a fraction of the cluster's GPUs."""
    total = sum(node_gpus(nodes, devices).values()) or 1
    out: dict[str, float] = {}
    for q in queues:
        if queues.is_leaf(q.name):
            out[q.name] = sum(gpus_of(pq.nominal) for pq in q.quotas) / total
    return out


def pricing(spec: clusterspec.ClusterSpec, default: float, currency: str = "USD") -> Pricing:
    per_pool = {p.name: p.cost_per_gpu_hour for p in spec.pools if p.cost_per_gpu_hour is not None}
    return Pricing(per_gpu_hour=default, per_pool=per_pool, currency=currency)


def pricing_config(p: Pricing) -> PricingConfig:
    """The simulation's prices as the live scheduler's configuration (for its metrics)."""
    return PricingConfig(currency=p.currency, gpu_hour=dict(p.per_pool),
                         default_gpu_hour=p.per_gpu_hour)


@dataclass(frozen=True, slots=True)
class Charged:
    """What a run counts its chargeback into: the scheduler's metrics on their own registry
    (the counters) and the ledger the same accrual sums per day (the CSV)."""

    metrics: SchedulerMetrics
    ledger: Ledger


def charged(inputs: Inputs) -> Charged:
    """Fresh metrics (their own registry) at the run's prices and a ledger in its currency,
    for ``run_policy(..., charged=)``."""
    prices = pricing_config(inputs.pricing)
    return Charged(metrics=SchedulerMetrics(CollectorRegistry(), prices),
                   ledger=Ledger(prices.currency))


def run_policy(inputs: Inputs, policy: str, options: SimulationOptions,
               progress: Callable[[int, int], None] | None = None,
               charged: Charged | None = None) -> PolicyRun:
    """*charged*: the metrics and ledger the live scheduler's own accrual counts this run
    into (``Simulation``); None: none."""
    sim = Simulation(inputs.nodes, inputs.jobs,
                     make_preset(policy, inputs.queues, inputs.scheduler), options,
                     inputs.devices, metrics=charged.metrics if charged else None,
                     ledger=charged.ledger if charged else None)
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


@dataclass(frozen=True, slots=True)
class IntervalRun:
    """``run_one(interval)`` for the checkpoint sweep: every job without an interval of its
    own checkpoints every *interval* seconds; picklable, reloads inputs in the worker."""

    spec: SessionSpec
    policy: str

    def __call__(self, interval: int) -> PolicyReport:
        quiet_scheduler_logs()
        options = dataclasses.replace(self.spec.options, checkpoint_interval=float(interval))
        return run_policy(load_inputs(self.spec), self.policy, options).report


def check_queue_pools(queues: QueueSet, pools: Sequence[str], where: str) -> list[str]:
    """Warnings for quotas naming pools the cluster does not have (they are ignored).

    A capacity planner often reuses one queue file across cluster variants, so a quota for a
    pool this cluster lacks is a warning, not an error. But a queue tree whose quotas name no
    pool of the cluster at all could never run anything (a tree may only use the pools it
    has quota in), so that raises ``ValueError``. *where* prefixes every message (the file).
    """
    known = set(pools)
    listed = ", ".join(pools)
    warnings = [f"{where}: queue {q.name}: quota for pool {pq.pool!r} ignored, the cluster "
                f"has no such pool (the cluster's pools: {listed})"
                for q in queues for pq in q.quotas if pq.pool not in known]
    named: dict[str, set[str]] = {}  # root -> every pool named by a quota in its tree
    for q in queues:
        named.setdefault(queues.root_of(q.name), set()).update(pq.pool for pq in q.quotas)
    for q in queues:
        tree = named.get(queues.root_of(q.name), set())
        if queues.is_leaf(q.name) and tree and not tree & known:
            raise ValueError(f"{where}: queue {q.name}: no usable pool: its quotas name only "
                             f"{', '.join(sorted(tree))} (the cluster's pools: {listed}), "
                             "so its jobs could never run")
    return warnings


def check_job_queues(inputs: Inputs, where: str) -> str | None:
    """One line naming the jobs whose queue the --queues file (*where*) does not define.

    The simulator puts a job's pods in the queue (and namespace) named after the trace's team
    or virtual cluster. Jobs naming a queue that does not exist, a parent queue, or a queue
    that does not admit that namespace would be simulated anyway and end up "never started",
    which reads like a capacity problem; this says so up front. Raises ``ValueError`` when it
    is every job: nothing would run.
    """
    queues = inputs.queues
    unfit: dict[str, int] = {}  # queue name -> jobs
    for job in inputs.jobs:
        q = queues.get(job.queue)
        if q is None or not queues.is_leaf(q.name) or not q.admits_namespace(job.queue):
            unfit[job.queue] = unfit.get(job.queue, 0) + 1
    if not unfit:
        return None
    n = sum(unfit.values())
    most = sorted(unfit, key=lambda name: (-unfit[name], name))
    named = ", ".join(most[:5]) + (f" and {len(most) - 5} more" if len(most) > 5 else "")
    leaves = ", ".join(q.name for q in queues if queues.is_leaf(q.name)) or "none"
    line = (f"{where}: {n:,} of {len(inputs.jobs):,} jobs name queues it does not define, or "
            f"define as a parent or for other namespaces ({named}); its leaf queues: {leaves}. "
            "Name the queues after the trace's teams (with spec.namespaces listing the same "
            "name), or leave out --queues for one queue per team")
    if n == len(inputs.jobs):
        raise ValueError(f"{line}; nothing would run")
    return f"{line}; those jobs will be reported as never started"


def check_jobs_fit(inputs: Inputs, *, whole_cluster: bool = True) -> str | None:
    """One line saying which jobs can never fit the cluster, or None when all may fit.

    A pod fits only on a node with at least its GPUs (of an acceptable GPU model), and a gang
    needs at most the GPUs of all the nodes its roles may use; jobs that fail either test are
    simulated anyway and end up "never started", this says so up front. *whole_cluster*
    False skips the second test (a sweep changes the cluster's size). Raises ``ValueError``
    when no job at all can fit: nothing would be left to simulate.
    """
    gpus = node_gpus(inputs.nodes, inputs.devices)
    # A role's GPUs come either from nvidia.com/gpu or from devices, never both.
    of_kind = {False: {n.name: gpus_of(n.allocatable) for n in inputs.nodes},
               True: {n.name: inputs.devices.gpus.get(n.name, 0) for n in inputs.nodes}}
    # Per GPU-model restriction, the nodes a role may use: worked out once per distinct
    # restriction, not per job (the full Philly trace has 82,247 jobs and one restriction).
    by_models: dict[tuple[frozenset[str], bool], frozenset[str]] = {}

    def eligible(role: TraceRole) -> tuple[frozenset[str], bool]:
        models = frozenset(role.gpu_models or ())
        key = (models, role.devices)
        if key not in by_models:
            by_models[key] = frozenset(n.name for n in inputs.nodes if not models
                                       or n.labels.get(GPU_PRODUCT_LABEL) in models)
        return by_models[key], role.devices

    largest: dict[tuple[frozenset[str], bool], int] = {}  # node set -> GPUs of its largest
    totals: dict[tuple[frozenset[str], bool], int] = {}  # node set -> GPUs of all its nodes

    def largest_of(names: tuple[frozenset[str], bool]) -> int:
        if names not in largest:
            largest[names] = max((of_kind[names[1]][n] for n in names[0]), default=0)
        return largest[names]

    def total_of(names: tuple[frozenset[str], bool]) -> int:
        if names not in totals:
            totals[names] = sum(of_kind[names[1]][n] for n in names[0])
        return totals[names]

    largest_node = max(gpus.values(), default=0)
    cluster_gpus = sum(gpus.values())
    per_pod: dict[int, int] = {}  # GPUs per pod -> jobs
    per_gang: dict[int, int] = {}  # GPUs of the gang -> jobs
    for job in inputs.jobs:
        too_big = [r.gpus for r in job.roles if r.gpus > largest_of(eligible(r))]
        if too_big:
            per_pod[max(too_big)] = per_pod.get(max(too_big), 0) + 1
            continue
        if whole_cluster:
            # A gang mixing both kinds is judged by its first role's (a warning, no more).
            usable = (eligible(job.roles[0]) if len(job.roles) == 1
                      else (frozenset().union(*(eligible(r)[0] for r in job.roles)),
                            job.roles[0].devices))
            if job.total_gpus > total_of(usable):
                per_gang[job.total_gpus] = per_gang.get(job.total_gpus, 0) + 1
    unfit = sum(per_pod.values()) + sum(per_gang.values())
    if not unfit:
        return None
    parts = []
    if per_pod:
        sizes = ", ".join(f"{g}" for g in sorted(per_pod))
        parts.append(f"{sum(per_pod.values()):,} need more GPUs per pod ({sizes}) than any node "
                     f"(of their GPU model) has (largest node: {largest_node} GPUs)")
    if per_gang:
        sizes = ", ".join(f"{g:,}" for g in sorted(per_gang))
        parts.append(f"{sum(per_gang.values()):,} are gangs of more GPUs ({sizes}) than the "
                     f"cluster has for them (whole cluster: {cluster_gpus:,} GPUs)")
    line = f"{unfit:,} of {len(inputs.jobs):,} jobs can never fit this cluster: {'; '.join(parts)}"
    if unfit == len(inputs.jobs):
        raise ValueError(f"{line}; nothing to simulate")
    return f"{line}; they will be reported as never started"


def describe_inputs(inputs: Inputs, s: SessionSpec) -> str:
    gpus = sum(node_gpus(inputs.nodes, inputs.devices).values())
    return (f"{len(inputs.jobs):,} jobs from {Path(s.trace).name} on {len(inputs.nodes)} nodes "
            f"({gpus:,} GPUs), {len(inputs.queues)} queues")


__all__ = ["FailureModel", "Inputs", "IntervalRun", "SessionSpec", "SizedRun",
           "check_job_queues", "check_jobs_fit", "check_queue_pools", "load_inputs", "run_policy"]
