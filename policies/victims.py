"""The search for the cheapest set of whole victim gangs that lets a pending gang start.

Cheapest means least work lost (GPU-seconds since each victim's last checkpoint, else since
it started), then fewest gangs. The exact problem is a set cover with a placement oracle, so
the search is a bounded heuristic: greedy passes over the candidates in two cost orders
(absolute, and per GPU freed), and for a gang that must fit in one topology domain, one
greedy pass per promising domain; each found set is then made minimal by dropping victims
whose removal still works. Every set is *proven* before it is returned: ``fit`` in the world
with the victims gone and their usage released. Cheap GPU counts skip the solves that cannot
succeed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from policies.admission import charge_all
from policies.fit import Applicant, Fit, Misfit, World, fit
from policies.preemption import Candidate, could_preempt_back, ledger_without
from policies.queues import QueueSet
from policies.quota import QuotaLedger
from scheduler.kit.memo import LARGE, Slot, Slots, kept_for
from scheduler.model import RunningGang, TopologyMode
from scheduler.model.demand import gpus_of
from scheduler.model.release import Release
from scheduler.model.resources import Resources
from scheduler.placement.types import Placement, Question
from scheduler.world.snapshot import Snapshot


def release_key(release: Release) -> str:
    """A release's key in the search's tables: its gang's id, and for a partial release
    (members above an elastic gang's minimum) how many members it takes."""
    return release.id if release.part is None else f"{release.id}:{len(release.part)}"


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


@dataclass(frozen=True, slots=True)
class Room:
    """The nodes the preemptor may use (eligible, in its queue's pools, allowed by the
    world's params) and how many GPUs are free on them now.

    What depends on the nodes alone is kept as searches ask for it, and shared by the rooms
    of the same nodes on later snapshots (``gains``, ``domains``)."""

    nodes: frozenset[str]
    free_gpus: int
    #: Release key (gang id, and the number of members of a partial release) -> (what it
    #: releases, the GPUs that frees on these nodes).
    gains: dict[str, tuple[RunningGang, int]] = field(default_factory=dict, compare=False)
    #: Topology level -> node -> its domain there.
    domains: dict[str, dict[str, str]] = field(default_factory=dict, compare=False)

    def gain(self, release: Release) -> int:
        """GPUs *release* would free on these nodes."""
        rg, nodes = release.released, self.nodes
        return kept_for(self.gains, release_key(release), rg, lambda _: sum(
            gpus_of(r) for n, r in release.charges if n in nodes), LARGE)

    def domain_of(self, level: str, snapshot: Snapshot) -> dict[str, str]:
        """Node -> its domain at *level* (a node without the label is a domain of its own)."""
        hit = self.domains.get(level)
        if hit is None:
            nodes = snapshot.nodes
            hit = self.domains[level] = {n: nodes[n].labels.get(level) or f"<none:{n}>"
                                         for n in self.nodes}
        return hit


def usable_nodes(applicant: Applicant, world: World) -> frozenset[str]:
    """The nodes of ``Room``: they depend on the gang's requirements, its queue's pools and
    the params, not on what runs where."""
    snapshot, params = world.snapshot, world.params
    nodes: set[str] = set()
    for role in applicant.gang.roles:
        nodes.update(snapshot.eligible_nodes(role.requirements))
    pools = set(world.ledger.tree.pools_of(applicant.queue.name))
    snapshot_nodes = snapshot.nodes
    nodes = {n for n in nodes if snapshot_nodes[n].pool in pools}
    if params.allowed_nodes is not None:
        nodes &= params.allowed_nodes
    return frozenset(nodes - params.excluded_nodes)


def free_gpus(snapshot: Snapshot, nodes: frozenset[str]) -> int:
    """GPUs free on *nodes*, integer and device ones (``Snapshot.free_gpus``)."""
    free = snapshot.free_gpus
    return sum(free(n) for n in nodes)


#: (roles' requirements, queue pools, allowed nodes, excluded nodes) -> the snapshot its
#: free GPUs were counted on, the room.
ROOMS: Slot[tuple[object, ...], tuple[Snapshot, Room]] = Slot("victims.room")
#: (requirements, pools, allowed nodes) -> the key of the room last made for them and its
#: excluded nodes.
LAST_ROOM: Slot[tuple[object, ...], tuple[tuple[object, ...], frozenset[str]]] = Slot(
    "victims.last_room")


def room_of(slots: Slots, applicant: Applicant, world: World) -> Room:
    """``Room``: the usable nodes once per shape, queue pools and params in *slots* (from
    the last room of the same shape, pools and allowed nodes when its excluded nodes are
    among these); their free GPUs once per snapshot, from the last count where the
    snapshots are related."""
    params = world.params
    base = (tuple(r.requirements for r in applicant.gang.roles),
            world.ledger.tree.pools_of(applicant.queue.name), params.allowed_nodes)
    excluded = params.excluded_nodes
    key = (*base, excluded)
    rooms = slots.table(ROOMS)
    hit = rooms.get(key)
    snapshot = world.snapshot
    if hit is not None:
        if hit[0] is snapshot:
            return hit[1]
        before, known = hit
        found = Room(known.nodes, _free_gpus_now(before, known, snapshot), known.gains,
                     known.domains)
    else:
        # Nominations only add excluded nodes: the room of the same shape with fewer
        # excluded gives this one by taking the newly excluded away.
        last = slots.table(LAST_ROOM).get(base)
        near = rooms.get(last[0]) if last is not None and last[1] <= excluded else None
        if near is not None:
            before, known = near
            count = _free_gpus_now(before, known, snapshot)
            gone = known.nodes & excluded
            found = Room(known.nodes - gone, count - free_gpus(snapshot, gone))
        else:
            nodes = usable_nodes(applicant, world)
            found = Room(nodes, free_gpus(snapshot, nodes))
        slots.put(LAST_ROOM, base, (key, excluded))
    slots.put(ROOMS, key, (snapshot, found))
    return found


def _free_gpus_now(before: Snapshot, room: Room, snapshot: Snapshot) -> int:
    """``free_gpus(snapshot, room.nodes)``, from the count on *before*: when the two
    snapshots are related, only the nodes whose free resources differ are looked at."""
    changed = snapshot.changed_since(before)
    if changed is None:
        return free_gpus(snapshot, room.nodes)
    count, nodes = room.free_gpus, room.nodes
    old, new = before.free_gpus, snapshot.free_gpus
    for n in changed:
        if n in nodes:
            count += new(n) - old(n)
    return count


def select_victims(applicant: Applicant, world: World, found: list[Candidate], room: Room,
                   queues: QueueSet) -> Preemption | None:
    """The cheapest proven set of *found* (the applicant's candidates, see
    ``preemption.candidates``) whose removal from *world* lets the applicant start, or None.
    A proof only asks whether the gang fits, so its solves do not work out why not."""
    if world.params.question is not Question.WHETHER:
        world = replace(world, params=world.params.asking(Question.WHETHER))
    return VictimSearch(applicant, world, queues, found, room).run()


@dataclass(slots=True)
class VictimSearch:
    """One preemptor's search; keeps the solve budget and the proofs found so far."""

    applicant: Applicant
    world: World
    queues: QueueSet
    found: list[Candidate]
    room: Room
    max_solves: int = 12
    max_candidates: int = 200
    solves: int = 0
    banned: set[str] = field(default_factory=set)
    _proofs: dict[frozenset[str], Preemption | None] = field(default_factory=dict)
    _need: int = 0  # GPUs the gang needs
    _gain: dict[str, int] = field(default_factory=dict)  # GPUs a victim frees on usable nodes
    #: Victim ids in the order released -> the world's ledger with their usage released
    #: (a greedy pass adds one victim at a time: each ledger is the last one's plus one).
    _released: dict[tuple[str, ...], QuotaLedger] = field(default_factory=dict)

    def run(self) -> Preemption | None:
        found, gang, snapshot = self.found, self.applicant.gang, self.world.snapshot
        if not found:
            return None
        usable = self.room.nodes
        self._need = gang.demand.gpus
        room = self.room
        gain = self._gain = {c.id: room.gain(c.release) for c in found}
        if self.room.free_gpus + sum(gain.values()) < self._need:
            return None  # even every allowed victim would not free enough
        quota_pools = set(self.applicant.bounds)
        helpful = [c for c in found if gain[c.id] > 0
                   or any(n in snapshot.nodes and snapshot.nodes[n].pool in quota_pools
                          for n in c.release.nodes)]
        if not helpful:
            return None
        by_cost = sorted(helpful, key=lambda c: (c.cost, -gain[c.id], c.id))
        orders = [by_cost[: self.max_candidates]]
        per_gpu = sorted(helpful, key=lambda c: (c.cost / max(1, gain[c.id]), -gain[c.id], c.id))
        if per_gpu != by_cost:
            orders.append(per_gpu[: self.max_candidates])
        topo = gang.topology
        if topo is not None and topo.mode is TopologyMode.REQUIRED:
            orders = self._domain_orders(by_cost, usable, topo.level) + orders
        best: Preemption | None = None
        for order in orders:
            result = self._greedy(order)
            if result is not None:
                result = self._minimise(result)
                if best is None or result.rank() < best.rank():
                    best = result
            if self.solves >= self.max_solves:
                break
        return best

    # Greedy and minimality ---------------------------------------------------------------
    def _greedy(self, order: list[Candidate]) -> Preemption | None:
        chosen: list[Candidate] = []
        for cand in order:
            if cand.id in self.banned:
                continue
            chosen.append(cand)
            if not self._plausible(chosen):
                continue
            proof = self._prove(chosen)
            if proof is not None:
                return proof
            if self.solves >= self.max_solves:
                return None
        return None

    def _minimise(self, proof: Preemption) -> Preemption:
        """Drop victims, most costly first, while the rest still suffice."""
        for victim in sorted(proof.victims, key=lambda c: (-c.cost, c.id)):
            if len(proof.victims) == 1 or self.solves >= self.max_solves:
                break
            rest = [c for c in proof.victims if c.id != victim.id]
            if self._plausible(rest):
                smaller = self._prove(rest)
                if smaller is not None:
                    proof = smaller
        return proof

    def _domain_orders(self, by_cost: list[Candidate], usable: frozenset[str],
                       level: str) -> list[list[Candidate]]:
        """For a gang bound to one domain: the cheapest victims of the 3 cheapest domains."""
        snapshot = self.world.snapshot
        domain_of = self.room.domain_of(level, snapshot)
        free: dict[str, int] = {}
        free_of = snapshot.free_gpus  # integer and device GPUs
        for n in usable:
            dom = domain_of[n]
            free[dom] = free.get(dom, 0) + free_of(n)
        # Per domain, the candidates freeing GPUs there (in cost order) and how many.
        touching: dict[str, list[tuple[Candidate, int]]] = {}
        for cand in by_cost:
            per: dict[str, int] = {}
            for n, r in cand.release.charges:
                d = domain_of.get(n)
                gpus = gpus_of(r)
                if d is not None and gpus > 0:
                    per[d] = per.get(d, 0) + gpus
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
    def prove(self, chosen: list[Candidate]) -> Preemption | None:
        """The proof that evicting *chosen* lets the applicant start, or None (a set of
        releases the search did not pick: ``policies.shrink`` trims partial ones)."""
        return self._prove(chosen)

    def _plausible(self, chosen: list[Candidate]) -> bool:
        """A GPU count: could the gang fit at all with these victims gone?"""
        if self._need <= 0:
            return True
        return self.room.free_gpus + sum(self._gain.get(c.id, 0) for c in chosen) >= self._need

    def _prove(self, chosen: list[Candidate]) -> Preemption | None:
        key = frozenset(release_key(c.release) for c in chosen)
        if key in self._proofs:
            return self._proofs[key]
        self._proofs[key] = None
        world, applicant = self.world, self.applicant
        ledger = self._release(chosen)
        gone = tuple(c.release for c in sorted(chosen, key=lambda c: c.id))
        trial = fit(applicant, replace(world, ledger=ledger, gone=gone))
        self.solves += trial.solved if isinstance(trial, Misfit) else 1
        if not isinstance(trial, Fit):
            return None
        queue = applicant.queue
        after = charge_all(ledger, queue.name, trial.charges)
        loopers = {c.id for c in chosen if could_preempt_back(
            c, applicant.gang, queue, trial.charges, after, self.queues, world.snapshot)}
        if loopers:
            self.banned |= loopers
            return None
        proof = Preemption(tuple(sorted(chosen, key=lambda c: c.id)), trial.placement,
                           trial.charges)
        self._proofs[key] = proof
        return proof

    def _release(self, chosen: list[Candidate]) -> QuotaLedger:
        """``ledger_without(world.ledger, chosen)``, releasing only the last victim when the
        ones before it were released already (the same charges in the same order)."""
        ids = tuple(release_key(c.release) for c in chosen)
        before = self._released.get(ids[:-1])
        if before is None:
            ledger = ledger_without(self.world.ledger, [c.release for c in chosen],
                                    self.world.snapshot)
        else:
            ledger = ledger_without(before, [chosen[-1].release], self.world.snapshot)
        self._released[ids] = ledger
        return ledger
