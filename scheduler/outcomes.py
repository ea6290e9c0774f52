"""What considering one gang comes to: an ``Outcome``, which ``decide`` folds into the plan.

- ``Bound``: it starts now, where ``fit`` placed it;
- ``Nominated``: it waits on nodes for gangs to go (victims it evicts, or gangs already
  terminating), holding their nodes and its quota meanwhile;
- ``Reserved``: it cannot start yet, and gets nodes and an estimated start kept for it;
- ``Waiting``: it cannot start yet, and why.

``Reserved`` and ``Waiting`` may also make later gangs wait behind this one (a StrictFIFO
queue's head; with backfill off, the first gang that cannot start).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policies.fit import Fit
from policies.reservation import Reservation
from scheduler.plan import Eviction, Nomination, ReasonCategory
from scheduler.resources import Resources


@dataclass(frozen=True, slots=True)
class Bound:
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
class Reserved:
    reservation: Reservation
    message: str
    blocks_queue: bool = False
    blocks_all: bool = False


@dataclass(frozen=True, slots=True)
class Waiting:
    category: ReasonCategory
    message: str
    blocks_queue: bool = False
    blocks_all: bool = False


Outcome = Bound | Nominated | Reserved | Waiting
