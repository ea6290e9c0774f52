"""Loaders for the Alibaba 2023 GPU trace ("openb", Weng et al., USENIX ATC '23).

Two inputs: the pod list (the workload) and the node list (the cluster it ran on), so that openb
can be replayed on its own cluster. Every openb pod fits on one node, so every pod becomes a
one-pod job: this trace exercises placement quality (packing, fragmentation, GPU models), not
multi-pod gangs.

Pod modelling rules (also in `simulator/README.md`):

- submit time = ``creation_time`` (already seconds from trace start);
- duration = ``deletion_time - scheduled_time``; a pod that was never scheduled in production
  (``pod_phase`` Pending, empty ``scheduled_time``) gets ``deletion_time - creation_time``, its
  whole lifetime, as work (``pending="lifetime"``, the default: the demand was real) or is
  dropped (``pending="skip"``); an empty ``deletion_time`` means the pod outlived the trace and
  runs until the last deletion time in the file; a duration that comes out <= 0 (a pod deleted
  the second it was created) is raised to *min_duration* (1 s) so the pod still arrives;
- ``gpu_milli`` < 1000 with ``num_gpu`` 1 is a fraction of a shared GPU: the gang scheduler
  allocates whole ``nvidia.com/gpu``, so it is rounded up to 1 GPU (``shared_gpus`` in
  `OpenbPods` counts them, so a report can say how much the rounding inflates demand);
- ``gpu_spec`` ``A|B`` lists acceptable GPU models; empty means any;
- the queue is the ``qos`` class (LS, BE, Burstable, Guaranteed), or *queue* if given;
- ``pod_phase`` is not used otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from simulator.loaders.csvrows import iter_rows, parse_int, read_header, require_text
from simulator.trace import TraceError, TraceJob, TraceRole, sort_jobs

POD_COLUMNS = (
    "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "qos", "creation_time",
    "deletion_time", "scheduled_time",
)
POD_OPTIONAL = ("gpu_spec",)
MIB = 2**20


@dataclass(frozen=True, slots=True)
class OpenbPods:
    """The loaded pods plus what the modelling rules changed, for honest reporting."""

    jobs: tuple[TraceJob, ...]
    shared_gpus: int  # pods whose fractional GPU was rounded up to a whole one
    pending_lifetime: int  # never-scheduled pods replayed with their lifetime as duration
    skipped: int  # pods dropped by pending="skip"
    clamped: int  # pods whose duration was raised to min_duration


def load_openb_pods(
    path: str | Path,
    *,
    queue: str | None = None,
    pending: Literal["lifetime", "skip"] = "lifetime",
    min_duration: float = 1.0,
    limit: int | None = None,
) -> OpenbPods:
    """Load an openb pod list into sorted one-pod jobs (see the module docstring for the rules)."""
    if pending not in ("lifetime", "skip"):
        raise ValueError(f"pending must be 'lifetime' or 'skip', got {pending!r}")
    if not min_duration > 0:
        raise ValueError("min_duration must be > 0")
    name = str(path)
    p = Path(path)
    _reject_timeless(p, name)
    raw: list[tuple[int, list[str], dict[str, int]]] = []
    for index, line, cells in iter_rows(p, POD_COLUMNS, POD_OPTIONAL):
        raw.append((line, cells, index))
    trace_end = 0
    for line, cells, index in raw:
        text = cells[index["deletion_time"]].strip()
        if text:
            trace_end = max(trace_end, parse_int(name, line, "deletion_time", text, minimum=0))
    jobs: list[TraceJob] = []
    shared = pending_lifetime = skipped = clamped = 0
    for line, cells, index in raw:
        role, was_shared = _pod_role(name, line, cells, index)
        shared += was_shared
        created = parse_int(name, line, "creation_time", cells[index["creation_time"]], minimum=0)
        sched_text = cells[index["scheduled_time"]].strip()
        del_text = cells[index["deletion_time"]].strip()
        deleted = parse_int(name, line, "deletion_time", del_text, 0) if del_text else trace_end
        if sched_text:
            started = parse_int(name, line, "scheduled_time", sched_text, minimum=0)
            if started < created:
                raise TraceError(name, line, "scheduled_time", f"before creation_time {created}")
        elif pending == "skip":
            skipped += 1
            continue
        else:
            started = created
            pending_lifetime += 1
        if del_text and deleted < created:
            raise TraceError(name, line, "deletion_time", f"before creation_time {created}")
        duration = float(deleted - started)
        if duration < min_duration:
            duration = min_duration
            clamped += 1
        pod_queue = queue or require_text(name, line, "qos", cells[index["qos"]])
        job_id = require_text(name, line, "name", cells[index["name"]])
        jobs.append(TraceJob(job_id, float(created), duration, pod_queue, (role,)))
    ordered = sort_jobs(jobs)
    if limit is not None:
        ordered = ordered[:limit]
    return OpenbPods(ordered, shared, pending_lifetime, skipped, clamped)


def _reject_timeless(p: Path, name: str) -> None:
    if p.is_file() and "name" in (header := read_header(p)) and "creation_time" not in header:
        raise TraceError(
            name, 1, "creation_time",
            "missing column: this pod list has no times (like openb_pod_list_multigpu20.csv) "
            "and cannot be replayed over time",
        )


@dataclass(frozen=True, slots=True)
class PodRow:
    """One row of an openb pod list, checked: the one reading of the ``num_gpu``/``gpu_milli``
    rules, for the replay (``load_openb_pods``) and the packing protocol
    (``simulator.packing``) alike."""

    cpu_milli: int
    memory_mib: int
    gpus: int
    milli: int  # thousandths of each GPU: below 1000 only for a share of one GPU
    models: tuple[str, ...]  # acceptable GPU models (``gpu_spec``); empty: any

    @property
    def shared(self) -> bool:
        """A fraction of one shared GPU."""
        return self.gpus == 1 and self.milli < 1000


def read_pod(name: str, line: int, cells: list[str], index: dict[str, int]) -> PodRow:
    """The pod of one row; ``TraceError`` names the line, the column and the rule broken."""
    cpu = parse_int(name, line, "cpu_milli", cells[index["cpu_milli"]], minimum=0)
    mem = parse_int(name, line, "memory_mib", cells[index["memory_mib"]], minimum=0)
    gpus = parse_int(name, line, "num_gpu", cells[index["num_gpu"]], minimum=0)
    milli = parse_int(name, line, "gpu_milli", cells[index["gpu_milli"]], minimum=0)
    if milli > 1000:
        raise TraceError(name, line, "gpu_milli", f"must be <= 1000, got {milli}")
    if gpus == 0 and milli:
        raise TraceError(name, line, "gpu_milli", f"is {milli} but num_gpu is 0")
    if gpus > 1 and milli != 1000:
        raise TraceError(name, line, "gpu_milli", f"must be 1000 when num_gpu > 1, got {milli}")
    if gpus == 1 and milli == 0:
        raise TraceError(name, line, "gpu_milli", "is 0 but num_gpu is 1")
    spec = cells[index["gpu_spec"]] if "gpu_spec" in index else ""
    return PodRow(cpu, mem, gpus, milli, tuple(m.strip() for m in spec.split("|") if m.strip()))


def _pod_role(
    name: str, line: int, cells: list[str], index: dict[str, int]
) -> tuple[TraceRole, bool]:
    row = read_pod(name, line, cells, index)
    role = TraceRole("pod", 1, row.gpus, row.cpu_milli, row.memory_mib * MIB, row.models)
    return role, row.shared


NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")


@dataclass(frozen=True, slots=True)
class NodeRow:
    """One row of an openb node list, checked (for the cluster description and the packing
    protocol alike)."""

    name: str  # ``sn``
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str  # empty on a CPU-only node


def read_node(file: str, line: int, cells: list[str], index: dict[str, int]) -> NodeRow:
    """The node of one row; ``TraceError`` names the line, the column and the rule broken."""
    name = require_text(file, line, "sn", cells[index["sn"]])
    cpu = parse_int(file, line, "cpu_milli", cells[index["cpu_milli"]], minimum=1)
    mem = parse_int(file, line, "memory_mib", cells[index["memory_mib"]], minimum=1)
    gpus = parse_int(file, line, "gpu", cells[index["gpu"]], minimum=0)
    model = cells[index["model"]].strip()
    if gpus and not model:
        raise TraceError(file, line, "model", "must not be empty on a GPU node")
    return NodeRow(name, cpu, mem, gpus, model)


def load_openb_cluster(path: str | Path, *, name: str = "openb") -> dict[str, object]:
    """Read an openb node list into a cluster description document (the
    `scheduler.world.clusterspec` YAML, as a plain mapping ready for ``yaml.safe_dump``).

    A pool has identical nodes, and openb has several node shapes per GPU model (P100 nodes
    with 2 GPUs and 16 or 64 cores, ...), so there is one pool per (model, shape). A model with a
    single shape gets a pool named after the model (``t4``); otherwise each shape is named
    ``<model>-<gpus>g-<cores>c-<memory>gi``. All pools of a model share ``gpuModel``, which is
    what pods' ``gpu_models`` match. Pools are ordered by model, then by node count (largest
    first). The sn node names are not kept: clusterspec names nodes ``<pool>-<index>``.
    """
    file = str(path)
    shapes: dict[tuple[str, int, int, int], int] = {}
    for index, line, cells in iter_rows(Path(path), NODE_COLUMNS):
        node = read_node(file, line, cells, index)
        key = (node.model, node.gpus, node.cpu_milli, node.memory_mib)
        shapes[key] = shapes.get(key, 0) + 1
    if not shapes:
        raise TraceError(file, None, "", "no nodes")
    per_model: dict[str, int] = {}
    for model, *_ in shapes:
        per_model[model] = per_model.get(model, 0) + 1
    pools = []
    taken: set[str] = set()
    for (model, gpus, cpu, mem), count in sorted(
        shapes.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1:])
    ):
        base = _dns(model) if model else "cpu"
        pool_name = base
        if per_model[model] > 1:
            pool_name = f"{base}-{gpus}g-{math.ceil(cpu / 1000)}c-{math.ceil(mem / 1024)}gi"
        while pool_name in taken:  # two shapes that round to the same name
            pool_name += "-x"
        taken.add(pool_name)
        pool: dict[str, object] = {"name": pool_name, "count": count}
        if model:
            pool["gpuModel"] = model
        pool.update(
            gpusPerNode=gpus,
            cpu=str(cpu // 1000) if cpu % 1000 == 0 else f"{cpu}m",
            memory=f"{mem // 1024}Gi" if mem % 1024 == 0 else f"{mem}Mi",
        )
        pools.append(pool)
    return {"name": name, "pools": pools}


def _dns(text: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")
    return out or "gpu"
