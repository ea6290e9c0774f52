"""The GPU-sharing packing experiment of Weng et al. (USENIX ATC '23) on the openb traces,
through this project's placement of GPU shares (``scheduler.placement.gpu_shares``).

The protocol, as the paper evaluates its policies: pods are drawn from the trace with a seed
(with replacement, so every seed is another workload of the same mix) and arrive one by one
until the GPU shares they ask for reach 130% of the cluster's GPUs; each is placed at once
or fails (no queueing), and none ever leaves. The figure is the share of the cluster's GPUs
allocated, read at each arrived load (asked shares over the cluster's GPUs). Fractions are
kept as fractions here (the time-replay loader rounds them up to whole GPUs).

Policies run through the same code: ``random`` (a feasible node drawn uniformly), ``best-fit``
(fewest GPU shares left), ``fragmentation`` (the least added expected fragmentation under the
workload's observed mix). The paper's published means at 100% arrived load are kept beside
(``PUBLISHED``) so a report can draw them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduler.placement.gpu_shares import (
    MILLI,
    Fragmentation,
    Mix,
    Nodes,
    NodeState,
    Policy,
    ShareRequest,
)
from simulator.loaders.csvrows import iter_rows
from simulator.loaders.openb import NODE_COLUMNS, read_node, read_pod
from simulator.trace import TraceError

#: Arrived loads (share of the cluster's GPUs asked for) at which the allocation is read:
#: every 5% from 50% (the curve), of which ``REPORTED`` go in the tables.
LOADS = tuple(round(0.05 * i, 2) for i in range(10, 27))
REPORTED = (0.8, 0.9, 1.0, 1.1, 1.3)
#: Where the protocol stops drawing pods.
LAST_LOAD = 1.3
#: Means over 10 seeds at 100% arrived load from the paper (its Figure 7 / text), by trace.
PUBLISHED = {
    "default": {"Random": 0.863, "DotProduct": 0.906, "GPU-clustering": 0.917,
                "GPU-packing": 0.918, "BestFit": 0.929, "FGD": 0.952},
    "multigpu20": {"BestFit": 0.937, "FGD": 0.955},
}

#: What the protocol reads of a pod list (no times: it never replays them over time).
POD_COLUMNS = ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


def load_requests(path: str | Path) -> tuple[ShareRequest, ...]:
    """The pods of an openb pod list as share requests, fractions kept (the rows read by
    ``simulator.loaders.openb.read_pod``, as the replay reads them)."""
    file, out = str(path), []
    for index, line, cells in iter_rows(Path(path), POD_COLUMNS, ("gpu_spec",)):
        row = read_pod(file, line, cells, index)
        out.append(ShareRequest(row.cpu_milli, row.memory_mib, row.gpus,
                                row.milli if row.gpus == 1 else MILLI, frozenset(row.models)))
    if not out:
        raise TraceError(file, None, "", "no pods")
    return tuple(out)


def load_nodes(path: str | Path) -> dict[str, NodeState]:
    """An openb node list as free node states (every GPU wholly free; the rows read by
    ``simulator.loaders.openb.read_node``, as the cluster description reads them)."""
    file, out = str(path), {}
    for index, line, cells in iter_rows(Path(path), NODE_COLUMNS):
        node = read_node(file, line, cells, index)
        out[node.name] = NodeState(node.cpu_milli, node.memory_mib, (MILLI,) * node.gpus,
                                   node.model)
    if not out:
        raise TraceError(file, None, "", "no nodes")
    return out


@dataclass(frozen=True, slots=True)
class Curve:
    """One run: the allocated share of the cluster's GPUs at each of ``LOADS``, and what
    happened to the pods."""

    policy: Policy
    seed: int
    allocated: tuple[float, ...]  # per LOADS
    placed: int
    failed: int


def arrivals(requests: Sequence[ShareRequest], capacity: int, seed: int) -> list[ShareRequest]:
    """Pods drawn from *requests* with *seed* until they ask for ``LAST_LOAD`` of
    *capacity* GPU shares (pods asking no GPU come along as drawn)."""
    rng, out, asked = random.Random(seed), [], 0
    while asked < LAST_LOAD * capacity:
        r = requests[rng.randrange(len(requests))]
        out.append(r)
        asked += r.shares
    return out


def run(nodes: dict[str, NodeState], requests: Sequence[ShareRequest], policy: Policy,
        seed: int, tick: Callable[[int], None] | None = None) -> Curve:
    """One run of the protocol (see the module docstring)."""
    capacity = sum(len(s.gpus) for s in nodes.values()) * MILLI
    if not capacity:
        raise ValueError("the cluster has no GPUs")
    placed_nodes = Nodes(nodes)
    frag = Fragmentation(Mix.observed(requests)) if policy is Policy.FRAGMENTATION else None
    rng = random.Random(seed + 1_000_003)
    marks = iter(LOADS)
    mark: float | None = next(marks)
    asked = allocated = placed = failed = 0
    readings: list[float] = []
    for i, r in enumerate(arrivals(requests, capacity, seed)):
        asked += r.shares
        choice = placed_nodes.choose(r, policy, frag, rng)
        if choice is None:
            failed += 1
        else:
            placed_nodes.apply(choice)
            allocated += r.shares
            placed += 1
        while mark is not None and asked >= mark * capacity:
            readings.append(allocated / capacity)
            mark = next(marks, None)
        if tick is not None:
            tick(i)
    while len(readings) < len(LOADS):  # (the last pod crossed several marks at once)
        readings.append(allocated / capacity)
    return Curve(policy, seed, tuple(readings), placed, failed)
