"""What considering one gang comes to: an ``Outcome``, which ``decide`` folds into the plan.

- ``Bound``: it starts now, where ``fit`` placed it;
- ``Provisioned``: it fits, but a claim its members share across nodes must be bound (its
  PV provisioned) first: the claims are decided now, the gang binds in a later cycle;
- ``Nominated``: it waits on nodes for gangs to go (victims it evicts, or gangs already
  terminating), keeping their nodes and its quota meanwhile;
- ``Reserved``: it cannot start yet, and gets nodes and an estimated start kept for it;
- ``Waiting``: it cannot start yet, and why.

``Reserved`` and ``Waiting`` may also make later gangs wait behind this one (a StrictFIFO
queue's head; with backfill off, the first gang that cannot start).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from policies.fit import Fit
from policies.reservation import Reservation
from scheduler.decide.plan import Eviction, Nomination, ReasonCategory
from scheduler.model.resources import Resources


@dataclass(frozen=True, slots=True)
class Bound:
    fit: Fit


@dataclass(frozen=True, slots=True)
class Provisioned:
    fit: Fit


@dataclass(frozen=True, slots=True)
class Nominated:
    nomination: Nomination
    message: str
    evictions: tuple[Eviction, ...] = ()
    #: Its quota, charged while it waits (None: not known, a nomination without placement).
    charges: Mapping[str, Resources] | None = None
    evicting: tuple[str, ...] = ()  # gangs that are terminating from now on
    awaiting: tuple[str, ...] = ()  # draining gangs it waits for (no one else does)


@dataclass(frozen=True, slots=True)
class NotYet:
    """A gang that cannot start yet, and whom it makes wait behind it."""

    blocks_queue: bool = field(default=False, kw_only=True)  # its StrictFIFO queue
    blocks_all: bool = field(default=False, kw_only=True)  # everyone (backfill is off)


@dataclass(frozen=True, slots=True)
class Reserved(NotYet):
    reservation: Reservation
    message: str


@dataclass(frozen=True, slots=True)
class Waiting(NotYet):
    category: ReasonCategory
    message: str


Outcome = Bound | Provisioned | Nominated | Reserved | Waiting
