"""Builders for semi-preemptible queues: a tree ``org`` with the semi-preemptible queue ``a``
(its quota, its gangs) and the lender ``b`` that reclaims, on the four 8-GPU nodes of the
elastic tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from policies.queues import PolicySet, Queue
from scheduler.decide.cycle import decide
from scheduler.decide.plan import CyclePlan
from scheduler.model.workloads import PodInfo
from scheduler.world.snapshot import Snapshot
from tests.unit.elastic.helpers import NODES, NOW, grouped, job_pods
from tests.unit.policies.builders import SOLVE, policies, queue

N0, N1, N2, N3 = (n.name for n in NODES)


def semi(q: Queue, on: bool = True) -> Queue:
    """*q* with ``spec.preemption.semiPreemptible`` set to *on*."""
    return replace(q, preemption=replace(q.preemption, semi_preemptible=on))


def tree(a_quota: int, b_quota: int, *, on: bool = True) -> PolicySet:
    """``org`` over ``a`` (semi-preemptible when *on*) and ``b``, GPU quotas in pool a100."""
    return policies(queue("org"), semi(queue("a", "org", quota={"a100": a_quota}), on),
                    queue("b", "org", quota={"a100": b_quota}))


def started(pods: Sequence[PodInfo], at: float) -> list[PodInfo]:
    """*pods*, the bound ones started at *at*."""
    return [replace(p, started_at=at) if p.node_name else p for p in pods]


def job(name: str, on: Sequence[str | None], *, queue: str = "a", at: float = 0.0,
        gpus: int = 8, priority: int = 0, min_member: int | None = None) -> list[PodInfo]:
    """A Job's pods (``tests.unit.elastic.helpers.job_pods``) started at *at*."""
    return started(job_pods(name, on, gpus=gpus, queue=queue, priority=priority,
                            min_member=None if min_member is None else str(min_member)), at)


def plan_of(pods: list[PodInfo], parallelism: dict[str, int], pol: PolicySet) -> CyclePlan:
    gangs = grouped(pods, parallelism)
    return decide(Snapshot(NODES, gangs.running), gangs.pending, pol, NOW, solver=SOLVE)
