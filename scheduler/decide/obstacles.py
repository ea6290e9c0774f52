"""What stands in the way of the gangs considered later in a cycle: one value.

Each decision can leave something behind that later gangs must respect: nodes nominated for
a preemptor (nobody else may take them), gangs being evicted (never victims again), gangs
already terminating that nobody awaits yet, the reservations made (their nodes and quota),
pools a previous reservation's gang may still claim, and the ordering rules' blocks (with
backfill off, everyone waits behind the first gang that cannot start; a StrictFIFO queue
waits behind its head). ``Obstacles`` keeps them all; each named operation returns a new
value (the same one when nothing changes), so "has anything changed since?" is an identity
test, which is what the cycle's memo of failures relies on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from policies.reservation import Reservation, relevant
from scheduler.kit.memo import Slot, Slots
from scheduler.placement.types import PlacementParams

_NONE: Mapping[str, frozenset[str]] = MappingProxyType({})
_NO_HEADS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True, eq=False)
class Obstacles:
    """Compared by identity: a change is a new value."""

    #: Nodes nominated for preemptors waiting for their victims to go.
    nominated: frozenset[str] = frozenset()
    #: Gangs being evicted, by this plan, an earlier one or a previous leader's.
    terminating: frozenset[str] = frozenset()
    #: Terminating gangs no nomination waits for yet: a gang that fits once they are gone
    #: waits for them instead of evicting more.
    draining: tuple[str, ...] = ()
    #: This cycle's reservations, in pools pairwise disjoint.
    reservations: tuple[Reservation, ...] = ()
    #: Gang -> pools of its reservation in the previous plan, until it is reconsidered.
    claims: Mapping[str, frozenset[str]] = field(default_factory=lambda: _NONE)
    #: With backfill off: the gang every later one waits behind.
    blocker: str | None = None
    #: StrictFIFO queue -> its head that cannot start yet.
    heads: Mapping[str, str] = field(default_factory=lambda: _NO_HEADS)

    @classmethod
    def at_start(cls, terminating: Iterable[str]) -> Obstacles:
        """The cycle's start: gangs whose pods are being deleted already."""
        gangs = tuple(sorted(terminating))
        return cls(terminating=frozenset(gangs), draining=gangs)

    # Reading ------------------------------------------------------------------------------
    def concerning(self, pools: frozenset[str]) -> tuple[Reservation, ...]:
        """The reservations a gang that may use *pools* could delay."""
        return relevant(self.reservations, pools) if self.reservations else ()

    def taken_pools(self) -> frozenset[str]:
        """Pools with a reservation or claimed by a previously reserved gang."""
        taken = frozenset(p for r in self.reservations for p in r.pools)
        return taken | frozenset(p for pools in self.claims.values() for p in pools)

    @property
    def reservation_count(self) -> int:
        """Reservations made and claimed (both count against the cap)."""
        return len(self.reservations) + len(self.claims)

    @property
    def ordering_blocks(self) -> bool:
        """Does an ordering rule defer some gangs (backfill off, a StrictFIFO head)?"""
        return self.blocker is not None or bool(self.heads)

    # Changing -----------------------------------------------------------------------------
    def nominate(self, nodes: Iterable[str], evicting: Iterable[str] = (),
                 awaiting: Iterable[str] = ()) -> Obstacles:
        """A preemptor waits on *nodes* for the gangs it is *evicting* and those it is
        *awaiting* among the draining ones."""
        awaited = set(awaiting)
        draining = (tuple(g for g in self.draining if g not in awaited) if awaited
                    else self.draining)
        return replace(self, nominated=self.nominated | frozenset(nodes),
                       terminating=self.terminating | frozenset(evicting), draining=draining)

    def reserve(self, reservation: Reservation) -> Obstacles:
        return replace(self, reservations=(*self.reservations, reservation))

    def claim(self, gang_id: str, pools: Iterable[str]) -> Obstacles:
        return replace(self, claims={**self.claims, gang_id: frozenset(pools)})

    def unclaim(self, gang_id: str) -> Obstacles:
        """The gang is being reconsidered: its previous reservation's pools are free again."""
        if gang_id not in self.claims:
            return self
        return replace(self, claims={g: p for g, p in self.claims.items() if g != gang_id})

    def block(self, gang_id: str) -> Obstacles:
        """Backfill is off: every later gang waits behind this one (the first only)."""
        return self if self.blocker is not None else replace(self, blocker=gang_id)

    def block_queue(self, queue: str, gang_id: str) -> Obstacles:
        """A StrictFIFO queue waits behind its head."""
        if queue in self.heads:
            return self
        return replace(self, heads={**self.heads, queue: gang_id})


#: The last nominated nodes -> the policy's placement knobs with them excluded (the policy
#: is the cycle's, the same for the store's life).
BASE: Slot[frozenset[str], PlacementParams] = Slot("obstacles.base_params")


def base_params(slots: Slots, policy: PlacementParams, obstacles: Obstacles) -> PlacementParams:
    """The policy's placement knobs with the nominated nodes excluded."""
    return slots.last(BASE, obstacles.nominated, lambda nominated: replace(
        policy, excluded_nodes=policy.excluded_nodes | nominated))
