"""PodDisruptionBudgets with the real disruption controller: a budget that allows fewer
disruptions than it covers of a victim gang never splits the gang. The Eviction API checks
a budget one pod at a time (it would let the first pod go and refuse the second), so the
scheduler does the arithmetic first (``evictor.budget_refusal``, table-tested in
tests/unit/kube/test_evictor.py) and evicts all of the gang or none of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.ops_support import DeletionWatch, Ops, ops_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def ops(control_plane: ControlPlane) -> Iterator[Ops]:
    yield from ops_for(control_plane)


def budget_status(ops: Ops, name: str) -> dict[str, Any]:
    pdbs = client.PolicyV1Api(ops.cp.api)
    return dict(rest.call(pdbs.read_namespaced_pod_disruption_budget_status, name,
                          ops.ns).get("status") or {})


def test_a_budget_allowing_one_of_two_victims_evicts_neither_then_both(ops: Ops) -> None:
    ops.tenant.create_nodes(1, gpus=8)
    queue = ops.queue("q", gpus=8, preemption={"withinQueue": "LowerPriority"})
    low, high = ops.priority_class("low", 100), ops.priority_class("high", 1000)
    pdbs = client.PolicyV1Api(ops.cp.api)
    # (minAvailable: maxUnavailable needs a controller with a scale for bare pods' budget.)
    ops.budget("one-at-a-time", "victim", minAvailable=1)
    with DeletionWatch(ops.cp, ops.ns) as watch:
        runner = ops.start_scheduler(eviction_grace_period_seconds=5)
        victim = ops.gang("victim", 2, 4, queue, priority_class=low)
        wait_for(lambda: ops.tenant.all_bound(victim), 30, what="the victim gang bound")
        # The real disruption controller counts the two healthy pods: one may go.
        wait_for(lambda: budget_status(ops, "one-at-a-time").get("disruptionsAllowed") == 1
                 and budget_status(ops, "one-at-a-time").get("currentHealthy") == 2, 60,
                 what="the disruption controller allowing 1 disruption")
        preemptor = ops.gang("preemptor", 1, 8, queue, priority_class=high)
        blocked = wait_for(lambda: [e for e in ops.tenant.events("EvictionBlocked")
                                    if "one-at-a-time" in (e.get("note") or "")], 30,
                           what="EvictionBlocked naming the budget")
        assert "allows 1 disruption(s) and covers 2" in blocked[0]["note"], blocked[0]["note"]
        # Past the retry: refused again (the blocked count goes on), never split meanwhile.
        blocked_total = runner.live.metrics.evictions_blocked
        wait_for(lambda: (watch.deleting == {} and blocked_total._value.get() >= 2)
                 or bool(watch.deleting), 120, what="the eviction refused a second time")
        assert watch.deleting == {}, f"a victim gang split by its budget: {watch.deleting}"
        assert ops.tenant.bound(victim) == victim and ops.tenant.bound(preemptor) == []
        rest.call(pdbs.patch_namespaced_pod_disruption_budget, "one-at-a-time", ops.ns,
                  {"spec": {"minAvailable": 0}})
        wait_for(lambda: ops.tenant.all_bound(preemptor), 60,
                 what="the preemptor bound once the budget allows the whole gang")
        watch.seen_bound(preemptor)  # and so the evictions before it
        assert set(watch.deleting) == set(victim)
        assert watch.rebinds() == {}
