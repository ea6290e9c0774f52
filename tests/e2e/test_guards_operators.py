"""A queue's ``maxRuntimeSeconds`` on operator gangs, with the real JobSet and Trainer
controllers, on a busy pool (issue 38: "PodGroup, JobSet and TrainJob gangs have no deadline").

Each test goes through the same phases on the tenant's pool:

1. a *blocker* gang (a scheduler-plugins PodGroup, one pod per node taking all its GPUs) runs;
   the operator's workload is created behind it and waits, none of its pods bound, past any
   timeout it carries and for some scheduler cycles;
2. the queue is given ``maxRuntimeSeconds``: the blocker, running longer than that already, is
   evicted by the guard (its PodGroup's ``Preempted`` event names the limit), and the workload
   starts whole in the room it leaves;
3. the workload runs past the limit and is evicted as a whole gang: every member pod gets a
   ``Preempted`` event naming the limit, as do its Jobs, its JobSet (or its PodGroup), and
   none stays bound;
4. the operator reacts as it is told to: a JobSet's ``failurePolicy`` restarts it once, and
   the restart is not started (the limit counts the JobSet's runs together: its first run
   used it up, and the JobSet carries ``gangscheduler.io/runtime-seconds``); a TrainJob
   whose Jobs fail on a disruption is failed.

Pods under kwok run until deleted (no simulated runtime): each workload here is a runaway.
Skipped when the session cluster runs without the training operators.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from scheduler.model.workloads import RUNTIME_SECONDS_ANNOTATION as RUNTIME_SECONDS
from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import wait_for
from tests.e2e.contention import (
    IGNORE_DISRUPTIONS,
    RUN_TIMEOUT_S,
    fill_pool,
    priority_class,
    running_whole,
)
from tests.e2e.live import InProcessScheduler, Tenant, unschedulable_message
from tests.e2e.test_guards import guard, job_condition
from tests.e2e.test_job_deadline import condition
from tests.e2e.test_jobset_gangs import (
    JOBSETS,
    RJOB_LABEL,
    conditions,
    create_jobset,
    jobset_pods,
    jobset_status,
    operators,
)
from tests.e2e.test_training_operators import (
    RUNTIMES,
    TRAINJOBS,
    contended_runtime,
    create_trainjob,
    trainer_pods,
    trainjob,
)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures(operators.__name__)]

LIMIT_S = 10
#: The coscheduling PodGroup's ``scheduleTimeoutSeconds``: the TrainJob waits past it.
SCHEDULE_TIMEOUT_S = 5
#: On a Job's spec: an eviction fails the Job (the rule ``IGNORE_DISRUPTIONS`` has, with the
#: other action; Trainer's CRD wants the condition's status spelled out).
FAIL_ON_DISRUPTION = {"rules": [{**IGNORE_DISRUPTIONS["rules"][0], "action": "FailJob"}]}


def overrun_note(tenant: Tenant) -> str:
    """What every event of an eviction by the queue's runtime limit says."""
    return f"preempted: queue {tenant.queue} allows {LIMIT_S}s of runtime; this gang ran"


def overrun_events(tenant: Tenant, kind: str) -> dict[str, str]:
    """The ``Preempted`` events naming the queue's runtime limit on objects of *kind*, by the
    object's name (one per name: the latest note)."""
    return {(e.get("regarding") or {}).get("name", ""): e.get("note") or ""
            for e in tenant.events("Preempted")
            if (e.get("regarding") or {}).get("kind") == kind
            and overrun_note(tenant) in (e.get("note") or "")}


