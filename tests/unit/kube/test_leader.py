"""Leader election against a fake Lease endpoint with real optimistic concurrency.

The fake keeps one Lease per path and honours ``metadata.resourceVersion`` on PUT (409 on a
stale one) and on POST (409 when it exists), as the apiserver does, so races between two
candidates are decided the way they would be for real. Each elector gets a manual clock.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.kube.client import Response, TransportError
from scheduler.kube.lead.fence import FenceToken
from scheduler.kube.lead.leader import LeaderElector

NS, NAME = "gs-system", "gang-scheduler"
PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{NAME}"
LEASE = f"{NS}/{NAME}"


@dataclass
class LeaseServer:
    """The apiserver's Lease semantics, and switches to make it fail."""

    lease: dict[str, Any] | None = None
    version: int = 0
    down: bool = False  # every request raises TransportError
    lock: threading.Lock = field(default_factory=threading.Lock)
    writes: list[tuple[str, str]] = field(default_factory=list)  # (method, holder)

    def client(self) -> FakeLeaseClient:
        return FakeLeaseClient(self)

    def holder(self) -> str:
        return str(((self.lease or {}).get("spec") or {}).get("holderIdentity") or "")

    def handle(self, method: str, path: str, body: Any) -> Response:
        if self.down:
            raise TransportError(f"{method} {path}: connection refused")
        with self.lock:
            if method == "GET":
                if self.lease is None:
                    return Response(404, b'{"message": "not found"}')
                return Response(200, json.dumps(self.lease).encode())
            if method == "POST":
                if self.lease is not None:
                    return Response(409, b'{"message": "already exists"}')
                return self._store(method, body)
            if method == "PUT":
                if self.lease is None:
                    return Response(404, b'{"message": "not found"}')
                sent = body["metadata"].get("resourceVersion")
                if sent != self.lease["metadata"]["resourceVersion"]:
                    return Response(409, b'{"message": "the object has been modified"}')
                return self._store(method, body)
        raise AssertionError(f"unexpected {method} {path}")

    def _store(self, method: str, body: dict[str, Any]) -> Response:
        self.version += 1
        lease = json.loads(json.dumps(body))
        lease["metadata"]["resourceVersion"] = str(self.version)
        self.lease = lease
        self.writes.append((method, lease["spec"].get("holderIdentity") or ""))
        return Response(200 if method == "PUT" else 201, json.dumps(lease).encode())


@dataclass
class FakeLeaseClient:
    server: LeaseServer
    timeouts: list[Any] = field(default_factory=list)

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "application/json", timeout: Any = None) -> Response:
        self.timeouts.append(timeout)
        return self.server.handle(method, path, body)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def elector(server: LeaseServer, identity: str, clock: Clock, **timings: float) -> LeaderElector:
    t = {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 2.0, **timings}
    return LeaderElector(server.client(), NS, NAME, identity, monotonic=clock, **t)


def test_acquires_a_missing_lease_and_renews_it() -> None:
    server, clock = LeaseServer(), Clock()
    a = elector(server, "a", clock)
    assert a.try_acquire_or_renew() and a.is_leader
    assert server.writes == [("POST", "a")]
    first = dict(server.lease["spec"])  # type: ignore[index]
    assert first["leaseDurationSeconds"] == 15 and first["leaseTransitions"] == 0
    clock.now += 2
    assert a.try_acquire_or_renew() and a.is_leader
    renewed = server.lease["spec"]  # type: ignore[index]
    assert server.writes[-1] == ("PUT", "a")
    assert renewed["renewTime"] >= first["renewTime"]
    assert renewed["acquireTime"] == first["acquireTime"]  # a renewal is not an acquisition
    assert renewed["leaseTransitions"] == 0


def test_requests_time_out_within_the_renew_deadline() -> None:
    server, clock = LeaseServer(), Clock()
    a = elector(server, "a", clock, lease_duration=3, renew_deadline=2, retry_period=0.5)
    a.try_acquire_or_renew()
    client = a.client
    assert isinstance(client, FakeLeaseClient)
    assert all(t is not None and max(t) <= 2 for t in client.timeouts)


