"""A leader paused mid-bind, past its lease, writes nothing when it resumes; one whose
renewal only comes late mid-bind completes the gang it was binding, without a takeover.

Deterministic rather than SIGSTOP at a random moment: leader A's binder is stopped at its first
bind of gang ``low`` (the plan made, not one Binding sent), and A's Lease renewals stop, as in a
frozen process. Standby B takes the Lease and, seeing a higher-priority gang ``high`` that needs
the whole node, binds it there. Then A resumes with its stale plan (``low`` on that same node):
without fencing its Bindings would go out and the node would have 16 GPUs of pods on 8 (the
apiserver does not check capacity; tests/e2e/capacity.py would flag it). With fencing, every
one of A's writes is refused before it is sent, ``low`` stays pending, and B keeps leading.

A late renewal is the same pause seen from the inside, without anyone taking over: the binds
after it are fenced, and once the renewal lands the Lease is still as the replica left it, so
its term goes on. The regression it guards: the replica used to treat its next cycle as a
takeover and roll back (delete) the members it had just bound.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.kube.lead.fence import Fenced
from scheduler.run.config import LeaderElectionConfig
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import PodWatch
from tests.e2e.ops_support import Ops, ops_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def ops(control_plane: ControlPlane) -> Iterator[Ops]:
    yield from ops_for(control_plane)


def test_a_leader_paused_past_its_lease_is_fenced_when_it_resumes(ops: Ops) -> None:
    ops.tenant.create_nodes(1, gpus=8)
    queue = ops.queue("q", gpus=8)
    urgent = ops.priority_class("urgent", 1000)
    election = LeaderElectionConfig(enabled=True, lease_name=ops.name("lease"),
                                    lease_namespace=ops.cp.new_namespace("lease"),
                                    lease_duration_seconds=3, renew_deadline_seconds=2,
                                    retry_period_seconds=0.5)
    a = ops.start_scheduler(identity="a", leader_election=election)
    wait_for(lambda: a.live.is_leader, 30, what="a leads")

    paused, resume = threading.Event(), threading.Event()
    original = a.live.binder.bind_gangs

    def frozen_bind(gangs: Any, scheduler_name: str) -> Any:
        if any(gid.endswith("/low") for gid, _ in gangs) and not paused.is_set():
            a.live.elector.try_acquire_or_renew = lambda: False  # type: ignore[union-attr,method-assign]
            paused.set()
            resume.wait(120)
        return original(gangs, scheduler_name)

    a.live.binder.bind_gangs = frozen_bind  # type: ignore[method-assign]
    b = ops.start_scheduler(identity="b", leader_election=election)
    with PodWatch(ops.cp, ops.ns) as watch:
        low = ops.gang("low", 2, 4, queue)
        wait_for(paused.is_set, 30, what="a frozen in the middle of binding low")
        # Before b leads, so that its first cycle sees both and gives the node to high.
        high = ops.gang("high", 1, 8, queue, priority_class=urgent)
        wait_for(lambda: b.live.is_leader, 30, what="b takes over the Lease")
        wait_for(lambda: ops.tenant.all_bound(high), 60, what="high bound by b")
        assert not a.live.is_leader
        resume.set()  # a carries on with its stale plan
        wait_for(lambda: a.live.metrics.fenced_writes._value.get() >= 1, 30,
                 what="a's stale binds refused")
    assert ops.tenant.bound(low) == [], "a stale bind went out"
    assert not any(n in watch.bound_names() for n in low)
    assert watch.rebinds() == {}
    assert b.live.is_leader


def test_a_leader_whose_renewal_comes_late_mid_gang_completes_it_without_a_rollback(
        ops: Ops) -> None:
    ops.tenant.create_nodes(1, gpus=8)
    queue = ops.queue("q", gpus=8)
    election = LeaderElectionConfig(enabled=True, lease_name=ops.name("lease"),
                                    lease_namespace=ops.cp.new_namespace("lease"),
                                    lease_duration_seconds=3, renew_deadline_seconds=2,
                                    retry_period_seconds=0.5)
    a = ops.start_scheduler(identity="a", leader_election=election, bind_concurrency=1)
    elector = a.live.elector
    assert elector is not None
    wait_for(lambda: a.live.scheduler.cycles >= 1, 30, what="a leads its first cycle")
    term = elector.term

    takeovers: list[bool] = []
    run_once = a.live.scheduler.run_once

    def recording(takeover: bool = False) -> Any:
        takeovers.append(takeover)
        return run_once(takeover)

    a.live.scheduler.run_once = recording  # type: ignore[method-assign]
    late, lifted = threading.Event(), threading.Event()  # renewals hang while *late*
    refused = threading.Event()  # a bind of the gang was fenced
    renew = elector.try_acquire_or_renew

    def slow_renewal() -> bool:
        while late.is_set():
            time.sleep(0.02)
        return renew()

    elector.try_acquire_or_renew = slow_renewal  # type: ignore[method-assign]
    writes = a.live.binder.client
    send = writes.request

    def late_after_the_first_bind(method: str, path: str, **kw: Any) -> Any:
        binding = path.endswith("/binding") and "/pods/slow-" in path
        try:
            resp = send(method, path, **kw)
        except Fenced:
            if binding:
                refused.set()
            raise
        if binding and not lifted.is_set():
            lifted.set()
            late.set()  # the renewal hangs from here: past the deadline, writes are fenced
            wait_for(lambda: not a.live.is_leader, 30, what="a's renewal late")
        return resp

    writes.request = late_after_the_first_bind  # type: ignore[method-assign]
    with PodWatch(ops.cp, ops.ns) as watch:
        gang = ops.gang("slow", 4, 2, queue)
        uids = {n: p["metadata"]["uid"] for n, p in ops.tenant.pods().items() if n in gang}
        wait_for(refused.is_set, 30, what="the next bind of slow refused by the fence")
        late.clear()  # the renewal lands: nobody else owned the Lease
        wait_for(lambda: ops.tenant.all_bound(gang), 60, what="slow completed")
    assert elector.term == term, "a late renewal began a new term"
    assert takeovers and not any(takeovers), takeovers  # the first cycle was the one
    pods = ops.tenant.pods()
    assert {n: pods[n]["metadata"]["uid"] for n in gang} == uids, "a member was deleted"
    assert watch.rebinds() == {}
