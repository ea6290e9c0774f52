"""The trace record every loader produces, and the error every loader raises.

Why a record of its own instead of the scheduler's `Gang`: a trace describes *work* (when a job
arrives, how long it runs uninterrupted, what its pods ask for), not Kubernetes objects. The engine
turns a `TraceJob` into pods and a gang when it arrives; loaders never need the domain model, so
they stay fast and testable on their own.

Invariants (checked on construction, so a buggy loader or a hand-written job fails loudly):
submit_time >= 0, duration > 0, at least one role, every role has count >= 1 and non-negative
resources, role names unique within a job, checkpoint_interval > 0 when given.
Every loader returns jobs sorted by ``(submit_time, job_id)``; `sort_jobs` is the one place that
order is defined.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


class TraceError(ValueError):
    """A trace input is malformed.

    The message names the file, the 1-based line (when the input has lines), the column or
    field, and the reason: ``philly.csv:1234: num_gpus: not an integer: 'x'``.
    """

    def __init__(self, path: str, line: int | None, column: str, reason: str) -> None:
        self.path = path
        self.line = line
        self.column = column
        self.reason = reason
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {column}: {reason}" if column else f"{where}: {reason}")


@dataclass(frozen=True, slots=True)
class TraceRole:
    """Identical pods of one job (e.g. 4 workers with 8 GPUs each)."""

    name: str
    count: int
    gpus: int
    cpu_millis: int
    memory_bytes: int
    gpu_models: tuple[str, ...] = ()  # acceptable GPU models / pools; empty = any
    #: The pods claim their GPUs as DRA devices (a ResourceClaim each, from a template) rather
    #: than requesting ``nvidia.com/gpu``.
    devices: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("role name must not be empty")
        if self.count < 1:
            raise ValueError(f"role {self.name}: count must be >= 1, got {self.count}")
        if self.gpus < 0 or self.cpu_millis < 0 or self.memory_bytes < 0:
            raise ValueError(f"role {self.name}: resources must be >= 0")
        if self.devices and self.gpus == 0:
            raise ValueError(f"role {self.name}: claims GPUs as devices but asks for none")


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace: a gang of one or more roles that all start together."""

    job_id: str
    submit_time: float  # seconds from trace start
    duration: float  # seconds of work when running uninterrupted
    queue: str  # team / virtual cluster
    roles: tuple[TraceRole, ...]
    priority: int = 0
    checkpoint_interval: float | None = None  # seconds; None = never checkpoints
    #: A notebook or debugging session: its pods carry ``gangscheduler.io/tier: interactive``
    #: (``policies.interactive``), and *user* as ``gangscheduler.io/user`` when given.
    interactive: bool = False
    user: str = ""
    #: An elastic job's minimum pods (``PodGroup.minMember`` below its pods: it starts with
    #: what fits from there and grows, and a preemptor may take the pods above it back);
    #: None: every pod is required.
    min_pods: int | None = None
    #: What kind of work this is (``notebook``, ``hpo``, ``training``, or any word a trace
    #: uses); kept through to the job's outcome so the report can compare classes. Empty:
    #: the trace does not say (the report then groups jobs by size, ``report.classes``).
    job_class: str = ""

    def __post_init__(self) -> None:
        if not self.job_id:
            raise ValueError("job_id must not be empty")
        if not (self.submit_time >= 0 and math.isfinite(self.submit_time)):
            raise ValueError(f"job {self.job_id}: submit_time must be finite and >= 0")
        if not (self.duration > 0 and math.isfinite(self.duration)):
            raise ValueError(f"job {self.job_id}: duration must be finite and > 0")
        if not self.roles:
            raise ValueError(f"job {self.job_id}: needs at least one role")
        if len({r.name for r in self.roles}) != len(self.roles):
            raise ValueError(f"job {self.job_id}: role names must be unique")
        if self.min_pods is not None and not 1 <= self.min_pods <= self.total_pods:
            raise ValueError(f"job {self.job_id}: min_pods must be between 1 and its "
                             f"{self.total_pods} pods, got {self.min_pods}")
        ci = self.checkpoint_interval
        if ci is not None and not (ci > 0 and math.isfinite(ci)):
            raise ValueError(f"job {self.job_id}: checkpoint_interval must be > 0")

    @property
    def total_gpus(self) -> int:
        return sum(r.count * r.gpus for r in self.roles)

    @property
    def total_pods(self) -> int:
        return sum(r.count for r in self.roles)

    @property
    def gpu_seconds(self) -> float:
        """Useful work of the job: what conservation checks compare GPU-hours against."""
        return self.total_gpus * self.duration


def sort_jobs(jobs: Iterable[TraceJob]) -> tuple[TraceJob, ...]:
    """The canonical trace order: by submit time, ties broken by job id."""
    return tuple(sorted(jobs, key=lambda j: (j.submit_time, j.job_id)))


def roles_for_gpus(
    total_gpus: int,
    gpus_per_worker: int,
    cpu_millis_per_gpu: int,
    memory_bytes_per_gpu: int,
    gpu_models: tuple[str, ...] = (),
) -> tuple[TraceRole, ...]:
    """Split a job's GPUs into pods the way multi-node training runs them.

    Up to *gpus_per_worker* GPUs: one pod. More: ``total // gpus_per_worker`` full workers, and,
    when the total is not a multiple, one extra pod with the leftover GPUs as a second role
    ``worker-rest``. The leftover pod is modelled honestly rather than rounded up to a full
    worker, so the GPUs the simulator allocates equal the GPUs the trace recorded. CPU and memory
    scale with the GPUs of each pod. A 0-GPU job becomes one pod with *cpu_millis_per_gpu* and
    *memory_bytes_per_gpu* (the cost of one GPU's host share).
    """
    if gpus_per_worker < 1:
        raise ValueError("gpus_per_worker must be >= 1")
    if total_gpus <= 0:
        return (TraceRole("worker", 1, 0, cpu_millis_per_gpu, memory_bytes_per_gpu, gpu_models),)
    if total_gpus <= gpus_per_worker:
        return (
            TraceRole(
                "worker",
                1,
                total_gpus,
                cpu_millis_per_gpu * total_gpus,
                memory_bytes_per_gpu * total_gpus,
                gpu_models,
            ),
        )
    full, rest = divmod(total_gpus, gpus_per_worker)
    roles = [
        TraceRole(
            "worker",
            full,
            gpus_per_worker,
            cpu_millis_per_gpu * gpus_per_worker,
            memory_bytes_per_gpu * gpus_per_worker,
            gpu_models,
        )
    ]
    if rest:
        roles.append(
            TraceRole(
                "worker-rest",
                1,
                rest,
                cpu_millis_per_gpu * rest,
                memory_bytes_per_gpu * rest,
                gpu_models,
            )
        )
    return tuple(roles)
