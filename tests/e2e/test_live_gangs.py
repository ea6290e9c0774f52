"""The live scheduler places whole gangs on a real control plane, and says why it does not.

Each test gets its own tenant (namespace, pool, Queue, schedulerName) and an in-process
scheduler serving only that tenant; kwok runs what is bound and, with
``runtime_s``, completes it, which is how a gang "finishes" here. Jobs are run by the real Job
controller and ``default-scheduler`` pods placed by the real kube-scheduler.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from scheduler.kube.events import CONTROLLER
from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import SIMULATED_EXIT_CODE, SIMULATED_RUNTIME, ControlPlane, wait_for
from tests.e2e.live import InProcessScheduler, PodWatch, Tenant, unschedulable_message

pytestmark = pytest.mark.e2e


def pending_messages(tenant: Tenant, names: list[str], *saying: str) -> dict[str, str]:
    """name -> PodScheduled=False message, once every named pod has one saying all of *saying*
    (a reason from an earlier cycle, e.g. "2 of 8 members exist", may linger for a moment)."""
    pods = tenant.pods()
    messages = {n: unschedulable_message(pods[n]) for n in names if n in pods}
    ready = len(messages) == len(names) and all(
        m and all(word in m for word in saying) for m in messages.values())
    return messages if ready else {}


def group_status(tenant: Tenant, group: str) -> str:
    """The PodGroup's phase, and its condition's message where the CRD keeps conditions
    (the scheduler-plugins schema has none, so the apiserver prunes them)."""
    status = tenant.group_status(group)
    conditions = status.get("conditions") or [{}]
    return f"{status.get('phase') or ''}: {conditions[-1].get('message') or ''}".strip(": ")


def test_two_gangs_on_room_for_one_run_one_after_the_other(
        control_plane: ControlPlane, tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """The partial-placement deadlock cannot happen: 16 one-GPU pods on 12 GPUs.

    The gangs run until the test lets the first one finish (a runtime of 0 written onto its
    running pods): with a fixed runtime, a loaded machine could see it finish, and the second
    gang start, before the test had read the second gang's pending state."""
    tenant.create_nodes(3, gpus=4)
    with PodWatch(control_plane, tenant.namespace) as watch:
        gangs = {"a": tenant.create_gang("a", 8), "b": tenant.create_gang("b", 8)}
        first = wait_for(lambda: next((g for g, pods in gangs.items()
                                       if tenant.all_bound(pods)), ""),
                         60, what="one gang bound whole")
        second = "b" if first == "a" else "a"

        # The other gang has no pod bound, and its pods, PodGroup and events say why.
        wait_for(lambda: pending_messages(tenant, gangs[second], "Placement", "needs 8"), 30,
                 what=f"PodScheduled=False saying why on every pod of {second}")
        assert tenant.bound(gangs[second]) == [], "a partly placed gang: the deadlock"
        wait_for(lambda: group_status(tenant, second).startswith("Pending"), 30,
                 what=f"PodGroup {second} Pending")
        wait_for(lambda: group_status(tenant, first).startswith(("Scheduled", "Running")), 30,
                 what=f"PodGroup {first} Scheduled or Running")
        wait_for(lambda: any(e["regarding"]["name"] == second
                             for e in tenant.events("FailedScheduling")),
                 30, what=f"a FailedScheduling event about {second}")
        # Events are written by the actuator's writer thread, after the bind and in no fixed
        # order with the PodGroup's status: wait for it rather than read it once.
        wait_for(lambda: any(e["regarding"]["name"] == first
                             for e in tenant.events("Scheduled")),
                 30, what=f"a Scheduled event about {first}")

        # When the first gang finishes, the second runs whole.
        for name in gangs[first]:
            rest.call(tenant.cp.core.patch_namespaced_pod, name, tenant.namespace,
                      {"metadata": {"annotations": {SIMULATED_RUNTIME: "0"}}},
                      _content_type=rest.MERGE_PATCH)
        wait_for(lambda: set(tenant.phases(gangs[first]).values()) == {"Succeeded"}, 60,
                 what=f"gang {first} finished")
        wait_for(lambda: tenant.all_bound(gangs[second]), 60, what=f"gang {second} bound")
        phases = tenant.phases(gangs[first] + gangs[second])
        assert "Failed" not in phases.values(), phases  # (over-commits: the capacity watch)
        # No member of the second gang was bound before 4 of the first had finished: until
        # then the 4 free GPUs could only have taken half of it. (The watch, behind the API
        # reads above, has seen the binds, and so every earlier change, once this returns.)
        watch.seen_bound(gangs[second])
        earliest = min(watch.first_bound[n] for n in gangs[second])
        done = sorted(watch.finished[n] for n in gangs[first] if n in watch.finished)
        assert len(done) >= 4 and done[3] <= earliest, (done, earliest)
        assert watch.rebinds() == {}


