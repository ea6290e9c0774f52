"""The fragmentation term of the CP-SAT objective, for the ``fragmentation`` packing policy.

The greedy packing of GPU shares (``gpu_shares``) sends a pod where it adds the least
expected fragmentation under the workload's request mix (``Fragmentation.added``). CP-SAT
counts pods per (role, node), not GPU indexes, so the same rule enters its model per node
as a table: for every number of GPUs the gang may take on the node, the fragmentation that
outcome adds, worked out once, before the solve, by ``Fragmentation.added`` itself (one
place for the rule: this module only builds the states it is asked about). An element
constraint links the node's GPUs taken (a linear expression of its counts) to the entry.

What a node's state is here: its free CPU, memory (MiB) and free whole GPUs
(``nvidia.com/gpu``), and its GPU model (``nvidia.com/gpu.product``). Shares of devices held
through DRA claims are not in it: the model places requested GPUs, and a partly held device
is simply not free. The CPU and memory an outcome takes are the gang's per GPU (its required
members' totals over their GPUs), rounded up: exact for a gang of one GPU role, an estimate
when roles ask for CPU in other proportions. The estimate only weighs the objective; the
capacity constraints stay exact.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only in annotations: CP-SAT loads when a solve needs it
    from ortools.sat.python import cp_model

from scheduler.model.demand import gpus_of
from scheduler.model.nodes import GPU_PRODUCT_LABEL
from scheduler.model.resources import CPU, MEMORY
from scheduler.placement.eligibility import Problem, RoleView
from scheduler.placement.gpu_shares import (
    MILLI,
    Fragmentation,
    Mix,
    NodeState,
    ShareRequest,
    fragmentation_of,
)

_MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class NodeTerm:
    """One node's fragmentation term: *cost* is the shares added for the GPUs taken."""

    cost: cp_model.IntVar
    lowest: int  # the least and the most entry of its table
    highest: int


def node_state(problem: Problem, node: str) -> NodeState:
    """*node* as the share placement sees it: free CPU, memory (MiB), whole GPUs, model."""
    snapshot = problem.snapshot
    free = snapshot.free(node)
    return NodeState(max(free.get(CPU, 0), 0), max(free.get(MEMORY, 0), 0) // _MIB,
                     (MILLI,) * max(gpus_of(free), 0),
                     snapshot.nodes[node].labels.get(GPU_PRODUCT_LABEL, ""))


def taking(frag: Fragmentation, before: NodeState, gpus: int, cpu: float,
           memory: float) -> float:
    """Shares of fragmentation added by taking *gpus* whole GPUs of *before* with *cpu*
    millicores and *memory* MiB (capped at what the node has). *gpus* is at most the node's
    free GPUs."""
    taken = ShareRequest(min(math.ceil(cpu), before.cpu), min(math.ceil(memory), before.memory),
                         gpus)
    _, after = next(before.options(taken))  # fits: the GPUs are free, CPU and memory capped
    return frag.added(before, after)


def outcome_costs(frag: Fragmentation, before: NodeState, most: int, cpu_per_gpu: float,
                  memory_per_gpu: float) -> tuple[int, ...]:
    """Shares of fragmentation added by taking 0..*most* whole GPUs of *before* (with the
    CPU and memory that go with them, as much as the node has): entry g for g GPUs. *most*
    is at most the node's free GPUs."""
    return (0, *(round(taking(frag, before, g, g * cpu_per_gpu, g * memory_per_gpu))
                 for g in range(1, most + 1)))


def encode(model: cp_model.CpModel, problem: Problem, mix: Mix,
           per_node: Mapping[str, Sequence[tuple[int, cp_model.IntVar, int]]],
           roles: Sequence[RoleView]) -> dict[str, NodeTerm]:
    """A ``NodeTerm`` per node where the gang may take GPUs, constrained to the table entry
    of the GPUs it takes there. *per_node*: (role index, count variable, most pods) per node,
    as ``solve_counts`` builds them."""
    gpus = sum(rv.gpus * rv.required for rv in roles)
    if not gpus or not mix.kinds:
        return {}
    cpu_per_gpu = sum(rv.request.get(CPU, 0) * rv.required for rv in roles) / gpus
    memory_per_gpu = sum(rv.request.get(MEMORY, 0) * rv.required for rv in roles) / gpus / _MIB
    frag = fragmentation_of(mix)
    out: dict[str, NodeTerm] = {}
    for n, entries in sorted(per_node.items()):
        before = node_state(problem, n)
        most = min(len(before.gpus), sum(roles[ri].gpus * c for ri, _, c in entries))
        if not most:
            continue
        costs = outcome_costs(frag, before, most, cpu_per_gpu, memory_per_gpu)
        taken = model.new_int_var(0, most, f"gpus_taken[{n}]")
        model.add(taken == sum(roles[ri].gpus * v for ri, v, _ in entries))
        cost = model.new_int_var(min(costs), max(costs), f"fragmentation[{n}]")
        model.add_element(taken, costs, cost)
        out[n] = NodeTerm(cost, min(costs), max(costs))
    return out
