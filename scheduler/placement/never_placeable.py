"""``never_placeable``: can the gang never be placed, whatever runs and whatever quota says?

A pending reason is most useful when it names what can help. "Raise the quota" is the wrong
advice for a pod larger than any node, and "queued behind" hides that the gang will never
start when its turn comes. So ``decide`` asks this first when quota refuses a gang or an
ordering rule defers it: the checks that depend only on the nodes (eligibility, each
pod against the nodes' allocatable, the gang's total against its eligible nodes, a topology
level no node is labelled with), never on what runs now, so the answer stands until a node
changes.
"""

from __future__ import annotations

from scheduler.kit.memo import Slot, Slots
from scheduler.model import Gang
from scheduler.placement import reasons
from scheduler.placement.candidates import candidates
from scheduler.placement.eligibility import prepare
from scheduler.placement.terms import context_key
from scheduler.placement.types import PlacementParams, Unplaceable, UnplaceableReason
from scheduler.world.snapshot import Snapshot

#: What ``prepare`` may answer that no change of load or quota cures. Not
#: ``DEVICE_CLAIMS``: a claim the resourceclaim controller has not made yet, a DeviceClass
#: or a driver's devices not there yet are waits that end.
_FINAL = (UnplaceableReason.NO_ELIGIBLE_NODES, UnplaceableReason.NEVER_FITS,
          UnplaceableReason.UNSUPPORTED)


def unknown_level(gang: Gang, snapshot: Snapshot, level: str) -> Unplaceable:
    """The gang asks for a topology level the scheduler does not know (a typo, usually)."""
    known = ", ".join(snapshot.topology.levels)
    return Unplaceable(gang.id, UnplaceableReason.NEVER_FITS,
                       f"topology level {level} is not configured (known: {known}); check "
                       "the gang's topology key (never fits)")


def never_placeable(gang: Gang, snapshot: Snapshot, params: PlacementParams) -> Unplaceable | None:
    """Why *gang* can never be placed on *snapshot*'s nodes (None: it may be, some day).

    *params*: the policy's knobs with no node kept off (reservations and nominations pass)."""
    problem = prepare(gang, snapshot, params)
    if isinstance(problem, Unplaceable):
        return problem if problem.reason in _FINAL else None
    constraint = gang.topology
    if constraint is not None and not snapshot.topology.has_level(constraint.level):
        return unknown_level(gang, snapshot, constraint.level)
    short = reasons.capacity_shortfall(problem, candidates(problem))
    return short if short is not None and short.reason is UnplaceableReason.NEVER_FITS else None


#: (shape number, topology) -> ``never_placeable``: it reads the nodes only.
NEVER_PLACEABLE: Slot[tuple[object, ...], Unplaceable | None] = Slot(
    "never_placeable.never_placeable")


def never_placeable_in(slots: Slots, gang: Gang, shape: int, snapshot: Snapshot,
                       params: PlacementParams) -> Unplaceable | None:
    """``never_placeable``, once per shape number and topology in *slots*; worked out each
    time for a gang whose pod constraints read what runs."""
    if context_key(gang, snapshot):
        return never_placeable(gang, snapshot, params)
    return slots.get_or_make(NEVER_PLACEABLE, (shape, gang.topology),
                     lambda: never_placeable(gang, snapshot, params))