def test_a_live_lease_is_not_taken_and_an_expired_one_is() -> None:
    server, clock_a, clock_b = LeaseServer(), Clock(), Clock()
    a, b = elector(server, "a", clock_a), elector(server, "b", clock_b)
    assert a.try_acquire_or_renew()
    # b keeps seeing a renew: it never takes over, however long it waits.
    for _ in range(20):
        clock_a.now += 2
        clock_b.now += 2
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew() and not b.is_leader
    # a dies. b judges expiry from when *it* last saw the Lease change, by its own clock.
    clock_b.now += 14
    assert not b.try_acquire_or_renew()
    clock_b.now += 1.5
    assert b.try_acquire_or_renew() and b.is_leader
    spec = server.lease["spec"]  # type: ignore[index]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1


def test_clock_skew_in_renew_time_does_not_matter() -> None:
    """A renewTime far in the past (the holder's wall clock is behind) is still a live lease."""
    server, clock = LeaseServer(), Clock()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    assert a.try_acquire_or_renew()
    server.lease["spec"]["renewTime"] = "2001-01-01T00:00:00.000000Z"  # type: ignore[index]
    assert not b.try_acquire_or_renew()
    clock.now += 10
    assert not b.try_acquire_or_renew()


def test_leader_steps_down_when_it_cannot_renew_within_the_deadline() -> None:
    server, clock = LeaseServer(), Clock()
    a = elector(server, "a", clock)
    assert a.try_acquire_or_renew()
    server.down = True
    for _ in range(4):  # 8 s of failed renewals: still within renew_deadline (10 s)
        clock.now += 2
        with pytest.raises(TransportError):
            a.try_acquire_or_renew()
        assert a.is_leader
    clock.now += 2.5
    assert not a.is_leader  # the clock alone says so, even before the next attempt returns


def test_a_hung_renewal_does_not_keep_a_leader() -> None:
    server, clock = LeaseServer(), Clock()
    a = elector(server, "a", clock)
    assert a.try_acquire_or_renew()
    clock.now += 10.5  # no attempt completed in that time (stuck request)
    assert not a.is_leader


def test_leader_notices_a_takeover_and_steps_down() -> None:
    server, clock_a, clock_b = LeaseServer(), Clock(), Clock()
    a, b = elector(server, "a", clock_a), elector(server, "b", clock_b)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock_b.now += 16  # a partitioned away: b takes over
    assert b.try_acquire_or_renew()
    clock_a.now += 1  # a is back and still within its deadline, but sees b owning the Lease
    assert not a.try_acquire_or_renew() and not a.is_leader


def test_racing_candidates_cannot_both_win() -> None:
    """Both read the same expired Lease; only the first PUT (same resourceVersion) succeeds."""
    server, clock = LeaseServer(), Clock()
    old = elector(server, "old", clock)
    assert old.try_acquire_or_renew()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()
    clock.now += 16
    stale = json.loads(json.dumps(server.lease))
    real_handle = server.handle

    def handle_with_stale_get(method: str, path: str, body: Any) -> Response:
        if method == "GET":  # both see the version before either writes
            return Response(200, json.dumps(stale).encode())
        return real_handle(method, path, body)

    server.handle = handle_with_stale_get  # type: ignore[method-assign]
    results = [a.try_acquire_or_renew(), b.try_acquire_or_renew()]
    assert results == [True, False]
    assert server.holder() == "a"


def test_never_two_leaders_under_random_failures_and_delays() -> None:
    """Three candidates on one timeline, with random outages and stalls: at every instant at
    most one of them believes it leads, and leadership does change hands."""
    rng = random.Random(11)
    server, clock = LeaseServer(), Clock()
    electors = [elector(server, name, clock, lease_duration=3, renew_deadline=2,
                        retry_period=0.5) for name in "abc"]
    stalled: dict[str, float] = {}  # identity -> until when its attempts hang (no progress)
    holders: list[str] = []
    for _ in range(4000):
        clock.now += 0.1
        server.down = rng.random() < 0.1
        for e in electors:
            if rng.random() < 0.002:
                stalled[e.identity] = clock.now + rng.uniform(1, 6)
            if stalled.get(e.identity, 0) > clock.now or rng.random() < 0.7:
                continue
            try:
                e.try_acquire_or_renew()
            except TransportError:
                e._won(False, clock.now)
            leaders = [x.identity for x in electors if x.is_leader]
            assert len(leaders) <= 1, leaders
            if leaders and (not holders or holders[-1] != leaders[0]):
                holders.append(leaders[0])
    assert len(holders) >= 3, holders


