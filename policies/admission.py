"""Admission by quota: the whole gang fits its queue's quota (with borrowing) or it waits.

A gang's pool is only known once placement has chosen nodes, so admission runs twice:
before placement it narrows the nodes to pools where the gang could be charged in full
(an upper bound: every role charged to every pool it may use), and after placement it checks
the exact per-pool charges of the chosen nodes. Never partial: a gang is admitted for all of
its required members or not at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from policies import semi
from policies.queues import Queue
from policies.quota import QuotaLedger, QuotaTree
from scheduler.kit.memo import Slot, Slots
from scheduler.model import Gang
from scheduler.model.resources import Resources, total
from scheduler.placement.types import Assignment, Placement, Question
from scheduler.world.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class QuotaVerdict:
    """Pools the gang may be placed in, and, when none, why not (for the pending reason)."""

    pools: tuple[str, ...]
    message: str = ""

    @property
    def admitted(self) -> bool:
        return bool(self.pools)


def pool_bounds(gang: Gang, snapshot: Snapshot) -> dict[str, Resources]:
    """Per pool, the most the gang could be charged there: each role in every pool it may use
    (its required members' charges, ``Role.charge``)."""
    per_pool: dict[str, list[Resources]] = {}
    for role in gang.roles:
        if role.required <= 0:
            continue
        charge = role.charge * role.required
        for pool in snapshot.eligible_pools(role.requirements):
            per_pool.setdefault(pool, []).append(charge)
    return {pool: total(parts) for pool, parts in sorted(per_pool.items())}


def required_only(gang: Gang, placement: Placement) -> Placement:
    """*placement* without the members beyond each role's required count.

    The solver adds an elastic gang's optional members where capacity allows, but quota may
    not; dropping them (the last in node order) keeps the placement feasible.
    """
    keep = {r.name: r.required for r in gang.roles}
    out: list[Assignment] = []
    for a in placement.assignments:
        count = min(a.count, keep.get(a.role, 0))
        if count > 0:
            out.append(a if count == a.count else replace(a, count=count))
            keep[a.role] -= count
    if len(out) == len(placement.assignments) and all(
            x is y for x, y in zip(out, placement.assignments, strict=True)):
        return placement
    return replace(placement, assignments=tuple(out))


def one_fewer_optional(gang: Gang, placement: Placement) -> Placement | None:
    """*placement* with its last optional member (beyond its role's required count, the
    last in node order) dropped; None when it places none: quota then refuses the gang's
    required members themselves."""
    placed: dict[str, int] = {}
    for a in placement.assignments:
        placed[a.role] = placed.get(a.role, 0) + a.count
    role = next((r for r in reversed(gang.roles) if placed.get(r.name, 0) > r.required), None)
    if role is None:
        return None
    last = max(i for i, a in enumerate(placement.assignments) if a.role == role.name)
    a = placement.assignments[last]
    kept = (*placement.assignments[:last],
            *((replace(a, count=a.count - 1),) if a.count > 1 else ()),
            *placement.assignments[last + 1:])
    return replace(placement, assignments=kept)


def placement_charges(gang: Gang, placement: Placement, snapshot: Snapshot,
                      allocations: tuple[tuple[str, Resources], ...] | None = None,
                      ) -> dict[str, Resources]:
    """What the placement charges to each pool (``Placement.charges`` summed per pool;
    *allocations*: ``placement.allocations(gang)`` when the caller has it already)."""
    nodes = snapshot.nodes
    per_pool: dict[str, list[Resources]] = {}
    for node, res in placement.charges(gang, allocations):
        per_pool.setdefault(nodes[node].pool, []).append(res)
    return {pool: total(parts) for pool, parts in sorted(per_pool.items())}


def admissible_pools(gang: Gang, queue: Queue, ledger: QuotaLedger,
                     bounds: Mapping[str, Resources],
                     question: Question = Question.WHY) -> QuotaVerdict:
    """Pools where the queue's quota covers the gang's upper-bound charge in full.

    ``Question.WHETHER`` skips writing the message (for searches that only need the pools).
    """
    if not bounds:
        return QuotaVerdict((), "no node pool has nodes this gang's pods may use")
    explain = question is Question.WHY
    open_pools = set(ledger.tree.pools_of(queue.name))
    admitted: list[str] = []
    problems: list[str] = []
    for pool, request in bounds.items():
        if pool not in open_pools:
            if explain:
                problems.append(f"queue {queue.name} has no quota in pool {pool}")
            continue
        missing = ledger.shortfall(queue.name, pool, request)
        if not missing:
            admitted.append(pool)
        elif explain:
            problems.append(describe_shortfall(queue.name, pool, request, missing, ledger))
    return QuotaVerdict(tuple(admitted), "; ".join(problems))


def check_charges(queue: Queue, ledger: QuotaLedger,
                  charges: Mapping[str, Resources]) -> str | None:
    """None when every per-pool charge fits the queue's quota, else the reason."""
    for pool, request in charges.items():
        if pool not in ledger.tree.pools_of(queue.name):
            return f"queue {queue.name} has no quota in pool {pool}"
        missing = ledger.shortfall(queue.name, pool, request)
        if missing:
            return describe_shortfall(queue.name, pool, request, missing, ledger)
    return None


def charge_all(ledger: QuotaLedger, queue: str, charges: Mapping[str, Resources],
               sign: int = 1) -> QuotaLedger:
    for pool, res in charges.items():
        ledger = ledger.charge(queue, pool, res, sign)
    return ledger


def describe_shortfall(queue: str, pool: str, request: Resources, missing: Resources,
                       ledger: QuotaLedger) -> str:
    """``queue a in pool a100: needs 16 nvidia.com/gpu, 8 available (nominal 16, in use 8)``
    followed by what will change it.

    Quota held for reserved gangs is charged as usage but is not: "in use" leaves it out and
    each hold that limits the queue is named ("16 held for reserved gang ns/big"), its own
    or, for a hold in the queue's cohort, with the holder's queue. "Available" is never
    below 0, even when the holds take the queue past its quota.
    """
    tree = ledger.tree
    used = ledger.usage(queue, pool)
    nominal = tree.nominal(queue, pool)
    parent = tree.queues.parent_of(queue)
    own = ledger.held(queue, pool)
    others = [h for h in ledger.held(tree.paths[queue][0], pool) if h not in own]
    parts = []
    for r in sorted(missing):
        held_here = sum(h[2][r] for h in own)
        figures = [f"nominal {nominal[r]}", f"in use {used[r] - held_here}"]
        figures += [f"{amounts[r]} held for reserved gang {holder}" for holder, _, amounts in own
                    if amounts[r]]
        figures += [f"{amounts[r]} held for reserved gang {holder} of queue {q}"
                    for holder, q, amounts in others if amounts[r]]
        parts.append(f"needs {request[r]} {r}, {max(0, request[r] - missing[r])} available "
                     f"({', '.join(figures)})")
    lent = all(used[r] + request[r] <= nominal[r] for r in missing)
    if parent is not None and lent:
        hint = (f"its idle nominal quota is lent to other queues under {parent}; it comes back "
                "as their gangs finish, or by preemption where spec.preemption allows"
                + semi.describe_shielding(ledger, queue, pool))
    elif parent is not None:
        hint = (f"beyond its nominal quota it can only borrow what queues under {parent} leave "
                "idle; wait for gangs to finish, or raise the quota")
    else:
        hint = "wait for the queue's running gangs to finish, or raise the quota"
    return f"queue {queue} in pool {pool}: " + ", ".join(parts) + "; " + hint


def describe_never_admissible(queue: str, bounds: Mapping[str, Resources],
                              ledger: QuotaLedger) -> str:
    """Why no amount of waiting admits the gang (*ledger*: every queue idle)."""
    parts = []
    for pool, request in bounds.items():
        if pool not in ledger.tree.pools_of(queue):
            parts.append(f"queue {queue} has no quota in pool {pool}")
            continue
        most = ledger.available(queue, pool)
        over = [f"{request[r]} {r} needed, at most {most[r]} ever available"
                for r in sorted(most) if request[r] > most[r]]
        if over:
            parts.append(f"pool {pool}: " + ", ".join(over))
    return (f"can never be admitted to queue {queue}, even with every queue idle ("
            + "; ".join(parts) + "): raise the queue's quota or borrowing limit, or make the "
            "gang smaller")


#: (queue, bounds key) -> would quota admit it with every queue idle.
EVER: Slot[tuple[str, object], bool] = Slot("admission.ever_admissible")


def ever_admissible(slots: Slots, gang: Gang, queue: Queue, bounds: Mapping[str, Resources],
                    tree: QuotaTree, key: object) -> bool:
    """Would quota admit the gang with every queue idle? (*key*: its bounds as a key.)"""
    return slots.get_or_make(EVER, (queue.name, key), lambda: admissible_pools(
        gang, queue, QuotaLedger.empty(tree), bounds, Question.WHETHER).admitted)
