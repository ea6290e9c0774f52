"""Small builders for placement tests: nodes in racks and blocks, gangs of roles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.model import (
    Gang,
    Node,
    PodRequirements,
    Role,
    RunningGang,
    Taint,
    Toleration,
    TopologyConstraint,
    TopologyMode,
)
from scheduler.model.pods import NodeSelectorTerm
from scheduler.model.resources import Resources

BLOCK = "topology.gangscheduler.io/block"
RACK = "topology.gangscheduler.io/rack"
HOST = "kubernetes.io/hostname"


def node(name: str, gpu: int = 8, cpu: int = 64, mem_gi: int = 512, *, rack: str | None = None,
         block: str | None = None, labels: Mapping[str, str] | None = None,
         taints: Sequence[Taint] = (), unschedulable: bool = False, ready: bool = True,
         pods: int = 110) -> Node:
    all_labels = dict(labels or {})
    if rack is not None:
        all_labels[RACK] = rack
    if block is not None:
        all_labels[BLOCK] = block
    alloc = Resources({"nvidia.com/gpu": gpu, "cpu": cpu * 1000, "memory": mem_gi << 30,
                       "pods": pods})
    return Node.build(name, alloc, all_labels, tuple(taints), unschedulable, ready=ready)


def requirements(gpu: int = 0, cpu_m: int = 1000, mem_gi: int = 1, *,
                 selector: Mapping[str, str] | None = None,
                 terms: Sequence[NodeSelectorTerm] = (),
                 tolerations: Sequence[Toleration] = ()) -> PodRequirements:
    req = Resources({"nvidia.com/gpu": gpu, "cpu": cpu_m, "memory": mem_gi << 30})
    return PodRequirements(req, dict(selector or {}), tuple(terms), tuple(tolerations))


def role(name: str, count: int, gpu: int = 0, cpu_m: int = 1000, mem_gi: int = 1, *,
         min_count: int | None = None, **kw: object) -> Role:
    return Role(name, count, requirements(gpu, cpu_m, mem_gi, **kw),  # type: ignore[arg-type]
                min_count=min_count)


def gang(*roles: Role, name: str = "g", level: str | None = None,
         mode: TopologyMode = TopologyMode.REQUIRED) -> Gang:
    topo = TopologyConstraint(level, mode) if level else None
    return Gang(id=f"ns/{name}", uid=f"uid-{name}", namespace="ns", name=name, queue="q",
                roles=tuple(roles), topology=topo)


def busy(name: str, usage: Mapping[str, int], gang_name: str | None = None) -> RunningGang:
    """A running gang using *usage* (``{node: gpus}``), one pod per node."""
    g = gang(role("w", 1), name=gang_name or f"busy-{name}")
    allocs = tuple((n, Resources({"nvidia.com/gpu": gpus, "pods": 1}))
                   for n, gpus in sorted(usage.items()))
    return RunningGang(g, allocs, start_time=0.0)
