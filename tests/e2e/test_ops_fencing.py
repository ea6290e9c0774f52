"""A leader paused mid-bind, past its lease, writes nothing when it resumes.

Deterministic rather than SIGSTOP at a random moment: leader A's binder is held at its first
bind of gang ``low`` (the plan made, not one Binding sent), and A's Lease renewals stop, as in a
frozen process. Standby B takes the Lease and, seeing a higher-priority gang ``high`` that needs
the whole node, binds it there. Then A resumes with its stale plan (``low`` on that same node):
without fencing its Bindings would go out and the node would hold 16 GPUs of pods on 8 (the
apiserver does not check capacity; tests/e2e/capacity.py would flag it). With fencing, every
one of A's writes is refused before it is sent, ``low`` stays pending, and B keeps leading.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.config import LeaderElectionConfig
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
