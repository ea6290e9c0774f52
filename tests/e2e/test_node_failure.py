"""A node fails under a running gang, end to end with the real controllers.

kwok makes the node report NotReady (kwok-stages.yaml, ``node-failure``: a kubelet whose
runtime died), the real node lifecycle controller taints it ``not-ready``, the real
taint-eviction controller evicts the rank on it, the real Job controller recreates that rank,
and gang-scheduler:

- says the running gang is below its minimum, where users look: a ``BelowMinimum`` Warning
  event on the Job naming the missing rank, the ``gangs_below_minimum`` gauge, ``explain``;
- does not place the new rank on the failed node, and while no node has room tells it why;
- keeps the surviving rank through a restart of its own (a takeover: the new term's first
  cycle rolls back only gangs cut mid-bind, and this one lost a member after it started);
- places it beside the surviving rank once a node has room, and says the gang is whole again.

The pods tolerate ``not-ready`` for 0 s instead of the 300 s that admission adds by default,
so the eviction comes at once (the node lifecycle controller's own grace period still runs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from scheduler.cli.explain import explain_text, resolve
from scheduler.decide.plan import RollbackCause
from scheduler.model.durations import parse_time
from scheduler.tools.devcluster import nodes, rest
from tests.e2e.cluster_api import wait_for
from tests.e2e.live import (
    JOB_NAME_LABEL,
    POOL_LABEL,
    QUEUE_LABEL,
    InProcessScheduler,
    Tenant,
    unschedulable_message,
)

pytestmark = pytest.mark.e2e

INDEX = "batch.kubernetes.io/job-completion-index"
EVICT_AT_ONCE = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                  "effect": "NoExecute", "tolerationSeconds": 0}]


def ready(node: dict[str, Any]) -> str:
    return next((c["status"] for c in node.get("status", {}).get("conditions") or ()
                 if c["type"] == "Ready"), "")


def rank(tenant: Tenant, index: int) -> list[str]:
    """The live (not terminating) pods of rank *index* of Job ``train``."""
    return sorted(n for n, p in tenant.pods().items()
                  if p["metadata"]["labels"].get(JOB_NAME_LABEL) == "train"
                  and p["metadata"]["labels"].get(INDEX) == str(index)
                  and not p["metadata"].get("deletionTimestamp"))


def job_events(tenant: Tenant, reason: str) -> list[str]:
    return [e.get("note", "") for e in tenant.events(reason)
            if (e.get("regarding") or {}).get("kind") == "Job"
            and e["regarding"].get("name") == "train"]


def short_gangs(live: InProcessScheduler, queue: str) -> float | None:
    return live.live.metrics.registry.get_sample_value(
        "gang_scheduler_gangs_below_minimum", {"queue": queue})


@pytest.fixture
def failed_nodes(tenant: Tenant) -> Iterator[list[str]]:
    """Nodes a test fails; made Ready again at teardown so the cluster stays clean."""
    failed: list[str] = []
    yield failed
    for name in failed:
        nodes.recover_node(tenant.cp.api, name)


def rollbacks(live: InProcessScheduler) -> float:
    """Gangs it rolled back, whatever the cause."""
    registry = live.live.metrics.registry
    return sum(registry.get_sample_value("gang_scheduler_rollbacks_total",
                                         {"reason": str(cause)}) or 0.0
               for cause in RollbackCause)


def test_a_lost_nodes_rank_is_recreated_and_placed_beside_the_survivor(
        tenant: Tenant, start_scheduler: Callable[..., InProcessScheduler],
        failed_nodes: list[str]) -> None:
    live_scheduler = start_scheduler()
    tenant.create_nodes(2, gpus=8)
    template = {"metadata": {"labels": {QUEUE_LABEL: tenant.queue}},
                "spec": {**tenant.pod_spec(gpus=8), "tolerations": EVICT_AT_ONCE}}
    rest.call(client.BatchV1Api(tenant.cp.api).create_namespaced_job, tenant.namespace, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "labels": {QUEUE_LABEL: tenant.queue}},
        "spec": {"parallelism": 2, "completions": 2, "completionMode": "Indexed",
                 "backoffLimitPerIndex": 3, "template": template}})
    (first,) = wait_for(lambda: rank(tenant, 0), 60, what="rank 0")
    (second,) = wait_for(lambda: rank(tenant, 1), 60, what="rank 1")
    wait_for(lambda: tenant.all_bound([first, second]), 60, what="both ranks bound")
    placed = tenant.nodes_of([first, second])
    lost, survivor = placed[first], placed[second]
    assert lost != survivor

    failed_nodes.append(lost)
    nodes.fail_node(tenant.cp.api, lost, "test: node lost")
    wait_for(lambda: ready(tenant.cp.get_node(lost)) == "False", 60,
             what=f"{lost} reporting NotReady")
    (retry,) = wait_for(lambda: [n for n in rank(tenant, 0) if n != first], 180,
                        what="the taint-eviction controller evicting rank 0 and the Job "
                             "controller recreating it")

    # The gang is told short, on the Job, naming the rank; the gauge counts it.
    notes = wait_for(lambda: job_events(tenant, "BelowMinimum"), 60,
                     what="a BelowMinimum event on the Job")
    assert any("1 of 2 members running" in n and "rank 0" in n for n in notes), notes
    wait_for(lambda: short_gangs(live_scheduler, tenant.queue) == 1.0, 30,
             what="gangs_below_minimum 1")
    # No room: the survivor's node is full, the lost one tainted: it waits, and says why.
    message = wait_for(lambda: unschedulable_message(tenant.pods()[retry]), 60,
                       what="the new rank 0's pending reason")
    assert tenant.bound([retry]) == [], message
    cache = live_scheduler.live.cache  # explain of the pod a user sees pending
    gang, _ = resolve(f"{tenant.namespace}/{retry}", cache, time.time())
    text, found = explain_text(gang, cache, live_scheduler.live.policies, time.time())
    assert found and "rank 0" in text and "1 replacement(s) waiting" in text, text

    # The scheduler restarts meanwhile: its first cycle is a takeover, and keeps the survivor
    # (it lost a member after it started; it was not cut mid-bind).
    survivor_uid = tenant.pods()[second]["metadata"]["uid"]
    live_scheduler.stop()
    live_scheduler = start_scheduler()
    live_scheduler.run_cycles(4)
    kept = tenant.pods().get(second, {}).get("metadata", {})
    assert kept.get("uid") == survivor_uid and not kept.get("deletionTimestamp"), kept
    assert rollbacks(live_scheduler) == 0.0
    assert tenant.bound([retry]) == []

    spare = tenant.cp.create_node(f"{tenant.pool}-spare", gpus=8,
                                  labels={POOL_LABEL: tenant.pool})
    wait_for(lambda: tenant.all_bound([retry]), 60, what="the new rank 0 bound")
    assert tenant.nodes_of([retry, second]) == {retry: spare, second: survivor}
    assert tenant.phases([second]) == {second: "Running"}, "the surviving rank kept running"
    wait_for(lambda: job_events(tenant, "MinimumRestored"), 60,
             what="a MinimumRestored event on the Job")
    wait_for(lambda: short_gangs(live_scheduler, tenant.queue) is None, 30,
             what="gangs_below_minimum cleared")


def test_a_restart_keeps_a_drained_gangs_survivor_while_its_recreated_member_waits(
        tenant: Tenant, start_scheduler: Callable[..., InProcessScheduler]) -> None:
    """A node drained under a running PodGroup gang (cordoned, its member deleted) and the
    member recreated, as its operator would: the gang is partly bound, 1 of 2, but it was not
    cut mid-bind (the new member came after the survivor started). Neither the running
    scheduler nor a restarted one (a takeover) deletes the survivor; the gang is completed
    once there is room. (A Job's gang here is a ``scheduling.k8s.io`` PodGroup, which is never
    rolled back once a member runs, so this uses a scheduler-plugins PodGroup.)"""
    tenant.create_nodes(2, gpus=8)
    pair = tenant.create_gang("pair", 2, gpus=8)
    live = start_scheduler()
    wait_for(lambda: tenant.all_bound(pair), 60, what="the gang bound")
    wait_for(lambda: set(tenant.phases(pair).values()) == {"Running"}, 60, what="it running")
    lost, survivor = pair
    drained = tenant.nodes_of([lost])[lost]
    nodes.cordon_node(tenant.cp.api, drained)
    tenant.delete_pod(lost)
    wait_for(lambda: lost not in tenant.pods(), 60, what=f"{lost} gone")
    # Pod times are whole seconds: the new member must come in a later second than the
    # survivor's start for the pods to tell it came after (as it does, a run later, in life).
    started = parse_time(tenant.pods()[survivor]["status"]["startTime"])
    wait_for(lambda: time.time() >= started + 1.0, 10, what="the next second")
    created = parse_time(tenant.create_pod("pair-2", gpus=8, group="pair")
                         ["metadata"]["creationTimestamp"])
    assert created > started
    uid = tenant.pods()[survivor]["metadata"]["uid"]

    live.run_cycles(2)
    partly = live.live.cache.cycle_input(time.time()).gangs.partially_bound
    assert [[r.name for r in refs] for refs in partly.values()] == [[survivor]], partly
    live.stop()
    live = start_scheduler()  # its first cycle is a takeover
    live.run_cycles(4)
    kept = tenant.pods().get(survivor, {}).get("metadata", {})
    assert kept.get("uid") == uid and not kept.get("deletionTimestamp"), kept
    assert rollbacks(live) == 0.0
    assert tenant.bound(["pair-2"]) == []

    nodes.cordon_node(tenant.cp.api, drained, on=False)
    wait_for(lambda: tenant.all_bound(["pair-2"]), 60, what="the recreated member bound")
    assert tenant.nodes_of(["pair-2"]) == {"pair-2": drained}
    assert tenant.pods()[survivor]["metadata"]["uid"] == uid
