"""Live preemption on a real control plane: whole victim gangs, the Eviction API with the
configured grace period, nominated nodes kept until the victims are gone, budgets obeyed.

Victim pods carry a finalizer so that they linger while terminating, as real trainers do
while they checkpoint: that opens the window in which the freed capacity must stay kept for
the preemptor, and lets the test see each step.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from kubernetes import client

from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import unschedulable_message
from tests.e2e.ops_support import DeletionWatch, Ops, ops_for, scrape, value

pytestmark = pytest.mark.e2e


@pytest.fixture
def ops(control_plane: ControlPlane) -> Iterator[Ops]:
    yield from ops_for(control_plane)

GRACE_S = 7
# Long enough that lingering victims are still terminating (their containers running out their
# grace period, as a checkpointing trainer does) for every step the test watches; the test
# lets them exit (`ops.release`) well before.
LINGER_GRACE_S = 120


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in pod.get("status", {}).get("conditions") or ()
                 if c.get("type") == kind), {})


def test_a_high_priority_gang_preempts_a_whole_lower_priority_gang(ops: Ops) -> None:
    ops.tenant.create_nodes(2, gpus=8)
    queue = ops.queue("q", gpus=64, preemption={"withinQueue": "LowerPriority"})
    low, high = ops.priority_class("low", 100), ops.priority_class("high", 1000)
    with DeletionWatch(ops.cp, ops.ns) as watch:
        runner = ops.start_scheduler(eviction_grace_period_seconds=LINGER_GRACE_S)
        victim = ops.gang("victim", 2, 8, queue, priority_class=low, linger=True)
        wait_for(lambda: ops.tenant.all_bound(victim), 30, what="the victim gang bound")
        # A low-priority pod that would fit in half of what the victim frees: it must wait.
        ops.pod("rival", 4, queue, priority_class=low)
        wait_for(lambda: ops.tenant.events("FailedScheduling"), 30, what="rival pending")
        preemptor = ops.gang("preemptor", 2, 4, queue, priority_class=high)
        pods = ops.tenant.pods
        # The whole victim is evicted (half of it would have made room): marked, then deleted
        # through the Eviction API with the configured cap as grace period (the lingering pods ask
        # for more: each victim keeps its own grace up to the cap).
        wait_for(lambda: all(n in watch.deleting for n in victim), 30, what="victim evicted")
        assert {n: watch.deleting[n] for n in victim} == {n: LINGER_GRACE_S for n in victim}
        # The Eviction API writes its own DisruptionTarget ("Eviction API: evicting"); the
        # scheduler writes its own again once the eviction is accepted, in the background.
        def marked(name: str) -> dict[str, Any]:
            found = condition(pods()[name], "DisruptionTarget")
            return found if f"{ops.ns}/preemptor" in found.get("message", "") else {}

        for name in victim:
            target = wait_for(partial(marked, name), 30,
                              what=f"{name}: DisruptionTarget names the preemptor")
            assert (target["status"], target["reason"]) == ("True", "PreemptionByScheduler")
        events = wait_for(lambda: [e for e in ops.tenant.events("Preempted")
                                   if e["regarding"]["name"] in victim]
                          if len(ops.tenant.events("Preempted")) >= 2 else [], 30,
                          what="Preempted events")
        assert {e["regarding"]["name"] for e in events} == set(victim)
        assert all(f"{ops.ns}/preemptor" in e["note"] for e in events)
        # The preemptor is nominated where it will go; nothing binds while victims linger.
        nominated = wait_for(lambda: {n: pods()[n]["status"].get("nominatedNodeName")
                                      for n in preemptor}
                             if all(pods()[n]["status"].get("nominatedNodeName")
                                    for n in preemptor) else {}, 30, what="nominations")
        kept = set(nominated.values())
        first = next(n for n in victim if pods()[n]["spec"]["nodeName"] in kept)
        ops.release(first)  # one victim pod gone: its node is free, but kept for the preemptor
        wait_for(lambda: first not in pods(), 30, what=f"{first} gone")
        runner.run_cycles(6)
        assert ops.tenant.bound(["rival", *preemptor]) == [], "kept capacity was taken"
        ops.release(next(n for n in victim if n != first))
        wait_for(lambda: ops.tenant.all_bound(preemptor), 30, what="preemptor bound")
        assert ops.tenant.nodes_of(preemptor) == nominated
        if "rival" in watch.first_bound:  # it may take what is left once every victim is gone
            # Gone = exited (Failed occupies nothing), which one watch orders before the
            # rival's bind; the deletion itself may come later (its finalizer goes after).
            wait_for(lambda: all(n in watch.finished for n in victim), 30,
                     what="the watch saw both victims exit")
            assert watch.first_bound["rival"] >= max(watch.finished[n] for n in victim)
        assert watch.rebinds() == {}
        metrics = runner.live.metrics.registry
        assert metrics.get_sample_value("gang_scheduler_preemptions_total", {"queue": queue}) == 1
        assert metrics.get_sample_value("gang_scheduler_evictions_total") == 2


def test_an_eviction_refused_by_a_disruption_budget_is_reported_not_forced(ops: Ops) -> None:
    ops.tenant.create_nodes(1, gpus=8)
    queue = ops.queue("q", gpus=8, preemption={"withinQueue": "LowerPriority"})
    low, high = ops.priority_class("low", 100), ops.priority_class("high", 1000)
    pdbs = client.PolicyV1Api(ops.cp.api)
    ops.budget("keep-victim", "victim", minAvailable=2)
    with DeletionWatch(ops.cp, ops.ns) as watch:
        runner = ops.start_scheduler(metrics_port=True, eviction_grace_period_seconds=GRACE_S)
        victim = ops.gang("victim", 2, 4, queue, priority_class=low)
        wait_for(lambda: ops.tenant.all_bound(victim), 30, what="the victim gang bound")
        preemptor = ops.gang("preemptor", 1, 8, queue, priority_class=high)
        blocked = wait_for(lambda: ops.tenant.events("EvictionBlocked"), 30,
                           what="EvictionBlocked event")
        assert "disruption budget" in blocked[0]["note"], blocked[0]["note"]
        assert f"{ops.ns}/preemptor" in blocked[0]["note"]
        # The event is written in the background, the metrics once the cycle's writes were
        # handed over: either may come first.
        def counted() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
            samples = scrape(runner.metrics_port)  # type: ignore[attr-defined]
            return samples if value(samples, "gang_scheduler_evictions_blocked_total") else {}

        samples = wait_for(counted, 30, what="the blocked eviction counted")
        assert value(samples, "gang_scheduler_evictions_blocked_total") >= 1
        assert value(samples, "gang_scheduler_pending_gangs", queue=queue,
                     reason="PreemptionPending") == 1
        runner.run_cycles()
        assert watch.deleting == {}, "an eviction was forced past the budget"
        assert ops.tenant.bound(victim) == victim and ops.tenant.bound(preemptor) == []
        rest.call(pdbs.delete_namespaced_pod_disruption_budget, "keep-victim", ops.ns)
        wait_for(lambda: ops.tenant.all_bound(preemptor), 40, what="preemptor bound after retry")
        watch.seen_bound(preemptor)  # and so the evictions before it
        assert set(watch.deleting) == set(victim)
        assert watch.rebinds() == {}


def test_a_gang_of_a_never_preempting_priority_class_waits_instead_of_evicting(ops: Ops) -> None:
    """``preemptionPolicy: Never`` on a PriorityClass reaches the pods through the apiserver's
    Priority admission plugin; the gang is then as high as its priority says but evicts
    nobody, and its pending message says why. The same setup with a default-policy class
    preempts: that is the first test of this module."""
    ops.tenant.create_nodes(2, gpus=8)
    queue = ops.queue("q", gpus=64, preemption={"withinQueue": "LowerPriority"})
    low = ops.priority_class("low", 100)
    never = ops.priority_class("never", 1000, preemption_policy="Never")
    with DeletionWatch(ops.cp, ops.ns) as watch:
        runner = ops.start_scheduler(eviction_grace_period_seconds=GRACE_S)
        victim = ops.gang("victim", 2, 8, queue, priority_class=low, linger=True)
        wait_for(lambda: ops.tenant.all_bound(victim), 30, what="the victim gang bound")
        waiting = ops.gang("waiting", 2, 4, queue, priority_class=never)
        pods = ops.tenant.pods
        # (a) The apiserver, not the test, put the policy (and the priority) on the pods.
        specs = {n: pods()[n]["spec"] for n in [*victim, *waiting]}
        assert {n: (s.get("priority"), s.get("preemptionPolicy")) for n, s in specs.items()} == {
            **{n: (100, "PreemptLowerPriority") for n in victim},
            **{n: (1000, "Never") for n in waiting}}
        # (c) The scheduler considered the gang, found that preemption would help, and says
        # that the policy forbids it.
        messages = wait_for(lambda: {n: unschedulable_message(pods()[n]) for n in waiting}
                            if all("preemptionPolicy" in unschedulable_message(pods()[n])
                                   for n in waiting) else {}, 60,
                            what="the preemptionPolicy pending reason")
        for message in messages.values():
            assert "preemption is disabled by its preemptionPolicy (Never)" in message, message
            assert "evicting 1 gang(s) would let it start now" in message, message
        # (b) Nobody is evicted, marked or displaced for it, over many cycles.
        for _ in runner.during_cycles(10):
            current = pods()
            assert watch.deleting == {}, f"evicted for a Never gang: {watch.deleting}"
            assert ops.tenant.bound(victim) == victim
            for name in victim:
                assert not current[name]["metadata"].get("deletionTimestamp"), current[name]
                assert condition(current[name], "DisruptionTarget") == {}, current[name]
            assert ops.tenant.bound(waiting) == []
            assert not any(current[n]["status"].get("nominatedNodeName") for n in waiting)
        assert ops.tenant.events("Preempted") == []
        metrics = runner.live.metrics.registry
        assert not metrics.get_sample_value("gang_scheduler_preemptions_total", {"queue": queue})
        assert not metrics.get_sample_value("gang_scheduler_evictions_total")
        # It still runs as soon as the capacity is freed by someone else.
        for name in victim:
            ops.tenant.delete_pod(name)
            ops.release(name)
        wait_for(lambda: ops.tenant.all_bound(waiting), 40, what="the Never gang bound")
        assert watch.rebinds() == {}


def test_preemption_switched_off_in_the_config_evicts_nobody(ops: Ops) -> None:
    """The config's ``schedulerPolicy`` (the ConfigMap key) is what the live scheduler obeys:
    with ``preemption: false`` a high-priority gang waits behind a full cluster."""
    ops.tenant.create_nodes(2, gpus=8)
    queue = ops.queue("q", gpus=64, preemption={"withinQueue": "LowerPriority"})
    low, high = ops.priority_class("low", 100), ops.priority_class("high", 1000)
    with DeletionWatch(ops.cp, ops.ns) as watch:
        runner = ops.start_scheduler(scheduler_policy={"preemption": False})
        assert not runner.live.policies.current().scheduler.preemption
        victim = ops.gang("victim", 2, 8, queue, priority_class=low, linger=True)
        wait_for(lambda: ops.tenant.all_bound(victim), 30, what="the victim gang bound")
        waiting = ops.gang("waiting", 2, 4, queue, priority_class=high)
        pods = ops.tenant.pods
        wait_for(lambda: all(unschedulable_message(pods()[n]) for n in waiting), 30,
                 what="the high-priority gang's pending reason")
        for _ in runner.during_cycles(10):  # with the gang pending
            assert not watch.deleting, f"evicted with preemption off: {watch.deleting}"
        assert ops.tenant.all_bound(victim)
        assert ops.tenant.bound(waiting) == []
