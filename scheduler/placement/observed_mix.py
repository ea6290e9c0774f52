"""The request mix the scheduler observes: what the ``fragmentation`` packing policy weighs.

Every pod the scheduler sees asking for GPUs counts once for its kind (``gpu_shares.Mix``):
the members of running gangs and the required members of pending ones, a share of a GPU at
its fraction (``scheduler.model.demand``'s seam says what a member asks, device claims
included). Why both: running pods say what the cluster holds, pending ones what it is asked
for next; the simulator's ``packing`` command weighs the arrivals the same way
(``Mix.observed``, the one rule for turning requests into weights).

Why the GPU model is left out of a kind: a kind's models only matter where a node's model
refuses it, and the live scheduler's node selectors say more than a model list; every kind
is taken as accepting any model (the mix weighs; eligibility still decides).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from scheduler.model import Gang, Role, RunningGang
from scheduler.model.demand import MILLI
from scheduler.model.resources import CPU, MEMORY
from scheduler.placement.gpu_shares import Mix, ShareRequest

_MIB = 1 << 20


def member_request(role: Role) -> ShareRequest | None:
    """What one member of *role* asks, as the share placement counts it (None: no GPU)."""
    demand = role.demand
    if not demand.milli:
        return None
    cpu, memory = max(role.requests.get(CPU, 0), 0), max(role.requests.get(MEMORY, 0), 0) // _MIB
    if demand.milli < MILLI:
        return ShareRequest(cpu, memory, 1, demand.milli)
    return ShareRequest(cpu, memory, max(demand.gpus, -(-demand.milli // MILLI)))


def _running_members(rg: RunningGang) -> Iterable[tuple[Role, int]]:
    """Each role of *rg* with its members running (its required ones when not recorded)."""
    placed: Counter[str] = Counter()
    for name, _, count in rg.members:
        placed[name] += count
    for role in rg.gang.roles:
        yield role, placed[role.name] if rg.members else role.required


def observed_mix(running: Iterable[RunningGang], pending: Iterable[Gang]) -> Mix:
    """The mix of every running member and every pending gang's required members."""
    counts: Counter[ShareRequest] = Counter()
    members = [m for rg in running for m in _running_members(rg)]
    members += [(role, role.required) for g in pending for role in g.roles]
    for role, count in members:
        request = member_request(role) if count > 0 else None
        if request is not None:
            counts[request] += count
    return Mix.observed(counts.elements())
