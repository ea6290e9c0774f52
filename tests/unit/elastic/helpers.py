"""Builders for elastic gangs: a Job's pods (some bound, some waiting) grouped the way the
scheduler groups them, so the gang's minimum comes from the sources users write."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.feed.grouping import GangSet, GroupingConfig, build_gangs
from scheduler.model import PodRequirements, RunningGang
from scheduler.model.resources import GPU, Resources
from scheduler.model.workloads import (
    MIN_MEMBER_ANNOTATION,
    QUEUE_LABEL,
    JobInfo,
    OwnerRef,
    PodInfo,
    PodPhase,
)
from tests.unit.policies.builders import nodes

NOW = 10_000.0
NODES = nodes("a100", 4)  # a100-0000 .. a100-0003, 8 GPUs each


def job_pods(name: str, on: Sequence[str | None], *, gpus: int = 8, queue: str = "q",
             priority: int = 0, min_member: str | None = None) -> list[PodInfo]:
    """A Job's pods ``name-0`` ..., one per entry of *on*: the node it is bound to, or None
    (waiting). *min_member*: the ``gangscheduler.io/min-member`` annotation of its pods."""
    owner = OwnerRef("Job", name, f"uid-{name}")
    notes = {MIN_MEMBER_ANNOTATION: min_member} if min_member is not None else {}
    return [PodInfo(uid=f"uid-{name}-{i}", namespace="ns", name=f"{name}-{i}",
                    requirements=PodRequirements(Resources({GPU: gpus, "cpu": 1000})),
                    scheduler_name="gang-scheduler", node_name=node or "",
                    phase=PodPhase.RUNNING if node else PodPhase.PENDING,
                    labels={QUEUE_LABEL: queue}, annotations=notes, owner=owner,
                    creation_time=0.0, started_at=0.0 if node else None, priority=priority)
            for i, node in enumerate(on)]


def grouped(pods: Sequence[PodInfo], parallelism: Mapping[str, int]) -> GangSet:
    """*pods* as the scheduler groups them; *parallelism*: Job name -> its parallelism."""
    jobs = {f"ns/{n}": JobInfo("ns", n, f"uid-{n}", parallelism=p)
            for n, p in parallelism.items()}
    return build_gangs(list(pods), {}, jobs, GroupingConfig())


def running_of(gangs: GangSet) -> list[RunningGang]:
    return list(gangs.running)
