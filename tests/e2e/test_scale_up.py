"""Whole-gang scale-up through ProvisioningRequests, answered by the REAL cluster-autoscaler.

The session cluster's real apiserver (with the ProvisioningRequest CRD of the autoscaler's
pinned ``apis`` module), its real Job controller, and cluster-autoscaler itself (built from the
pinned source zip, kwok cloud provider, ``--enable-provisioning-requests``), started for each
test with one node group: the test's own pool, declared from a cluster description
(``DevCluster.start_autoscaler``, what ``dev-cluster up --autoscale POOL=MAX`` runs). The pool
has no node until the autoscaler adds some. The scheduler's policy lets that pool scale up.

- A 4x8-GPU Indexed Job fits nowhere: the scheduler asks for the whole gang in ONE request
  (class ``best-effort-atomic-scale-up``); the autoscaler provisions it, adds 4 nodes, the gang
  binds whole on them and runs; while it runs the autoscaler's scale-down keeps its nodes;
  once it has finished the idle nodes are removed.
- With room in the group but the autoscaler's cluster-wide limit (``--max-nodes-total``) 3 nodes
  away, the autoscaler refuses the request; its own words are quoted in every member's pending
  reason, and it adds no node for part of the gang (the members are marked as the request's
  consumers, so its ordinary scale-up for unschedulable pods leaves them alone).
- With the group's maximum below the gang's size the scheduler asks nothing (it reads the
  maximum from the same templates) and says why; its members carry the autoscaler's per-pod
  scale-up delay (ten years), so the autoscaler adds no node for 3 of the 4 (without it, it
  did: it sees them as ordinary unschedulable pods).
- A running 2-member gang alone on two underused nodes (one 2-GPU member on each 8-GPU node:
  the autoscaler could repack one member beside the other and remove its node): its members
  are marked not safe to evict, so the autoscaler's scale-down, which does weigh both nodes,
  keeps them, and no member is evicted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from scheduler.kube.read.node_groups import GROUP_NAME_ANNOTATION
from scheduler.kube.write.provisioning import (
    ATOMIC_SCALE_UP_CLASS,
    CONSUME_ANNOTATION,
    NOT_SAFE_TO_EVICT,
    SCALE_UP_DELAY_ANNOTATION,
)
from scheduler.model.workloads import SAFE_TO_EVICT_ANNOTATION
from scheduler.tools.devcluster import autoscaler, rest
from scheduler.world import clusterspec
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.conftest import fresh_control_plane
from tests.e2e.live import POOL_LABEL, InProcessScheduler, Tenant, unschedulable_message

pytestmark = pytest.mark.e2e

REQUESTS = ("autoscaling.x-k8s.io", "v1", "provisioningrequests")
MEMBERS, GPUS = 4, 8
#: Long enough to watch the autoscaler's scale-down pass the running gang's nodes by
#: (it would remove an unneeded node after autoscaler.SCALE_DOWN_UNNEEDED).
RUNTIME_S = 30.0


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """This file's own dev cluster, not the session's: the autoscaler counts and simulates
    every node and pod of its cluster, and in CI, after the whole suite had run on the session
    cluster, the first three tests here waited 30 s in vain for a ProvisioningRequest (or the
    scheduler's reason), which came within seconds whenever this file ran alone or after the
    Kueue or Ray tests. Which leftover did it is not known. No JobSet or Trainer: only
    batch/v1 Jobs run here."""
    yield from fresh_control_plane(tmp_path_factory, "the scale-up cluster", operators=False)


def pool_description(tenant: Tenant) -> clusterspec.ClusterSpec:
    """The tenant's pool as a cluster description: 8-GPU nodes (``count`` is not used: the
    group's nodes are the autoscaler's)."""
    return clusterspec.parse({"poolLabel": POOL_LABEL, "pools": [
        {"name": tenant.pool, "count": 1, "gpusPerNode": GPUS, "cpu": "64",
         "memory": "512Gi"}]})


@pytest.fixture
def start_autoscaler(control_plane: ControlPlane,
                     tenant: Tenant) -> Iterator[Callable[..., None]]:
    """Start the autoscaler with the tenant's pool as its one node group, growing up to the
    given number of nodes; stopped (and its nodes deleted) at teardown."""
    def start(max_count: int, max_nodes_total: int | None = None) -> None:
        control_plane.cluster.start_autoscaler(
            pool_description(tenant), [autoscaler.NodeGroupSpec(tenant.pool, max_count)],
            log=lambda line: print(f"[dev-cluster] {line}"), max_nodes_total=max_nodes_total)

    yield start
    control_plane.cluster.stop_autoscaler()


@pytest.fixture
def scheduler(tenant: Tenant,
              start_scheduler: Callable[..., InProcessScheduler]) -> InProcessScheduler:
    return start_scheduler(scheduler_policy={"scaleUp": {"pools": [tenant.pool]}})


def requests(tenant: Tenant) -> list[dict[str, Any]]:
    listed = rest.call(tenant.cp.custom.list_namespaced_custom_object, *REQUESTS[:2],
                       tenant.namespace, REQUESTS[2])
    return list(listed["items"])


def group_nodes(tenant: Tenant) -> list[str]:
    """The nodes the autoscaler made for the tenant's group."""
    listed = rest.call(tenant.cp.core.list_node, label_selector=f"{POOL_LABEL}={tenant.pool}")
    return sorted(n["metadata"]["name"] for n in listed["items"]
                  if (n["metadata"].get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
                  == tenant.pool)


def condition(request: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (request.get("status") or {}).get("conditions") or []
                 if c["type"] == kind), None)