def test_a_pod_group_waits_for_min_member(tenant: Tenant,
                                          live_scheduler: InProcessScheduler) -> None:
    tenant.create_nodes(1, gpus=8)
    names = tenant.create_gang("g", 3, min_member=4)
    wait_for(lambda: pending_messages(tenant, names, "WaitingForMembers", "3 of 4"), 30,
             what="WaitingForMembers (3 of 4) on the 3 pods")
    assert tenant.bound(names) == []
    wait_for(lambda: group_status(tenant, "g").startswith("Pending"), 30,
             what="PodGroup Pending")
    tenant.create_pod("g-3", group="g")
    names.append("g-3")
    wait_for(lambda: tenant.all_bound(names), 30, what="all 4 members bound")


def test_min_resources_beyond_the_cluster_are_reported_before_the_members_exist(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    tenant.create_nodes(1, gpus=8)
    # More GPUs than the whole shared test cluster will ever have, whatever other tests add.
    tenant.create_group("huge", 4, min_resources={"nvidia.com/gpu": "100000"})
    names = ["huge-0", "huge-1"]
    for name in names:
        tenant.create_pod(name, group="huge")
    messages = wait_for(lambda: pending_messages(tenant, names, "Placement",
                                                 "minResources can never be met"), 30,
                        what="the minResources verdict on the 2 pods")
    assert "100000 nvidia.com/gpu asked, the cluster has" in messages["huge-0"], messages
    assert tenant.bound(names) == []


def set_pod_quota(tenant: Tenant, pods: int) -> None:
    """A ResourceQuota capping the namespace's pods (the real quota controller keeps its
    status, which admission needs), created or updated."""
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "pods"},
            "spec": {"hard": {"pods": str(pods)}}}
    try:
        rest.call(tenant.cp.core.create_namespaced_resource_quota, tenant.namespace, body)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
        rest.call(tenant.cp.core.patch_namespaced_resource_quota, "pods", tenant.namespace,
                  {"spec": body["spec"]}, _content_type=rest.MERGE_PATCH)


def test_a_jobs_pods_are_one_gang_of_its_parallelism(tenant: Tenant,
                                                     live_scheduler: InProcessScheduler) -> None:
    """The Job controller's pods bind only all together: while a ResourceQuota lets it create
    3 of its 4 pods, none binds; once the quota allows the 4th, all 4 do."""
    tenant.create_nodes(1, gpus=8)
    set_pod_quota(tenant, 3)
    wait_for(lambda: rest.call(tenant.cp.core.read_namespaced_resource_quota, "pods",
                               tenant.namespace).get("status", {}).get("hard"),
             30, what="the quota controller to fill in the ResourceQuota's status")
    tenant.create_job("train", parallelism=4)
    names = wait_for(lambda: sorted(tenant.job_pods("train")) if len(
        tenant.job_pods("train")) == 3 else [], 60, what="the Job controller's 3 pods")
    wait_for(lambda: pending_messages(tenant, names, "WaitingForMembers", "3 of 4"), 30,
             what="WaitingForMembers (3 of 4) on the Job's 3 pods")
    assert tenant.bound(names) == []
    set_pod_quota(tenant, 4)
    # The Job controller retries the refused creation with a backoff of up to a minute.
    names = wait_for(lambda: sorted(tenant.job_pods("train")) if len(
        tenant.job_pods("train")) == 4 else [], 120, what="the Job's 4th pod")
    wait_for(lambda: tenant.all_bound(names), 30, what="the Job's 4 pods bound")


