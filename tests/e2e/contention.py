"""Contention for operator e2e tests: a workload queued behind a running gang (past any timeout
it carries), then preempted by a higher-priority gang, then resumed by its own controller.

Why one helper: on an empty cluster every operator works; what strands a workload is the
cluster being busy, a preemption, or an ordered start-up, so every operator scenario runs
through the same three phases (issue 33). It is generic: the caller hands it a callable that
creates the workload at a given PriorityClass and one that lists the workload's pods (whatever
made them: a JobSet, a TrainJob, a Deployment); the helper does the rest on the tenant's pool
(``tests/e2e/live.py``):

1. a *blocker* gang (a PodGroup, one pod per node taking all its GPUs) at the workload's own
   priority takes the whole pool, so the workload cannot preempt it: the workload waits, every
   pod present with a ``PodScheduled=False`` reason and none bound, for at least *queued_s*
   seconds (past any ``scheduleTimeoutSeconds`` it carries) and some scheduler cycles;
2. the blocker is deleted: the workload runs whole (*size* pods bound and Running);
3. a *preemptor* gang of the same shape at a higher priority needs the whole pool: the
   workload's pods are evicted, the preemptor binds and finishes (a simulated runtime);
4. the workload's controller recreates its evicted pods, which run whole again.

The tenant's Queue is given ``preemption.withinQueue: LowerPriority`` first. Waits are on
state (pods bound, evicted, recreated), with generous timeouts: the Job controller may take a
minute or more to recreate preempted pods on a loaded machine (issue 33 measured 80 s).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import SIMULATED_RUNTIME, wait_for
from tests.e2e.live import (
    GPU,
    GROUP_LABEL,
    POOL_LABEL,
    QUEUE_LABEL,
    QUEUES,
    InProcessScheduler,
    Tenant,
    unschedulable_message,
)

#: On a Job's spec (as the shipped examples have it): a preemption is not one of its failures,
#: so the Job controller recreates the evicted pods instead of failing the Job.
IGNORE_DISRUPTIONS = {"rules": [{"action": "Ignore",
                                 "onPodConditions": [{"type": "DisruptionTarget",
                                                      "status": "True"}]}]}
#: On a Job's spec beside ``IGNORE_DISRUPTIONS`` (the README's resume recipe): the Job
#: controller's wait before it recreates evicted pods counts each rank's own failures (10 s
#: after a first preemption), where the Job-wide ``backoffLimit`` counts every pod of the Job,
#: ignored preemptions included (80 s for 4 pods: README, "Preemption and resume"). A real
#: failure still fails the Job at once.
PER_RANK_BACKOFF = {"completionMode": "Indexed", "backoffLimitPerIndex": 0,
                    "maxFailedIndexes": 0}
#: How long the preemptor runs before it frees the pool again (seconds).
PREEMPTOR_RUNTIME_S = 3
#: Generous waits: a loaded machine, and controllers with backoffs of their own.
RUN_TIMEOUT_S = 180.0
RESUME_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Resumed:
    """What the helper saw: the pods that ran first and those that ran after the resume."""

    first: tuple[str, ...]
    again: tuple[str, ...]


def pool_gpus(tenant: Tenant) -> dict[str, int]:
    """The tenant's nodes and the GPUs each has."""
    nodes = rest.call(tenant.cp.core.list_node,
                      label_selector=f"{POOL_LABEL}={tenant.pool}")["items"]
    return {n["metadata"]["name"]: int(n["status"]["allocatable"].get(GPU, "0"))
            for n in nodes}


def priority_class(tenant: Tenant, suffix: str, value: int) -> str:
    """A PriorityClass named after the tenant (PriorityClasses are cluster-scoped)."""
    name = f"{tenant.queue}-{suffix}"
    rest.call(client.SchedulingV1Api(tenant.cp.api).create_priority_class, {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name}, "value": value})
    return name


def fill_pool(tenant: Tenant, name: str, priority: str,
              runtime_s: float | None = None) -> list[str]:
    """A PodGroup gang with one pod per node of the pool, each taking all its GPUs."""
    return priority_gang(tenant, name, sorted(pool_gpus(tenant).values()), priority, runtime_s)