def submit(tenant: Tenant, runtime_s: float | None = None) -> list[str]:
    tenant.create_job("train", parallelism=MEMBERS, gpus=GPUS, completionMode="Indexed",
                      runtime_s=runtime_s)
    return wait_for(lambda: sorted(tenant.job_pods("train")) if len(
        tenant.job_pods("train")) == MEMBERS else [], 30, what="the Job's 4 pods")


def test_a_gang_scaled_from_zero_gets_its_nodes_from_the_autoscaler_and_runs_whole(
        tenant: Tenant, start_autoscaler: Callable[..., None],
        scheduler: InProcessScheduler) -> None:
    start_autoscaler(8)
    assert group_nodes(tenant) == []
    submitted = time.monotonic()
    pods = submit(tenant, runtime_s=RUNTIME_S)
    (request,) = wait_for(lambda: requests(tenant), 120, what="the gang's ProvisioningRequest")
    assert request["spec"]["provisioningClassName"] == ATOMIC_SCALE_UP_CLASS
    assert [s["count"] for s in request["spec"]["podSets"]] == [MEMBERS]

    wait_for(lambda: all(tenant.phases(pods)[p] == "Running" for p in pods), 180,
             what="every member running on the autoscaler's nodes")
    print(f"\n[scale-up] submission to all {MEMBERS} members running: "
          f"{time.monotonic() - submitted:.1f}s")
    used = sorted(tenant.nodes_of(pods).values())
    assert len(set(used)) == MEMBERS and set(used) <= set(group_nodes(tenant))  # one a node
    # Usually exactly the gang's 4; sometimes more: the autoscaler's write of Provisioned=True
    # can fail on a conflict (HTTP 409) after it has added the nodes, and it then scales up
    # for the same request again (seen once in four runs: 6 nodes; see the dev cluster README).
    print(f"\n[scale-up] nodes added: {len(group_nodes(tenant))} for {MEMBERS} members")
    wait_for(lambda: not requests(tenant), 30, what="the request deleted once the gang is placed")

    # The autoscaler's scale-down runs every scan; a node would go after
    # SCALE_DOWN_UNNEEDED. While the gang runs, its nodes are needed: all stay.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(tenant.phases(pods)[p] == "Running" for p in pods):
        assert set(used) <= set(group_nodes(tenant)), "a running gang's node was removed"
        time.sleep(1)

    wait_for(lambda: all(tenant.phases(pods)[p] == "Succeeded" for p in pods), 120,
             what="the gang finished")
    wait_for(lambda: group_nodes(tenant) == [], 120, what="the idle nodes removed by scale-down")


def test_a_gang_the_autoscaler_cannot_provision_waits_quoting_it_and_gets_no_partial_nodes(
        tenant: Tenant, start_autoscaler: Callable[..., None],
        scheduler: InProcessScheduler) -> None:
    """The group could take the gang (max 8), so the scheduler asks; the autoscaler's
    cluster-wide limit leaves room for 3 more nodes only, so it refuses the atomic request."""
    existing = len(rest.call(tenant.cp.core.list_node)["items"])
    start_autoscaler(8, max_nodes_total=existing + MEMBERS - 1)
    pods = submit(tenant)
    (request,) = wait_for(lambda: requests(tenant), 120, what="the gang's ProvisioningRequest")
    name = request["metadata"]["name"]

    def refused() -> dict[str, Any] | None:
        current = rest.call(tenant.cp.custom.get_namespaced_custom_object, *REQUESTS[:2],
                            tenant.namespace, REQUESTS[2], name)
        found = condition(current, "Provisioned")
        return found if found and found["status"] == "False" else None

    answer = wait_for(refused, 60, what="the autoscaler's answer Provisioned=False")
    assert answer is not None and answer["message"]
    said = answer["message"]
    print(f"\n[scale-up] the autoscaler said: {said!r}")
    wait_for(lambda: all(said in unschedulable_message(tenant.pods()[p]) for p in pods),
             30, what="the autoscaler's words in every member's pending message")
    # The members are marked as the request's consumers, so the autoscaler's ordinary
    # scale-up (for unschedulable pods, all-or-some) adds nothing for part of the gang either.
    for pod in pods:
        assert tenant.pods()[pod]["metadata"]["annotations"][CONSUME_ANNOTATION] == name
    time.sleep(10)  # ten scans
    assert group_nodes(tenant) == []
    assert tenant.bound(pods) == []