def queued_then_freed_by_the_guard(tenant: Tenant, runner: InProcessScheduler,
                                   create: Callable[[str], Any],
                                   pods: Callable[[], list[str]], size: int,
                                   queued_s: float = 0.0) -> list[str]:
    """Phases 1 and 2 of the module docstring: the workload made by *create* (given its
    PriorityClass) waits behind the blocker until the guard, set once it waits, evicts the
    blocker; returns the workload's *size* pods once they run whole."""
    low = priority_class(tenant, "low", 100)
    blocker = fill_pool(tenant, "blocker", low)
    wait_for(lambda: tenant.all_bound(blocker), 60, what="the blocker gang bound")
    create(low)
    wait_for(lambda: len(pods()) == size, RUN_TIMEOUT_S, what=f"the workload's {size} pods")
    wait_for(lambda: all(unschedulable_message(tenant.pods().get(n, {})) for n in pods()), 60,
             what="every pod of the workload told why it waits")
    until = time.monotonic() + queued_s  # at least that long, then 4 more cycles
    while time.monotonic() < until:
        assert tenant.bound(pods()) == [], "the workload bound beside the running blocker"
        time.sleep(1.0)
    for _ in runner.during_cycles(4):
        assert tenant.bound(pods()) == [], "the workload bound beside the running blocker"
    assert tenant.all_bound(blocker), "the blocker went before the guard was set"

    guard(tenant, {"maxRuntimeSeconds": LIMIT_S})
    wait_for(lambda: "blocker" in overrun_events(tenant, "PodGroup"), RUN_TIMEOUT_S,
             what="the blocker's PodGroup told it was evicted for its runtime")
    wait_for(lambda: not tenant.bound(blocker), 60, what="the blocker gone")
    return wait_for(lambda: running_whole(tenant, pods, size), RUN_TIMEOUT_S,
                    what=f"the workload running whole ({size} pods) once the blocker went")


def evicted_whole(tenant: Tenant, members: list[str]) -> None:
    """Phase 3: every one of *members* is told it was evicted for the queue's runtime limit,
    and none stays bound and running (never part of the gang)."""
    wait_for(lambda: set(members) <= set(overrun_events(tenant, "Pod")), LIMIT_S + 90,
             what="a Preempted event naming the limit on every member")

    def staying() -> list[str]:
        pods = tenant.pods()
        return [n for n in members if n in pods and pods[n]["spec"].get("nodeName")
                and pods[n].get("status", {}).get("phase") not in ("Failed", "Succeeded")]
    wait_for(lambda: not staying(), 60, what="no member of the evicted gang left running")


