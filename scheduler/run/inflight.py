"""What an actuator reports of a plan, and the binds still in flight after its cycle.

The live actuator binds outside the cycle, as kube-scheduler separates its binding cycle
from its scheduling cycle: ``apply`` hands the plan's gangs to a binding stage and returns,
so the next cycle can start while the binds are on the wire (a cycle's binds took 0.3-0.8 s
on a loaded apiserver, and a gang completed meanwhile waited for them). Until a gang's
outcome lands, the cache assumes its members bound, so the next ``decide`` sees their
capacity taken and the gang is neither pending (re-decided) nor partly bound (repaired).
The loop keeps here what it needs to take the outcome in when it lands: the binds, the
gangs among them that were partly bound before, and since when each was complete (its
latency). The simulator binds inside ``apply`` and never has a flight.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field

from scheduler.decide.housekeeping import PartlyBound
from scheduler.decide.plan import Bind
from scheduler.model import PodRef
from scheduler.model.prebind import PreBind


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What the actuator managed to carry out.

    ``binding``: the outcome, still to come, of every bind of the plan (an ``ApplyResult``
    whose ``bound``, ``failed``, ``prebinds`` and ``unanswered`` are about those binds); when
    it is set, ``bound`` and ``failed`` here name none of them.
    """

    bound: tuple[str, ...] = ()  # gang ids whose every member is now bound
    failed: Mapping[str, str] = field(default_factory=dict)  # gang id -> why not
    evicted: tuple[str, ...] = ()  # victim gang ids whose eviction was issued
    blocked: Mapping[str, str] = field(default_factory=dict)  # victim -> why not (e.g. a PDB)
    #: Pre-bind decisions carried out (PVs claimed, claims annotated for provisioning).
    prebinds: tuple[PreBind, ...] = ()
    #: Of ``failed``, the gangs a bind of which got no reply at all (the apiserver away):
    #: their retry is due as soon as the cluster answers again.
    unanswered: tuple[str, ...] = ()
    #: Of ``failed``, the gangs this replica stopped being allowed to bind midway (it lost the
    #: leader Lease, or its renewal was late): nothing wrong with the gang, no backoff.
    fenced: tuple[str, ...] = ()
    #: Members bound and kept of failed gangs (nothing is deleted when a bind fails), and
    #: members found bound on another node than planned (a lost reply read back). They are
    #: assumed bound, so the next cycle repairs their gang instead of placing them again.
    left: tuple[tuple[PodRef, str], ...] = ()
    #: Members of gangs whose bind failed only for want of an answer (no reply, 429, 5xx),
    #: not bound: parked on their nodes (assumed) until the gang's retry is due.
    parked: tuple[tuple[PodRef, str], ...] = ()
    binding: Future[ApplyResult] | None = None
    #: Seconds after which the actuator needs another cycle for what it could not carry out
    #: yet (an eviction a disruption budget refused, a rollback or claim write that failed):
    #: nothing may change meanwhile that would run one. None: nothing to retry.
    retry_in: float | None = None


@dataclass(slots=True)
class Flight:
    """One cycle's binds, handed to the binding stage."""

    binds: tuple[Bind, ...]
    #: The gangs among them that were partly bound when decided (being completed).
    partial: Mapping[str, PartlyBound]
    #: Gang id -> when the loop first saw it complete (for its scheduling latency).
    complete_since: Mapping[str, float]
    outcome: Future[ApplyResult]
    launched: float
    landed: float | None = None  # the loop's clock when the outcome arrived

    def pods(self) -> list[PodRef]:
        """Every member handed to the binder."""
        return [ref for b in self.binds for ref, _ in b.pod_nodes]

    def prebinds(self) -> tuple[PreBind, ...]:
        """Every pre-bind decision handed to the binder (written before its gang binds)."""
        return prebinds_of(self.binds)


def prebinds_of(binds: Iterable[Bind]) -> tuple[PreBind, ...]:
    """The pre-bind decisions of *binds* (their claims' writes), in their order."""
    return tuple(d for b in binds for d in b.placement.prebinds)


class Flights:
    """The flights not taken in yet, oldest first. The loop launches and takes them on its
    own thread; the binding stage only completes their futures (which stamps ``landed``)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._flights: list[Flight] = []
        #: Called when an outcome lands (on the binding stage's thread): wakes the live loop.
        self.on_land: Callable[[], None] | None = None

    def launch(self, flight: Flight) -> None:
        def stamp(_: Future[ApplyResult]) -> None:
            flight.landed = self.clock()
            if self.on_land is not None:
                self.on_land()

        with self._lock:
            self._flights.append(flight)
        flight.outcome.add_done_callback(stamp)

    @property
    def any_landed(self) -> bool:
        """Has an outcome arrived that the loop has not taken in yet?"""
        with self._lock:
            return any(f.landed is not None for f in self._flights)

    def gangs(self) -> set[str]:
        """The gangs whose bind is in flight."""
        with self._lock:
            return {b.gang_id for f in self._flights for b in f.binds}

    def __len__(self) -> int:
        with self._lock:
            return len(self._flights)

    def take_landed(self) -> list[Flight]:
        """The flights whose outcome has arrived (no longer kept), oldest first."""
        with self._lock:
            landed = [f for f in self._flights if f.landed is not None]
            self._flights = [f for f in self._flights if f.landed is None]
        return landed

    def wait(self, timeout: float) -> list[Flight]:
        """Wait up to *timeout* seconds for every flight to land; the landed ones (taken)."""
        with self._lock:
            futures = [f.outcome for f in self._flights]
        concurrent.futures.wait(futures, timeout=timeout)
        # A future's callbacks run after its waiters wake: stamp what the callback has not.
        with self._lock:
            for f in self._flights:
                if f.landed is None and f.outcome.done():
                    f.landed = self.clock()
        return self.take_landed()

    def abandon(self) -> list[Flight]:
        """Stop waiting for every flight still out: they are no longer kept."""
        with self._lock:
            out, self._flights = self._flights, []
        return out