def test_kube_scheduler_pods_are_left_alone_and_their_capacity_respected(
        control_plane: ControlPlane, tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """kube-scheduler places the pods that ask for it (default-scheduler); gang-scheduler
    counts what they use and never touches them, even the one kube-scheduler cannot place."""
    tenant.create_nodes(2, gpus=8)
    tenant.create_pod("theirs-bound", gpus=8, scheduler_name="default-scheduler")
    running = control_plane.wait_pod_phase(tenant.namespace, "theirs-bound", "Running")
    taken = running["spec"]["nodeName"]
    (free,) = {f"{tenant.pool}-n0", f"{tenant.pool}-n1"} - {taken}
    # No node has 9 GPUs: kube-scheduler keeps it pending, with its own reason.
    tenant.create_pod("theirs-pending", gpus=9, scheduler_name="default-scheduler")
    wait_for(lambda: "Insufficient nvidia.com/gpu" in unschedulable_message(
        tenant.pods()["theirs-pending"]), 30, what="kube-scheduler's verdict on theirs-pending")

    a = tenant.create_gang("a", 8)
    wait_for(lambda: tenant.all_bound(a), 30, what="gang a bound")
    assert set(tenant.nodes_of(a).values()) == {free}, "placed on GPUs the other pod uses"
    b = tenant.create_gang("b", 8)
    wait_for(lambda: pending_messages(tenant, b, "Placement", "by other pods"), 30,
             what="gang b explained: no room, some of it used by the other scheduler's pod")
    assert tenant.bound(b) == []

    # Many cycles later, the other scheduler's pods are exactly as that scheduler left them.
    pods = tenant.pods()
    assert pods["theirs-bound"]["spec"]["nodeName"] == taken
    assert pods["theirs-bound"]["status"]["phase"] == "Running"
    assert not pods["theirs-pending"]["spec"].get("nodeName")
    assert "Insufficient nvidia.com/gpu" in unschedulable_message(pods["theirs-pending"])
    ours = [e for e in tenant.events() if e["regarding"]["name"].startswith("theirs")
            and e.get("reportingController") == CONTROLLER]
    assert not ours, ours
    # kwok starts what is bound in its own time: wait for it rather than read it once.
    wait_for(lambda: set(tenant.phases(a).values()) == {"Running"}, 60,
             what="gang a running")


def test_a_job_with_more_parallelism_than_completions_runs(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """Regression (issue 11): parallelism 4, completions 2. The Job controller makes 2 pods,
    so the gang is 2; it used to wait for 4 members for ever."""
    tenant.create_nodes(1, gpus=8)
    tenant.create_job("short", parallelism=4, completions=2, runtime_s=2)
    names = wait_for(lambda: sorted(tenant.job_pods("short")) if len(
        tenant.job_pods("short")) == 2 else [], 60, what="the Job controller's 2 pods")
    wait_for(lambda: tenant.all_bound(names), 30, what="the 2 pods bound")
    batch = client.BatchV1Api(tenant.cp.api)
    wait_for(lambda: (rest.call(batch.read_namespaced_job_status, "short", tenant.namespace)
                      .get("status", {}).get("succeeded")) == 2, 60, what="the Job's 2 completions")


def test_a_retried_rank_of_an_indexed_job_whose_other_ranks_succeeded_runs(
        tenant: Tenant, live_scheduler: InProcessScheduler) -> None:
    """Regression (issue 11): ranks 0-2 Succeeded, rank 3 failed and is retried by the Job
    controller. Finished members count: the retry is a gang of one, not a wait for 4."""
    tenant.create_nodes(1, gpus=8)
    tenant.create_job("ranks", parallelism=4, runtime_s=4, completionMode="Indexed",
                      backoffLimit=1)
    index = "batch.kubernetes.io/job-completion-index"

    def rank(i: int) -> list[str]:
        return [n for n, p in tenant.job_pods("ranks").items()
                if p["metadata"]["labels"].get(index) == str(i)]

    wait_for(lambda: len(tenant.job_pods("ranks")) == 4, 60, what="the 4 ranks")
    (last,) = rank(3)
    rest.call(tenant.cp.core.patch_namespaced_pod, last, tenant.namespace,
              {"metadata": {"annotations": {SIMULATED_EXIT_CODE: "1"}}},
              _content_type=rest.MERGE_PATCH)  # rank 3's container will exit with 1
    wait_for(lambda: tenant.phases([last]).get(last) == "Failed", 60, what="rank 3 failed")
    retry = wait_for(lambda: [n for n in rank(3) if n != last], 90,
                     what="the Job controller's retry of rank 3")
    wait_for(lambda: tenant.all_bound(retry), 30, what="the retried rank bound")
    batch = client.BatchV1Api(tenant.cp.api)
    wait_for(lambda: (rest.call(batch.read_namespaced_job_status, "ranks", tenant.namespace)
                      .get("status", {}).get("succeeded")) == 4, 60, what="all 4 ranks done")
