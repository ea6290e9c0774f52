"""The search for the cheapest set of whole victim gangs that lets a pending gang start.

Cheapest means least work lost (GPU-seconds since each victim's last checkpoint, else since
it started), then fewest gangs. The exact problem is a set cover with a placement oracle, so
the search is a bounded heuristic: greedy passes over the candidates in two cost orders
(absolute, and per GPU freed), and for a gang that must fit in one topology domain, one
greedy pass per promising domain; each found set is then made minimal by dropping victims
whose removal still works. Every set is *proven* before it is returned: quota admits the gang
with the victims' usage released, and ``solve`` places it on the snapshot with the victims
removed. Cheap GPU counts skip the solves that cannot succeed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from policies.admission import (
    admissible_pools,
    charge_all,
    check_charges,
    placement_charges,
    required_only,
)
from policies.preemption import Candidate, candidates, could_preempt_back, ledger_without
from policies.queues import Queue, QueueSet
from policies.quota import QuotaLedger
from scheduler.model import Gang, RunningGang, TopologyMode
from scheduler.placement.types import Placement, PlacementParams, Solver
from scheduler.resources import Resources
from scheduler.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Preemption:
    """A proven victim set: evict these, and the gang fits as ``placement`` shows."""

    victims: tuple[Candidate, ...]
    placement: Placement
    charges: Mapping[str, Resources]  # the gang's per-pool quota charge

    @property
    def cost(self) -> float:
        return sum(v.cost for v in self.victims)

    def rank(self) -> tuple[float, int, tuple[str, ...]]:
        return (self.cost, len(self.victims), tuple(v.id for v in self.victims))


@dataclass(slots=True)
class VictimSearch:
    """One preemptor's search; holds the solve budget and the proofs found so far."""

    gang: Gang
    queue: Queue
    snapshot: Snapshot
    ledger: QuotaLedger
    queues: QueueSet
    bounds: Mapping[str, Resources]  # the gang's upper-bound charge per pool
    params: PlacementParams
    now: float
    solve: Solver
    terminating: frozenset[str] = frozenset()
    #: Running gangs by queue (``preemption.running_by_queue``), shared between searches.
    by_queue: Mapping[str, list[RunningGang]] | None = None
    #: ``preemption.candidates`` answers, shared between searches of one cycle.
    memo: dict[tuple[object, ...], tuple[QuotaLedger, list[Candidate]]] | None = None
    #: Usable nodes and their free GPUs per gang shape, shared between searches of one cycle.
    usable_memo: dict[tuple[object, ...], tuple[Snapshot, frozenset[str], int]] | None = None
    max_solves: int = 12
    max_candidates: int = 200
    solves: int = 0
    banned: set[str] = field(default_factory=set)
    _proofs: dict[frozenset[str], Preemption | None] = field(default_factory=dict)
    _usable: frozenset[str] = frozenset()
    _need: int = 0  # GPUs the gang needs
    _free: int = 0  # GPUs free on the usable nodes now
    _gain: dict[str, int] = field(default_factory=dict)  # GPUs a victim frees on usable nodes

    def run(self) -> Preemption | None:
        found = candidates(self.gang, self.queue, self.snapshot, self.ledger, self.queues,
                           self.bounds, self.now, self.terminating, self.by_queue, self.memo)
        if not found:
            return None
        usable, self._free = self._usable_and_free()
        self._usable = usable
        self._need = self.gang.gpus
        gain = self._gain = {c.id: sum(r.gpus for n, r in c.running.allocations if n in usable)
                             for c in found}
        if self._free + sum(gain.values()) < self._need:
            return None  # even every allowed victim would not free enough
        quota_pools = set(self.bounds)
        helpful = [c for c in found if gain[c.id] > 0
                   or any(n in self.snapshot.nodes and self.snapshot.nodes[n].pool in quota_pools
                          for n in c.running.nodes)]
        if not helpful:
            return None
        by_cost = sorted(helpful, key=lambda c: (c.cost, -gain[c.id], c.id))
        orders = [by_cost[: self.max_candidates]]
        per_gpu = sorted(helpful, key=lambda c: (c.cost / max(1, gain[c.id]), -gain[c.id], c.id))
        if per_gpu != by_cost:
            orders.append(per_gpu[: self.max_candidates])
        topo = self.gang.topology
        if topo is not None and topo.mode is TopologyMode.REQUIRED:
            orders = self._domain_orders(by_cost, usable, topo.level) + orders
        best: Preemption | None = None
        for order in orders:
            result = self._greedy(order, usable)
            if result is not None:
                result = self._minimise(result)
                if best is None or result.rank() < best.rank():
                    best = result
            if self.solves >= self.max_solves:
                break
        return best

    # Greedy and minimality ---------------------------------------------------------------
    def _greedy(self, order: list[Candidate], usable: frozenset[str]) -> Preemption | None:
        chosen: list[Candidate] = []
        for cand in order:
            if cand.id in self.banned:
                continue
            chosen.append(cand)
            if not self._plausible(chosen, usable):
                continue
            proof = self._prove(chosen, usable)
            if proof is not None:
                return proof
            if self.solves >= self.max_solves:
                return None
        return None

    def _minimise(self, proof: Preemption) -> Preemption:
        """Drop victims, most costly first, while the rest still suffice."""
        usable = self._usable
        for victim in sorted(proof.victims, key=lambda c: (-c.cost, c.id)):
            if len(proof.victims) == 1 or self.solves >= self.max_solves:
                break
            rest = [c for c in proof.victims if c.id != victim.id]
            if self._plausible(rest, usable):
                smaller = self._prove(rest, usable)
                if smaller is not None:
                    proof = smaller
        return proof

    def _domain_orders(self, by_cost: list[Candidate], usable: frozenset[str],
                       level: str) -> list[list[Candidate]]:
        """For a gang bound to one domain: the cheapest victims of the 3 cheapest domains."""
        nodes = self.snapshot.nodes
        domain_of = {n: nodes[n].labels.get(level) or f"<none:{n}>" for n in usable}
        free: dict[str, int] = {}
        for n in usable:
            free[domain_of[n]] = free.get(domain_of[n], 0) + max(0, self.snapshot.free(n).gpus)
        # Per domain, the candidates freeing GPUs there (in cost order) and how many.
        touching: dict[str, list[tuple[Candidate, int]]] = {}
        for cand in by_cost:
            per: dict[str, int] = {}
            for n, r in cand.running.allocations:
                d = domain_of.get(n)
                if d is not None and r.gpus > 0:
                    per[d] = per.get(d, 0) + r.gpus
            for d, g in per.items():
                touching.setdefault(d, []).append((cand, g))
        plans: list[tuple[float, int, str, list[Candidate]]] = []
        for domain in sorted(touching):
            have, picked = free[domain], []
            for cand, g in touching[domain]:
                if have >= self._need:
                    break
                picked.append(cand)
                have += g
            if have >= self._need and picked:
                plans.append((sum(c.cost for c in picked), len(picked), domain, picked))
        plans.sort(key=lambda p: (p[0], p[1], p[2]))
        return [p[3] for p in plans[:3]]

    # Checks -------------------------------------------------------------------------------
    def _usable_and_free(self) -> tuple[frozenset[str], int]:
        """The nodes the gang may use and their free GPUs, shared by gangs of one shape."""
        params = self.params
        key = (tuple(r.requirements for r in self.gang.roles),
               self.ledger.tree.pools_of(self.queue.name), params.allowed_nodes,
               params.excluded_nodes)
        hit = self.usable_memo.get(key) if self.usable_memo is not None else None
        if hit is not None and hit[0] is self.snapshot:
            return hit[1], hit[2]
        usable = hit[1] if hit is not None else self._usable_nodes()
        free = self.snapshot.free
        gpus = sum(max(0, free(n).gpus) for n in usable)
        if self.usable_memo is not None:
            self.usable_memo[key] = (self.snapshot, usable, gpus)
        return usable, gpus

    def _usable_nodes(self) -> frozenset[str]:
        nodes: set[str] = set()
        for role in self.gang.roles:
            nodes.update(self.snapshot.eligible_nodes(role.requirements))
        pools = set(self.ledger.tree.pools_of(self.queue.name))
        snapshot_nodes = self.snapshot.nodes
        nodes = {n for n in nodes if snapshot_nodes[n].pool in pools}
        if self.params.allowed_nodes is not None:
            nodes &= self.params.allowed_nodes
        return frozenset(nodes - self.params.excluded_nodes)

    def _plausible(self, chosen: list[Candidate], usable: frozenset[str]) -> bool:
        """A GPU count: could the gang fit at all with these victims gone?"""
        if self._need <= 0:
            return True
        return self._free + sum(self._gain.get(c.id, 0) for c in chosen) >= self._need

    def _prove(self, chosen: list[Candidate], usable: frozenset[str]) -> Preemption | None:
        key = frozenset(c.id for c in chosen)
        if key in self._proofs:
            return self._proofs[key]
        self._proofs[key] = None
        victims = [c.running for c in chosen]
        ledger = ledger_without(self.ledger, victims, self.snapshot)
        verdict = admissible_pools(self.gang, self.queue, ledger, self.bounds, explain=False)
        if not verdict.admitted:
            return None
        self.solves += 1
        params = self.params
        if set(verdict.pools) != set(self.snapshot.pools()):
            allowed = self.snapshot.nodes_in(verdict.pools)
            if params.allowed_nodes is not None:
                allowed &= params.allowed_nodes
            params = replace(params, allowed_nodes=allowed)
        result = self.solve(self.gang, self.snapshot.without_gangs(key), params)
        if not isinstance(result, Placement):
            return None
        result = required_only(self.gang, result)  # evict for the required members only
        charges = placement_charges(self.gang, result, self.snapshot)
        if check_charges(self.queue, ledger, charges) is not None:
            return None
        after = charge_all(ledger, self.queue.name, charges)
        loopers = {c.id for c in chosen if could_preempt_back(
            c, self.gang, self.queue, charges, after, self.queues, self.snapshot)}
        if loopers:
            self.banned |= loopers
            return None
        proof = Preemption(tuple(sorted(chosen, key=lambda c: c.id)), result, charges)
        self._proofs[key] = proof
        return proof


def select_victims(search: VictimSearch) -> Preemption | None:
    """The cheapest proven victim set for ``search.gang``, or None when none was found."""
    return search.run()