def priority_gang(tenant: Tenant, name: str, gpus: list[int], priority: str,
                  runtime_s: float | None = None) -> list[str]:
    """A PodGroup gang at PriorityClass *priority*: pod ``<name>-<i>`` asks ``gpus[i]`` GPUs
    (and runs *runtime_s* seconds when given, else until deleted)."""
    tenant.create_group(name, len(gpus))
    names = []
    for i, count in enumerate(gpus):
        spec = {**tenant.pod_spec(count), "priorityClassName": priority}
        notes = {SIMULATED_RUNTIME: str(runtime_s)} if runtime_s is not None else {}
        rest.call(tenant.cp.core.create_namespaced_pod, tenant.namespace, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-{i}", "annotations": notes,
                         "labels": {QUEUE_LABEL: tenant.queue, GROUP_LABEL: name}},
            "spec": spec})
        names.append(f"{name}-{i}")
    return names


def running_whole(tenant: Tenant, pods: Callable[[], list[str]], size: int,
                  not_in: frozenset[str] = frozenset()) -> list[str]:
    """The workload's pods when *size* of them (none of *not_in*) are bound and Running."""
    names = [n for n in pods() if n not in not_in]
    phases = tenant.phases(names)
    if len(names) == size and tenant.all_bound(names) and set(phases.values()) <= {
            "Running", "Succeeded"}:
        return names
    return []


def queued_preempted_resumed(tenant: Tenant, runner: InProcessScheduler,
                             create: Callable[[str], Any], pods: Callable[[], list[str]],
                             size: int, queued_s: float = 0.0,
                             waiting: Callable[[], None] | None = None) -> Resumed:
    """Run the workload made by *create* (given its PriorityClass) through the three phases
    of the module docstring. *pods*: the workload's pods not being deleted, by name; *size*:
    how many of them run when it runs whole (finished ones included); *waiting*: more checks
    while it is queued (a PodGroup not failed, a reason's words), called at the end of it."""
    rest.call(tenant.cp.custom.patch_cluster_custom_object, *QUEUES, tenant.queue,
              {"spec": {"preemption": {"withinQueue": "LowerPriority"}}})
    low = priority_class(tenant, "low", 100)
    high = priority_class(tenant, "high", 1000)
    blocker = fill_pool(tenant, "blocker", low)
    wait_for(lambda: tenant.all_bound(blocker), 60, what="the blocker gang bound")

    # 1. Queued behind the running blocker, past any timeout the workload carries.
    create(low)
    wait_for(pods, 120, what="the workload's first pods")
    until = time.monotonic() + queued_s  # at least that long, then 4 more cycles
    while time.monotonic() < until:
        assert tenant.bound(pods()) == [], "bound beside the running blocker"
        time.sleep(1.0)
    for _ in runner.during_cycles(4):
        assert tenant.bound(pods()) == [], "bound beside the running blocker"
    names = pods()
    reasons = {n: unschedulable_message(tenant.pods()[n]) for n in names}
    assert names and all(reasons.values()), f"queued without a reason: {reasons}"
    if waiting is not None:
        waiting()

    # 2. The pool frees: the workload runs whole.
    for name in blocker:
        tenant.delete_pod(name)
    first = wait_for(lambda: running_whole(tenant, pods, size), RUN_TIMEOUT_S,
                     what=f"the workload running whole ({size} pods) once the pool is free")

    # 3. Preempted by a higher-priority gang needing the whole pool.
    preemptor = fill_pool(tenant, "preemptor", high, runtime_s=PREEMPTOR_RUNTIME_S)
    wait_for(lambda: tenant.all_bound(preemptor), RUN_TIMEOUT_S,
             what="the preemptor bound once the workload was evicted")
    evicted = frozenset(n for n in first if n not in pods()
                        or tenant.phases([n]).get(n) not in ("Running", "Succeeded"))
    assert evicted, f"the preemptor bound without evicting the workload: {first}"

    # 4. Its controller recreates the evicted pods; they run whole again.
    again = wait_for(lambda: running_whole(tenant, pods, size, not_in=evicted),
                     RESUME_TIMEOUT_S, what="the workload recreated and running whole again")
    return Resumed(tuple(first), tuple(again))
