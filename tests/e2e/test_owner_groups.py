"""A PyTorchJob run by the real Kubeflow training-operator v1 (v1.8.1), with no PodGroup: its
pods form the gang their own object asks for, on a busy pool.

1 Master + 3 Workers (4 GPUs each: the whole pool) wait whole behind a running gang and start
whole when it ends; a higher-priority gang then preempts them (all four, though it needs only
three members' room); the operator recreates the evicted pods under the same names, and they
wait whole beside the preemptor (room for one of them is free) and start whole when it ends.
A PyTorchJob whose spec does not read keeps its pods waiting, told which field, until an
explicit size (the min-member annotation) is given.

The operator runs with its gang-scheduler integration off (it creates no PodGroup; the test
checks), so what groups the pods is gang-scheduler reading the PyTorchJob
(``scheduler/kube/read/operator_convert.py``). It is started once the first test needs it,
before the scheduler, so the scheduler's informer lists PyTorchJobs at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from scheduler.kube.read.informer import EventType
from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import PODGROUP_GROUP, PODGROUP_PLURAL, PODGROUP_VERSION, wait_for
from tests.e2e.contention import (
    RESUME_TIMEOUT_S,
    RUN_TIMEOUT_S,
    fill_pool,
    priority_class,
    priority_gang,
    running_whole,
)
from tests.e2e.live import (
    GROUP_LABEL,
    QUEUES,
    InProcessScheduler,
    PodWatch,
    Tenant,
    unschedulable_message,
)
from tests.e2e.pytorchjob_support import (
    create_pytorchjob,
    ensure_training_operator,
    job_conditions,
    job_pods,
    pytorchjob,
)

pytestmark = pytest.mark.e2e

MEMBERS = ["ptj-master-0", "ptj-worker-0", "ptj-worker-1", "ptj-worker-2"]


def generation(tenant: Tenant, not_of: Iterable[str] = ()) -> dict[str, str]:
    """The job's four pods (name -> uid) when all four exist and none has a uid in *not_of*
    (an earlier generation: the operator recreates a pod under its old name); else {}."""
    old = set(not_of)
    pods = {n: p["metadata"]["uid"] for n, p in job_pods(tenant, "ptj").items()}
    return pods if sorted(pods) == MEMBERS and not old & set(pods.values()) else {}


def at(watch: PodWatch, uids: Iterable[str], what: Callable[[EventType, str, str], bool],
       last: bool = False) -> int:
    """Where in the watch's history the first (or *last*) of *uids* did *what* (given the
    event, nodeName and phase): for comparing the order of what different pods did."""
    wanted = set(uids)
    firsts: dict[str, int] = {}  # uid -> where it first did it
    for i, (event, _, uid, node, phase) in enumerate(list(watch.history)):
        if uid in wanted and what(event, node, phase):
            firsts.setdefault(uid, i)
    assert set(firsts) == wanted, f"the watch saw only {sorted(firsts)} of {sorted(wanted)}"
    return max(firsts.values()) if last else min(firsts.values())


def bound(event: EventType, node: str, phase: str) -> bool:
    return bool(node)


def deleted(event: EventType, node: str, phase: str) -> bool:
    return event is EventType.DELETED


def test_a_pytorchjob_waits_whole_starts_whole_and_resumes_whole_after_a_preemption(
        tenant: Tenant, start_scheduler: Callable[..., InProcessScheduler]) -> None:
    ensure_training_operator(tenant.cp)
    rest.call(tenant.cp.custom.patch_cluster_custom_object, *QUEUES, tenant.queue,
              {"spec": {"preemption": {"withinQueue": "LowerPriority"}}})
    low, high = priority_class(tenant, "low", 100), priority_class(tenant, "high", 1000)
    tenant.create_nodes(2, gpus=8)
    with PodWatch(tenant.cp, tenant.namespace) as watch:
        runner = start_scheduler()
        blocker = fill_pool(tenant, "blocker", low)
        wait_for(lambda: tenant.all_bound(blocker), RUN_TIMEOUT_S, what="the blocker bound")
        blocker_uids = [p["metadata"]["uid"] for n, p in tenant.pods().items() if n in blocker]

        # 1. Queued whole behind the running blocker (same priority: it cannot preempt).
        job = create_pytorchjob(tenant, "ptj", workers=3, gpus=4, priority_class=low)
        first = wait_for(lambda: generation(tenant), RUN_TIMEOUT_S,
                         what="the operator's 4 pods of the PyTorchJob")
        for _ in runner.during_cycles(4):
            assert tenant.bound(MEMBERS) == [], "bound beside the running blocker"
        for name, pod in job_pods(tenant, "ptj").items():
            [owner] = [o for o in pod["metadata"]["ownerReferences"] if o.get("controller")]
            assert (owner["kind"], owner["uid"]) == ("PyTorchJob", job["metadata"]["uid"])
            assert pod["spec"]["schedulerName"] == tenant.scheduler_name
            assert GROUP_LABEL not in pod["metadata"].get("labels", {}), name
            assert unschedulable_message(pod), f"{name} waits without a reason"
        groups = rest.call(tenant.cp.custom.list_namespaced_custom_object, PODGROUP_GROUP,
                           PODGROUP_VERSION, tenant.namespace, PODGROUP_PLURAL)["items"]
        assert [g["metadata"]["name"] for g in groups] == ["blocker"], \
            "the operator made a PodGroup: its gang-scheduler integration should be off"

        # 2. The blocker ends: the job starts whole, on both nodes.
        for name in blocker:
            tenant.delete_pod(name)
        wait_for(lambda: running_whole(tenant, lambda: list(job_pods(tenant, "ptj")), 4),
                 RUN_TIMEOUT_S, what="the PyTorchJob running whole once the blocker ended")
        assert len(set(tenant.nodes_of(MEMBERS).values())) == 2
        watch.seen_bound(MEMBERS)
        assert at(watch, first.values(), bound) > at(watch, blocker_uids, deleted, last=True)
        wait_for(lambda: job_conditions(tenant, "ptj").get("Running") == "True", RUN_TIMEOUT_S,
                 what="the operator's Running condition")

        # 3. Preempted whole by a higher-priority gang needing three members' room.
        preemptor = priority_gang(tenant, "preemptor", [4, 4, 4], high)
        wait_for(lambda: tenant.all_bound(preemptor), RUN_TIMEOUT_S,
                 what="the preemptor bound once the PyTorchJob was evicted")
        preemptor_uids = [p["metadata"]["uid"] for n, p in tenant.pods().items()
                          if n in preemptor]
        watch.seen_bound(preemptor)
        assert at(watch, preemptor_uids, bound) > at(watch, first.values(), deleted, last=True), \
            "the preemptor bound beside a member of the PyTorchJob"
        wait_for(lambda: set(first.values()) <= {e["regarding"].get("uid")
                                                 for e in tenant.events("Preempted")},
                 30, what="a Preempted event on each evicted pod")
        preempted = {e["regarding"].get("uid"): e.get("note") or ""
                     for e in tenant.events("Preempted")}
        assert all("preemptor" in preempted[uid] for uid in first.values()), preempted
        told = wait_for(lambda: [e.get("note") or "" for e in tenant.events("Preempted")
                                 if e["regarding"].get("uid") == job["metadata"]["uid"]],
                        30, what="a Preempted event on the PyTorchJob")
        assert "preemptor" in told[0] and "4 pod(s) evicted" in told[0], told

        # 4. The operator recreates them (same names, new uids); they wait whole beside the
        # running preemptor, though one of them would fit, and start whole when it ends.
        again = wait_for(lambda: generation(tenant, not_of=first.values()), RESUME_TIMEOUT_S,
                         what="the operator's recreated pods")
        for _ in runner.during_cycles(4):
            assert tenant.bound(MEMBERS) == [], "a recreated member bound beside the preemptor"
        reasons = {n: unschedulable_message(p) for n, p in job_pods(tenant, "ptj").items()}
        assert all(reasons.values()), f"recreated pods wait without a reason: {reasons}"
        for name in preemptor:
            tenant.delete_pod(name)
        wait_for(lambda: running_whole(tenant, lambda: list(job_pods(tenant, "ptj")), 4),
                 RESUME_TIMEOUT_S, what="the PyTorchJob running whole again")
        assert generation(tenant, not_of=first.values()) == again
        watch.seen_bound(MEMBERS)
        assert at(watch, again.values(), bound) > at(watch, preemptor_uids, deleted, last=True)
        assert watch.rebinds() == {}
        conditions = job_conditions(tenant, "ptj")
        assert conditions.get("Running") == "True" and conditions.get("Failed") != "True", \
            pytorchjob(tenant, "ptj").get("status")


def test_an_unreadable_pytorchjob_waits_naming_the_field_until_sized_explicitly(
        tenant: Tenant, start_scheduler: Callable[..., InProcessScheduler]) -> None:
    ensure_training_operator(tenant.cp)
    start_scheduler()
    tenant.create_nodes(1, gpus=8)
    # The CRD's schema takes 0 (an int32); a gang of at least 0 is no size.
    create_pytorchjob(tenant, "bad", workers=3, gpus=1,
                      runPolicy={"schedulingPolicy": {"minAvailable": 0}})
    names = list(wait_for(lambda: job_pods(tenant, "bad") if len(job_pods(tenant, "bad")) == 4
                          else {}, RUN_TIMEOUT_S, what="the operator's 4 pods"))
    field = "spec.runPolicy.schedulingPolicy.minAvailable"
    wait_for(lambda: all(field in unschedulable_message(p)
                         for p in job_pods(tenant, "bad").values()),
             30, what="the pods told which field does not read")
    assert tenant.bound(names) == []
    # An explicit size keeps precedence over the object: placed together.
    for name in names:
        rest.call(tenant.cp.core.patch_namespaced_pod, name, tenant.namespace,
                  {"metadata": {"annotations": {"gangscheduler.io/min-member": "4"}}},
                  _content_type=rest.MERGE_PATCH)
    wait_for(lambda: tenant.all_bound(names), 30, what="the explicitly sized gang bound")