def test_a_jobset_past_its_queues_max_runtime_is_evicted_whole_and_its_restart_held(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """A leader and 2 workers (one gang) behind the blocker, evicted whole at the limit; its
    Jobs fail (``backoffLimit: 0``) and the JobSet's ``failurePolicy`` (``maxRestarts: 1``)
    recreates them. The limit is the JobSet's, across its runs: the first run's seconds are
    written on the JobSet, and the new pods are held, never bound, with a reason naming the
    limit and the time used (a per-run limit would run them for the limit again)."""
    tenant.create_nodes(1, gpus=8)
    name = "runaway"

    def create(low: str) -> None:
        body = create_jobset(tenant, name, {"leader": (1, 1), "workers": (1, 2)},
                             failurePolicy={"maxRestarts": 1})
        assert body["spec"]["failurePolicy"]["maxRestarts"] == 1, body["spec"]

    def pods() -> list[str]:
        return sorted(jobset_pods(tenant, name))

    first = queued_then_freed_by_the_guard(tenant, live_scheduler, create, pods, size=3)
    assert {tenant.pods()[n]["metadata"]["labels"][RJOB_LABEL] for n in first} == {
        "leader", "workers"}
    evicted_whole(tenant, first)
    # (Each Job's event is written on its own: wait for both, not the first.)
    expected = {f"{name}-leader-0", f"{name}-workers-0"}
    jobs = wait_for(lambda: (evented := {n for n in overrun_events(tenant, "Job")
                                         if n.startswith(f"{name}-")}) >= expected
                    and evented, 60,
                    what="Preempted events naming the limit on the JobSet's Jobs")
    assert jobs == expected, jobs
    # ... and on the JobSet, which outlives the Jobs its failure policy replaces.
    note = wait_for(lambda: overrun_events(tenant, "JobSet").get(name, ""), 60,
                    what="a Preempted event naming the limit on the JobSet")
    assert "(3 pod(s) of its Jobs evicted)" in note, note

    # The first run's seconds, kept on the JobSet (which outlives its Jobs and pods).
    written = wait_for(lambda: jobset_annotations(tenant, name).get(RUNTIME_SECONDS), 60,
                       what=f"{RUNTIME_SECONDS} written on the JobSet")
    assert written is not None and float(written) >= LIMIT_S, written
    ran = float(written)
    # The JobSet controller's reaction: a restart, which is not started again.
    wait_for(lambda: jobset_status(tenant, name).get("restarts") == 1, 90,
             what="the JobSet restarted by its failure policy")
    again = wait_for(lambda: [n for n in pods() if n not in first] or None, RUN_TIMEOUT_S,
                     what="the restarted JobSet's pods")
    assert again is not None
    held = f"{tenant.namespace}/{name} ran {ran:,.0f} s of the {LIMIT_S} s runtime limit"
    wait_for(lambda: all(held in unschedulable_message(tenant.pods().get(n, {}))
                         for n in again), 60,
             what="every pod of the restart told the workload used up its limit")
    for _ in live_scheduler.during_cycles(4):
        assert tenant.bound(again) == [], "the restart bound although its limit is used up"
    assert conditions(jobset_status(tenant, name)).get("Failed") != "True"


def jobset_annotations(tenant: Tenant, name: str) -> dict[str, str]:
    js = rest.call(tenant.cp.custom.get_namespaced_custom_object, *JOBSETS[:2],
                   tenant.namespace, JOBSETS[2], name)
    return dict((js.get("metadata") or {}).get("annotations") or {})


def trainjob_condition(tenant: Tenant, name: str, kind: str) -> dict[str, Any] | None:
    return condition(rest.call(tenant.cp.custom.get_namespaced_custom_object, *TRAINJOBS[:2],
                               tenant.namespace, TRAINJOBS[2], name), kind)


def test_a_trainjob_podgroup_gang_past_its_queues_max_runtime_is_evicted_whole_and_fails(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """3 training nodes of 4 GPUs in Trainer's coscheduling PodGroup, behind the blocker past
    the PodGroup's timeout, evicted whole at the limit (the PodGroup, the Job and the JobSet
    told why); its Job fails on the disruption (``podFailurePolicy``), and Trainer fails the
    TrainJob."""
    cp = tenant.cp
    tenant.create_nodes(2, gpus=8)
    name = "tj"

    def create(low: str) -> None:
        runtime = contended_runtime(tenant, "rt", low, coscheduling=True, initializer=False,
                                    timeout_s=SCHEDULE_TIMEOUT_S)
        (rjob,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
        rjob["template"]["spec"]["podFailurePolicy"] = FAIL_ON_DISRUPTION
        rest.call(cp.custom.create_namespaced_custom_object, *RUNTIMES[:2], tenant.namespace,
                  RUNTIMES[2], runtime)
        create_trainjob(tenant, trainjob(name, "rt", nodes=3, gpus=4))

    def pods() -> list[str]:
        return trainer_pods(tenant, name)

    first = queued_then_freed_by_the_guard(tenant, live_scheduler, create, pods, size=3,
                                           queued_s=SCHEDULE_TIMEOUT_S + 3.0)
    assert len(set(tenant.nodes_of(first).values())) == 2, "12 GPUs take both 8-GPU nodes"
    evicted_whole(tenant, first)
    wait_for(lambda: name in overrun_events(tenant, "PodGroup"), 60,
             what="Trainer's PodGroup told it was evicted for its runtime")
    wait_for(lambda: f"{name}-node-0" in overrun_events(tenant, "Job"), 60,
             what="its Job told it was evicted for its runtime")
    wait_for(lambda: name in overrun_events(tenant, "JobSet"), 60,
             what="the JobSet Trainer made told it was evicted for its runtime")

    # Trainer's reaction: its Job failed by the podFailurePolicy, the TrainJob is failed.
    failed = wait_for(lambda: trainjob_condition(tenant, name, "Failed"), 120,
                      what="the TrainJob failed")
    assert trainjob_condition(tenant, name, "Complete") is None
    assert failed is not None and failed.get("reason") == "FailedJobs", failed  # its JobSet's
    assert f"first failed job: {name}-node-0" in failed.get("message", ""), failed
    job_failed = job_condition(tenant, f"{name}-node-0", "Failed")
    assert job_failed is not None and job_failed.get("reason") == "PodFailurePolicy", job_failed
    assert not tenant.bound(pods()), "a failed TrainJob's pods placed again"