def test_run_releases_the_lease_after_quiesce_and_a_standby_takes_over_at_once() -> None:
    server, clock = LeaseServer(), Clock()
    a = elector(server, "a", clock, lease_duration=3, renew_deadline=2, retry_period=0.01)
    b = elector(server, "b", clock, lease_duration=3, renew_deadline=2, retry_period=0.01)
    stop = threading.Event()
    order: list[str] = []

    def quiesce() -> None:
        order.append(f"quiesce leader={a.is_leader} holder={server.holder()}")

    t = threading.Thread(target=a.run, args=(stop, quiesce))
    t.start()
    while not a.is_leader:
        threading.Event().wait(0.01)
    stop.set()
    t.join(30)
    assert order == ["quiesce leader=False holder=a"]  # stopped leading, Lease not yet given up
    assert server.holder() == "" and server.lease["spec"]["leaseDurationSeconds"] == 1  # type: ignore[index]
    assert b.try_acquire_or_renew() and b.is_leader  # no need to wait out the lease


# A term: what the scheduling loop treats as a takeover --------------------------------------
@dataclass(frozen=True)
class TermCase:
    """Replica ``a`` leads (lease 3 s, deadline 2 s); then *between* happens (to the server,
    ``a``'s clock, or standby ``b``), and ``a`` tries to renew *attempts* times, its clock
    moving 0.5 s before each: does it lead then, in the term it led before?"""

    name: str
    between: Callable[[LeaseServer, Clock, LeaderElector], None]
    leads: bool
    same_term: bool
    attempts: int = 1


def _late(server: LeaseServer, clock: Clock, b: LeaderElector) -> None:
    clock.now += 2.5  # past the renew deadline, within the lease: nobody could take it


def _paused_past_the_lease(server: LeaseServer, clock: Clock, b: LeaderElector) -> None:
    clock.now += 30.0  # nobody else wanted it: the Lease is still as a left it


def _taken(server: LeaseServer, clock: Clock, b: LeaderElector) -> None:
    b_clock = b._monotonic
    assert isinstance(b_clock, Clock)
    assert not b.try_acquire_or_renew()  # b sees a's Lease...
    b_clock.now += 3.5  # ...not renewed for longer than the lease (a is paused)
    assert b.try_acquire_or_renew()


def _taken_and_released(server: LeaseServer, clock: Clock, b: LeaderElector) -> None:
    _taken(server, clock, b)
    b.release()


def _deleted(server: LeaseServer, clock: Clock, b: LeaderElector) -> None:
    server.lease = None  # someone deleted it: whoever owned it in between, a term ends


def _namesake(server: LeaseServer, clock: Clock, b: LeaderElector) -> None:
    # Another process with a's identity (a restart) took it over and bumped the count.
    spec = server.lease["spec"]  # type: ignore[index]
    spec["leaseTransitions"] += 1
    server.version += 1
    server.lease["metadata"]["resourceVersion"] = str(server.version)  # type: ignore[index]


TERM_CASES = [
    TermCase("renewed in time", lambda s, c, b: None, leads=True, same_term=True),
    TermCase("renewed late, nobody took it", _late, leads=True, same_term=True),
    TermCase("paused past the lease, nobody took it", _paused_past_the_lease,
             leads=True, same_term=True),
    TermCase("taken by b, who still owns it", _taken, leads=False, same_term=False),
    TermCase("taken by b, then released", _taken_and_released, leads=True, same_term=False),
    TermCase("taken by b, then expired (a waits out b's lease)", _taken, leads=True,
             same_term=False, attempts=8),
    TermCase("deleted and recreated", _deleted, leads=True, same_term=False),
    TermCase("owned by a namesake in between", _namesake, leads=True, same_term=False),
]


