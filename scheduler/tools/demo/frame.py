"""One frame of the demo's view as plain values: queues, gangs, nodes, recent events.

Why a frame: the live view, the ``--no-live`` log and the final summary all draw from the same
few numbers, and a unit test should be able to build a frame by hand and render it. The
builders here turn what the apiserver returned (Queue status, nodes) and what the tracker knows
into rows; they do no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.tools.demo import scenario
from scheduler.tools.demo.track import PodObs, Tracker, compact_reason

RACK_LABEL = "topology.gangscheduler.io/rack"
TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class PoolUse:
    pool: str
    allocated: int
    nominal: int


@dataclass(frozen=True, slots=True)
class QueueRow:
    name: str
    parent: str
    weight: float
    pools: tuple[PoolUse, ...]
    pending: int
    running: int
    fair_share: float
    usage_share: float


@dataclass(frozen=True, slots=True)
class NodeRow:
    name: str
    pool: str
    rack: str
    capacity: int
    used: tuple[tuple[str, int], ...]  # (team, GPUs), sorted by team

    @property
    def used_gpus(self) -> int:
        return sum(g for _, g in self.used)


@dataclass(frozen=True, slots=True)
class GangRow:
    name: str
    team: str
    pool: str
    shape: str  # "8×1": workers × GPUs each
    priority: str
    state: str
    bound: int
    workers: int
    reason: str
    waited: float | None  # first submission -> first start
    preemptions: int
    story: str = ""


@dataclass(frozen=True, slots=True)
class Frame:
    elapsed: float
    speed: float
    done: int
    total: int
    queues: tuple[QueueRow, ...]
    gangs: tuple[GangRow, ...]
    nodes: tuple[NodeRow, ...]
    log: tuple[str, ...] = ()


def _gpus(quantities: Mapping[str, Any] | None) -> int:
    return int(float(str((quantities or {}).get(scenario.GPU, 0))))


def queue_rows(items: Iterable[Mapping[str, Any]]) -> tuple[QueueRow, ...]:
    """Rows from Queue objects (their status is what ``kubectl get queues`` shows); parents
    first, children under them."""
    rows = []
    for q in items:
        spec, status = q.get("spec") or {}, q.get("status") or {}
        # The status has the subtree's quota (a parent's is its children's); the spec only
        # the queue's own, which is all there is before the scheduler's first report.
        nominal = {p["pool"]: _gpus(p.get("nominal")) for p in spec.get("quotas") or ()}
        nominal |= {p["pool"]: _gpus(p["nominal"]) for p in status.get("pools") or ()
                    if "nominal" in p}
        allocated = {p["pool"]: _gpus(p.get("allocated")) for p in status.get("pools") or ()}
        pools = tuple(PoolUse(pool, allocated.get(pool, 0), nominal.get(pool, 0))
                      for pool in sorted(set(nominal) | set(allocated)))
        rows.append(QueueRow(
            str(q["metadata"]["name"]), str(spec.get("parent") or ""),
            float(spec.get("weight", 1)), pools, int(status.get("pendingGangs") or 0),
            int(status.get("admittedGangs") or 0), float(status.get("fairShare") or 0),
            float(status.get("usageShare") or 0)))
    roots = sorted(r.name for r in rows if not r.parent)
    order = {name: (i, "") for i, name in enumerate(roots)}
    for r in rows:
        if r.parent:
            order[r.name] = (order.get(r.parent, (len(roots), ""))[0], r.name)
    return tuple(sorted(rows, key=lambda r: order.get(r.name, (len(roots), r.name))))


def node_rows(items: Iterable[Mapping[str, Any]], pods: Sequence[PodObs],
              pool_label: str = scenario.DEFAULT_POOL_LABEL) -> tuple[NodeRow, ...]:
    """GPU use per node and team, from the demo's bound pods that still have their GPUs."""
    use: dict[str, dict[str, int]] = {}
    for p in pods:
        if p.node and p.phase not in TERMINAL:
            per_team = use.setdefault(p.node, {})
            per_team[p.team] = per_team.get(p.team, 0) + p.gpus
    rows = []
    for n in items:
        meta = n["metadata"]
        labels = meta.get("labels") or {}
        capacity = _gpus((n.get("status") or {}).get("allocatable"))
        rows.append(NodeRow(str(meta["name"]), str(labels.get(pool_label, "")),
                            str(labels.get(RACK_LABEL, "")), capacity,
                            tuple(sorted(use.get(meta["name"], {}).items()))))
    return tuple(sorted(rows, key=lambda r: (r.pool, r.rack, r.name)))


def gang_rows(tracker: Tracker) -> tuple[GangRow, ...]:
    """One row per job, in the scenario's order."""
    rows = []
    for p in tracker.jobs.values():
        s = p.spec
        waited = (p.first_started_at - p.submitted_at
                  if p.first_started_at is not None and p.submitted_at is not None else None)
        bound = sum(1 for o in p.pods if o.node and not o.deleting)
        reason = compact_reason(p.reason) if p.state in ("Waiting", "Requeued") else ""
        rows.append(GangRow(s.name, s.team, s.pool, s.shape, s.priority.removeprefix("gang-"),
                            p.state, bound, s.workers, reason, waited, len(p.preemptions),
                            s.story))
    return tuple(rows)


def build(elapsed: float, tracker: Tracker, queues: Iterable[Mapping[str, Any]],
          nodes: Iterable[Mapping[str, Any]], pods: Sequence[PodObs],
          log: Sequence[str] = ()) -> Frame:
    done, total = tracker.counts()
    return Frame(elapsed, tracker.speed, done, total, queue_rows(queues), gang_rows(tracker),
                 node_rows(nodes, pods), tuple(log))
