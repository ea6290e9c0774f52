"""A leader failover in the middle of a preemption, on a real control plane: the new leader
has no memory of the previous leader's plan, yet it evicts nobody more. The victim the old
leader evicted is still terminating (its pods carry a finalizer, as a trainer that
checkpoints on SIGTERM lingers): the new leader never takes it as a victim again, and the
preemptor, which fits once it is gone, waits for it ("waiting for 1 terminating gang(s)")
instead of evicting the other, still running gang.

The other gang checkpoints right after the kill, which makes it by far the cheapest victim:
a new leader that counted the terminating gang as evictable again, or did not wait for it,
evicts the other gang (seen: both ways fail this test). Without that checkpoint, such a
leader would just pick the terminating gang once more and the extra eviction would not show.

Both schedulers are ``gang-scheduler run`` processes (``Replica`` of ``test_ops_failover``),
the standby takes over when the leader is SIGKILLed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.kube.read import informer
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import unschedulable_message
from tests.e2e.ops_support import DeletionWatch, Ops, ops_for
from tests.e2e.test_ops_failover import Replica

pytestmark = pytest.mark.e2e

LEASE_S, RENEW_S, RETRY_S = 3, 2, 0.5
# Long enough that victim-a is still terminating (its container running out its grace period)
# through the failover and the observation; the test lets it exit (`ops.release`) after.
GRACE_S = 120
#: How many passes of its loop the new leader is watched for (each a cycle if anything changed
#: or came due; 0.5 s apart idle).
OBSERVE_PASSES = 16


class ReasonWatch(DeletionWatch):
    """``DeletionWatch`` that also keeps every distinct pending message each pod was seen
    with (from the watch: a message written for one cycle only is not missed by polling)."""

    def __init__(self, cp: ControlPlane, namespace: str) -> None:
        super().__init__(cp, namespace)
        self.messages: dict[str, list[str]] = {}

    def __enter__(self) -> ReasonWatch:
        super().__enter__()
        return self

    def _handle(self, event: informer.EventType, obj: dict[str, Any]) -> None:
        super()._handle(event, obj)
        message = unschedulable_message(obj)
        with self._lock:
            seen = self.messages.setdefault(obj["metadata"]["name"], [])
            if message and message not in seen:
                seen.append(message)

    def messages_of(self, names: list[str]) -> list[str]:
        with self._lock:
            return [m for n in names for m in self.messages.get(n, ())]


@pytest.fixture
def ops(control_plane: ControlPlane) -> Iterator[Ops]:
    yield from ops_for(control_plane)


def test_a_new_leader_waits_for_the_victims_being_evicted_instead_of_evicting_more(
        ops: Ops, tmp_path: Path) -> None:
    nodes = ops.tenant.create_nodes(2, gpus=8)
    queue = ops.queue("q", gpus=64, preemption={"withinQueue": "LowerPriority"})
    low, high = ops.priority_class("low", 100), ops.priority_class("high", 1000)
    lease_ns = ops.cp.new_namespace("lease")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"schedulerName: {ops.tenant.scheduler_name}\n"
        f"defaultQueue: {ops.tenant.queue}\n"
        "cycleIntervalSeconds: 0.5\nbindBackoffInitialSeconds: 1\neventMinIntervalSeconds: 1\n"
        f"evictionGracePeriodSeconds: {GRACE_S}\n"
        f"leaderElection:\n  enabled: true\n  leaseName: {ops.name('lease')}\n"
        f"  leaseNamespace: {lease_ns}\n  leaseDurationSeconds: {LEASE_S}\n"
        f"  renewDeadlineSeconds: {RENEW_S}\n  retryPeriodSeconds: {RETRY_S}\n")
    pods = ops.tenant.pods

    with ReasonWatch(ops.cp, ops.ns) as watch:
        a = Replica.start(ops, "a", config, tmp_path)
        wait_for(lambda: a.metric("gang_scheduler_is_leader") == 1, 30, what="a leads")
        b = Replica.start(ops, "b", config, tmp_path)
        # Two low-priority gangs fill the two nodes, one node each. victim-a checkpointed
        # more recently than victim-b, so it is the one the first leader evicts.
        started = time.time()
        victim_a = ops.gang("victim-a", 2, 4, queue, priority_class=low, linger=True)
        ops.checkpoint("victim-a", started - 600)
        victim_b = ops.gang("victim-b", 2, 4, queue, priority_class=low, linger=True)
        ops.checkpoint("victim-b", started - 3600)
        victims = [*victim_a, *victim_b]
        wait_for(lambda: ops.tenant.all_bound(victims), 30, what="both victim gangs bound")
        node_of = ops.tenant.nodes_of(victims)
        node_a, node_b = node_of[victim_a[0]], node_of[victim_b[0]]
        assert {node_of[n] for n in victim_a} == {node_a}, node_of
        assert {node_of[n] for n in victim_b} == {node_b}, node_of
        assert {node_a, node_b} == set(nodes), node_of

        # A high-priority gang that needs one whole node: a evicts victim-a (all of it).
        preemptor = ops.gang("preemptor", 2, 4, queue, priority_class=high)
        wait_for(lambda: all(n in watch.deleting for n in victim_a), 30,
                 what="the first leader evicts victim-a")
        a.kill()  # in the middle of the preemption: victim-a terminating, preemptor pending
        killed = time.monotonic()
        assert not any(n in watch.deleting for n in victim_b), watch.deleting
        ops.checkpoint("victim-b", time.time())  # now the cheapest victim by far
        wait_for(lambda: b.metric("gang_scheduler_is_leader") == 1, LEASE_S + 15,
                 interval_s=0.05, what="b takes over")
        print(f"b leads {time.monotonic() - killed:.2f}s after a was SIGKILLed")
        assert '"leader_acquired"' in b.log_path.read_text()
        # b decides with a clean slate for several cycles: victim-b is left alone, victim-a
        # is awaited. (b's first cycle says "waiting for 1 terminating gang(s) ... without
        # evicting more"; from its second on, b carries that nomination over as its own and
        # says "waiting for 1 preempted gang(s) to terminate", a's wording too: either names
        # victim-a alone.)
        def left_alone() -> None:
            assert not any(n in watch.deleting for n in victim_b), \
                f"the new leader evicted more: {watch.deleting}"

        def awaiting_victim_a(pod: dict[str, Any]) -> bool:
            """The pod's pending reason says it waits for victim-a alone (b's wording, not
            the "evicting 1 gang(s)" a may have written just before it was killed)."""
            message = unschedulable_message(pod)
            return (message.startswith("PreemptionPending") and "waiting for 1 " in message
                    and f"{ops.ns}/victim-a" in message and "victim-b" not in message)

        def preemption_pending() -> bool:
            """b says so in its metric and on the preemptor's pods, and nominates them onto
            victim-a's node. (The pods' condition and nomination are written in the background
            after the cycle, each its own write: a was killed right after evicting, maybe
            before it wrote either, so b's writes may come a moment after its metric.)"""
            left_alone()
            current = pods()
            return (b.metric("gang_scheduler_pending_gangs", queue=queue,
                             reason="PreemptionPending") == 1
                    and all(awaiting_victim_a(current[n])
                            and current[n]["status"].get("nominatedNodeName") == node_a
                            for n in preemptor))

        wait_for(preemption_pending, 30, what="b: the preemptor PreemptionPending")
        cycles = b.metric("gang_scheduler_cycles_total")
        passes = b.metric("gang_scheduler_loop_passes_total")
        watched = time.monotonic()
        # Until b's loop has passed OBSERVE_PASSES times (so many chances to evict more),
        # however loaded the machine: a fixed span of seconds may see only a few.
        while b.metric("gang_scheduler_loop_passes_total") < passes + OBSERVE_PASSES:
            assert time.monotonic() - watched < 300, "b's loop passed too few times in 300 s"
            current = pods()
            left_alone()
            for name in victim_b:
                assert not current[name]["metadata"].get("deletionTimestamp"), current[name]
                assert current[name]["spec"].get("nodeName") == node_b, current[name]
            for name in victim_a:  # still terminating, still on its node
                assert current[name]["metadata"].get("deletionTimestamp"), current[name]
            for name in preemptor:
                assert not current[name]["spec"].get("nodeName"), current[name]
                assert current[name]["status"].get("nominatedNodeName") == node_a, current[name]
                message = unschedulable_message(current[name])
                assert message.startswith("PreemptionPending"), message
                assert "waiting for 1 " in message and f"{ops.ns}/victim-a" in message, message
                assert "victim-b" not in message, message
            assert b.metric("gang_scheduler_pending_gangs", queue=queue,
                            reason="PreemptionPending") == 1
            time.sleep(0.5)
        ran = b.metric("gang_scheduler_cycles_total") - cycles
        print(f"b ran {ran:.0f} cycles in {time.monotonic() - watched:.1f}s without evicting; "
              "the preemptor's "
              f"reasons: {sorted(set(watch.messages_of(preemptor)))}")
        assert b.metric("gang_scheduler_evictions_total") == 0
        # Preempted events name victim-a's pods and, when a wrote it before it was killed, its
        # PodGroup (d600e88): never anything of victim-b's.
        assert {e["regarding"]["name"] for e in ops.tenant.events("Preempted")} \
            <= {*victim_a, "victim-a"}

        # victim-a finishes terminating: the preemptor binds whole, on the node it freed.
        for name in victim_a:
            ops.release(name)
        wait_for(lambda: ops.tenant.all_bound(preemptor), 40, what="the preemptor bound")
        assert ops.tenant.nodes_of(preemptor) == {n: node_a for n in preemptor}
        assert ops.tenant.nodes_of(victim_b) == {n: node_b for n in victim_b}
        assert set(watch.deleting) == set(victim_a), watch.deleting
        assert b.metric("gang_scheduler_evictions_total") == 0
        # Counted once the Bindings returned, after the test may see the pods bound.
        wait_for(lambda: b.metric("gang_scheduler_binds_total", result="success") >= 1, 30,
                 what="b counted its bind")
        assert watch.rebinds() == {}