@pytest.mark.parametrize("case", TERM_CASES, ids=lambda c: c.name)
def test_a_term_lasts_until_the_lease_changes_hands(case: TermCase) -> None:
    server, clock = LeaseServer(), Clock()
    a = elector(server, "a", clock, lease_duration=3, renew_deadline=2, retry_period=0.5)
    b = elector(server, "b", Clock(), lease_duration=3, renew_deadline=2, retry_period=0.5)
    assert a.try_acquire_or_renew() and a.term is not None
    before = a.term
    case.between(server, clock, b)
    for _ in range(case.attempts):
        clock.now += 0.5
        a.try_acquire_or_renew()
    assert a.is_leader is case.leads
    if case.leads:
        assert (a.term == before) is case.same_term
    else:
        assert a.term is None


def test_a_late_renewal_pauses_writes_but_keeps_the_term() -> None:
    """While the renewal is late ``is_leader`` is False (the fence refuses writes) but the
    term is kept; the renewal that lands resumes it, and the Lease shows no transition."""
    server, clock = LeaseServer(), Clock()
    a = elector(server, "a", clock, lease_duration=3, renew_deadline=2, retry_period=0.5)
    assert a.try_acquire_or_renew()
    term = a.term
    server.down = True
    clock.now += 2.5
    with pytest.raises(TransportError):
        a.try_acquire_or_renew()
    a._won(False, clock.now)
    assert not a.is_leader and a.term == term
    server.down = False
    assert a.try_acquire_or_renew() and a.is_leader and a.term == term
    assert server.lease["spec"]["leaseTransitions"] == 0  # type: ignore[index]


def test_a_standby_counts_expiry_from_when_its_read_returned() -> None:
    """b's read of the Lease takes 1.5 s, and a renews meanwhile: b must wait a whole lease
    from the reply (a may write until its renewal plus the deadline), not from the moment
    it asked, or for half a second both would write."""
    server, clock = LeaseServer(), Clock()
    timings = {"lease_duration": 3, "renew_deadline": 2, "retry_period": 0.5}
    a = elector(server, "a", clock, **timings)
    assert a.try_acquire_or_renew()

    @dataclass
    class SlowRead(FakeLeaseClient):
        slow: bool = True

        def request(self, method: str, path: str, **kw: Any) -> Response:
            if method == "GET" and self.slow:
                self.slow = False
                clock.now += 1.5
                assert a.try_acquire_or_renew()  # a renews while b's read is on its way
            return super().request(method, path, **kw)

    b = LeaderElector(SlowRead(server), NS, NAME, "b", monotonic=clock, **timings)
    assert not b.try_acquire_or_renew()
    clock.now += 1.6  # 3.1 s after b asked, 1.6 s after a's renewal: a still leads
    assert a.is_leader
    assert not b.try_acquire_or_renew() and not b.is_leader
    clock.now += 1.5  # a whole lease after the reply: a is long past its deadline
    assert not a.is_leader and b.try_acquire_or_renew()


def test_the_fence_token_is_the_lease_as_written_and_a_takeover_makes_it_stale() -> None:
    """What the apiserver's fence compares a write's stamp with: the Lease's holder and
    leaseTransitions. A renewal keeps the token; a takeover gives the new holder one the old
    holder's can never equal; the old holder has none once it saw the takeover."""
    server, clock_a, clock_b = LeaseServer(), Clock(), Clock()
    a, b = elector(server, "a", clock_a), elector(server, "b", clock_b)
    assert a.fence_token is None and a.try_acquire_or_renew()
    assert a.fence_token == FenceToken("a", 0, LEASE)
    clock_a.now += 2
    assert a.try_acquire_or_renew() and a.fence_token == FenceToken("a", 0, LEASE)
    assert not b.try_acquire_or_renew() and b.fence_token is None
    clock_b.now += 16  # a paused past its Lease: b takes over
    assert b.try_acquire_or_renew()
    spec = server.lease["spec"]  # type: ignore[index]
    assert b.fence_token == FenceToken(spec["holderIdentity"], spec["leaseTransitions"], LEASE)
    assert b.fence_token == FenceToken("b", 1, LEASE) != FenceToken("a", 0, LEASE)
    clock_a.now += 16
    assert not a.try_acquire_or_renew() and a.fence_token is None
    b.release()  # given up and taken again: a new term, a new token
    assert a.try_acquire_or_renew() and a.fence_token == FenceToken("a", 2, LEASE)