def test_a_gang_beyond_the_groups_maximum_is_not_asked_for_nor_partly_scaled_up(
        tenant: Tenant, start_autoscaler: Callable[..., None],
        scheduler: InProcessScheduler) -> None:
    """The group may grow to 3 nodes, the gang needs 4: the scheduler sees it from the
    templates, asks nothing and says why; its members carry the autoscaler's per-pod scale-up
    delay, so the autoscaler does not add 3 nodes for 3 of them (it did before the delay)."""
    start_autoscaler(MEMBERS - 1)
    pods = submit(tenant)
    wait_for(lambda: all("can add 3 of the 4 nodes needed" in unschedulable_message(
        tenant.pods()[p]) for p in pods), 120, what="the scheduler's reason on every member")
    wait_for(lambda: all(SCALE_UP_DELAY_ANNOTATION in (tenant.pods()[p]["metadata"].get(
        "annotations") or {}) for p in pods), 30, what="every member held")
    # The autoscaler waits 30 s for GPU pods to age before it scales up for them at all.
    time.sleep(45)
    assert requests(tenant) == []
    assert tenant.bound(pods) == []
    assert group_nodes(tenant) == [], "the autoscaler added nodes for part of the gang"


def autoscaler_log(control_plane: ControlPlane) -> Path:
    return control_plane.cluster.state_dir / "logs" / f"{autoscaler.IDENTITY}.log"


def test_scale_down_keeps_the_underused_nodes_of_a_running_gang_whole(
        tenant: Tenant, control_plane: ControlPlane, start_autoscaler: Callable[..., None],
        scheduler: InProcessScheduler) -> None:
    """Two nodes are made for a filler gang (2 x 6 GPUs), so that the 2 x 2-GPU gang "train"
    can only bind one member on each; the filler then goes. Each node is a quarter used, and
    either member would fit beside the other: the autoscaler's scale-down would remove one node,
    evicting its member (a Job's pod: replicated, so drainable), were it not marked."""
    start_autoscaler(4)
    log_file = autoscaler_log(control_plane)
    start = log_file.stat().st_size  # the log is appended to across runs
    tenant.create_job("filler", parallelism=2, gpus=6, completionMode="Indexed")
    wait_for(lambda: len(tenant.job_pods("filler")) == 2 and all(
        p["status"].get("phase") == "Running" for p in tenant.job_pods("filler").values()),
        180, what="the filler gang running on 2 new nodes")
    tenant.create_job("train", parallelism=2, gpus=2, completionMode="Indexed")
    pods = wait_for(lambda: sorted(tenant.job_pods("train")) if len(
        tenant.job_pods("train")) == 2 else [], 30, what="the Job's 2 pods")
    wait_for(lambda: all(tenant.phases(pods)[p] == "Running" for p in pods), 60,
             what="the gang running")
    placed = tenant.nodes_of(pods)
    assert len(set(placed.values())) == 2, placed  # one member a node
    uids = {p: tenant.pods()[p]["metadata"]["uid"] for p in pods}
    for pod in pods:
        annotations = tenant.pods()[pod]["metadata"]["annotations"]
        assert annotations[SAFE_TO_EVICT_ANNOTATION] == NOT_SAFE_TO_EVICT
    rest.call(client.BatchV1Api(tenant.cp.api).delete_namespaced_job, "filler", tenant.namespace,
              propagation_policy="Background")
    wait_for(lambda: not tenant.job_pods("filler"), 60, what="the filler gang gone")

    def weighed_and_kept() -> set[str]:
        """The gang's nodes the autoscaler simulated removing and found blocked by a member
        marked not safe to evict (its own words, at --v=2)."""
        with log_file.open("rb") as log:
            log.seek(start)
            text = log.read().decode(errors="replace")
        return {n for n in placed.values() if any(
            f"node {n} cannot be removed" in line and "not safe to evict" in line
            for line in text.splitlines())}

    # Past its timers (5 s unneeded, 5 s after a scale-up) several times over. Unmarked, one
    # node went within them, its member evicted ("Scale-down: removing node ..., pods to
    # reschedule: train-0-...").
    time.sleep(20)
    assert set(placed.values()) <= set(group_nodes(tenant)), "a running gang's node was removed"
    now = tenant.pods()
    assert {p: now[p]["metadata"]["uid"] for p in pods} == uids, "a member was evicted"
    assert tenant.nodes_of(pods) == placed
    assert all(tenant.phases(pods)[p] == "Running" for p in pods)
    wait_for(lambda: weighed_and_kept() == set(placed.values()), 30,
             what="the autoscaler weighing both of the gang's nodes for scale-down")
