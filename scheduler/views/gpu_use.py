"""A running gang's ranks, as ``scheduler.report.utilisation`` joins them with GPU samples.

One place turns the cache's pods into the join's ranks, for the views (``GangRow.use``,
``QueueRow.idle_gpus``) and the metrics alike: a rank is a pod on a node that has not
finished, numbered as the views number it (``ranks_of``), and its GPUs come through the demand
seam (``scheduler.model.demand``: a GPU from a device claim counts too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.model import RunningGang
from scheduler.model.demand import role_demand
from scheduler.model.workloads import PodInfo
from scheduler.report.utilisation import GangUse, GpuSample, RankInput, Thresholds, gang_use
from scheduler.views.state import GangRow, ranks_of

Samples = Mapping[tuple[str, str], Sequence[GpuSample]]


@dataclass(frozen=True, slots=True)
class GpuSamples:
    """What the views join running gangs with: samples by (namespace, pod), and when a GPU
    is idle and a rank lags."""

    samples: Samples
    thresholds: Thresholds = field(default_factory=Thresholds)


def _gpus_per_pod(rg: RunningGang, pods: Iterable[PodInfo]) -> dict[str, int]:
    """Each pod's GPUs: its role's demand when a role lists it (device claims included),
    else the pod's own."""
    by_name = {ref.name: role.demand.gpus for role in rg.gang.roles for ref in role.pods}
    return {p.name: by_name.get(p.name, role_demand(p).gpus) for p in pods}


def use_of(rg: RunningGang, pods: Sequence[PodInfo], source: GpuSamples) -> GangUse | None:
    """The gang's GPU use; None when none of its pods has a series (nothing known)."""
    on_nodes = [p for p in pods if p.occupies_node]
    gpus = _gpus_per_pod(rg, on_nodes)
    ranks = [RankInput(r.rank, r.pod, gpus[r.pod]) for r in ranks_of(on_nodes)]
    use = gang_use(rg.gang.namespace, ranks, rg.gang.size, source.samples, source.thresholds)
    return use if use.utilisation is not None else None


def idle_by_queue(rows: Iterable[GangRow]) -> dict[str, int]:
    """Idle allocated GPUs per queue, of the gangs whose use is known."""
    out: dict[str, int] = {}
    for g in rows:
        if g.use is not None:
            out[g.queue] = out.get(g.queue, 0) + g.use.idle_gpus
    return out


def idle_by_pool(rg: RunningGang, pods: Sequence[PodInfo], use: GangUse,
                 pool_of: Mapping[str, str]) -> dict[tuple[str, str, str], int]:
    """The gang's idle GPUs per (queue, namespace, pool): each rank's on its node's pool
    (*pool_of*: node -> pool)."""
    node_of = {p.name: p.node_name for p in pods}
    out: dict[tuple[str, str, str], int] = {}
    for r in use.ranks:
        if r.idle_gpus:
            key = (rg.gang.queue, rg.gang.namespace, pool_of.get(node_of.get(r.pod, ""), ""))
            out[key] = out.get(key, 0) + r.idle_gpus
    return out
