"""Eviction and resume with the real Job controller: a preempted Job's pods are recreated by
their controller and the gang runs again whole, never bound beside its leaving members.

Two halves of issue 11's eviction story: (1) the regression of the partial path, a Job
evicted while its controller recreates pods before the old ones are gone (no
``podFailurePolicy``: the default ``podReplacementPolicy: TerminatingOrFailed``), whose
replacements used to be bound two of four beside the terminating members; (2) the shipped
recipe, a checkpointing Job with ``podFailurePolicy`` (``DisruptionTarget`` -> ``Ignore``)
that records its checkpoint through the shipped helper and Role, is preempted with its own
grace period, and resumes whole.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from scheduler.checkpoint import CheckpointError, Connection, mark
from scheduler.tools.devcluster import certs, rest
from tests.e2e.cluster_api import SIMULATED_SHUTDOWN, ControlPlane, wait_for
from tests.e2e.live import GPU, POOL_LABEL, QUEUE_LABEL, unschedulable_message
from tests.e2e.ops_support import LINGER, DeletionWatch, Ops, ops_for

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
WRITER_ROLE = REPO / "deploy" / "users" / "checkpoint-writer.yaml"
#: What the shipped examples put on a Job so that a preemption is not one of its failures.
IGNORE_DISRUPTIONS = {"rules": [{"action": "Ignore",
                                 "onPodConditions": [{"type": "DisruptionTarget",
                                                      "status": "True"}]}]}


@pytest.fixture
def ops(control_plane: ControlPlane) -> Iterator[Ops]:
    yield from ops_for(control_plane)


def job(ops: Ops, name: str, size: int, gpus: int, queue: str, priority_class: str,
        grace_s: int, linger: bool = False, runtime_s: float | None = None,
        **spec: Any) -> list[str]:
    """An Indexed Job of *size* pods with *gpus* each; ``linger`` keeps its pods terminating
    (a finalizer, and no simulated shutdown: they run out their grace) until released."""
    meta: dict[str, Any] = {"labels": {QUEUE_LABEL: queue}, "annotations": {}}
    if linger:
        meta["finalizers"] = [LINGER]
    else:  # checkpoint and exit two seconds after SIGTERM
        meta["annotations"][SIMULATED_SHUTDOWN] = "2"
    if runtime_s is not None:
        meta["annotations"]["gangscheduler.io/simulated-runtime"] = str(runtime_s)
    pod = {"schedulerName": ops.tenant.scheduler_name, "restartPolicy": "Never",
           "priorityClassName": priority_class, "terminationGracePeriodSeconds": grace_s,
           "nodeSelector": {POOL_LABEL: ops.tenant.pool},
           "containers": [{"name": "trainer", "image": "registry.invalid/train:latest",
                           "resources": {"requests": {"cpu": "100m", GPU: str(gpus)},
                                         "limits": {GPU: str(gpus)}}}]}
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
            "spec": {"parallelism": size, "completions": size, "completionMode": "Indexed",
                     "template": {"metadata": meta, "spec": pod}, **spec}}
    rest.call(client.BatchV1Api(ops.cp.api).create_namespaced_job, ops.ns, body)
    return wait_for(lambda: sorted(ops.tenant.job_pods(name)) if len(
        ops.tenant.job_pods(name)) == size else [], 60, what=f"the Job controller's {size} pods")


def live_pods(ops: Ops, name: str) -> list[str]:
    """The Job's pods that are not being deleted."""
    return sorted(n for n, p in ops.tenant.job_pods(name).items()
                  if not p["metadata"].get("deletionTimestamp"))


def job_status(ops: Ops, name: str) -> dict[str, Any]:
    return dict(rest.call(client.BatchV1Api(ops.cp.api).read_namespaced_job_status, name,
                          ops.ns).get("status") or {})


def test_an_evicted_jobs_replacements_are_placed_whole_never_beside_its_leavers(
        ops: Ops) -> None:
    """Regression (issue 11, the partial path): 4 pods of a Job are evicted and linger
    while terminating; the Job controller recreates all 4 meanwhile. A node with room for 2
    of them stays free, and none binds there: the replacements are a new gang of 4, placed
    together once there is room for 4."""
    ops.tenant.create_nodes(1, gpus=8)  # n0: the victim, then the preemptor
    queue = ops.queue("q", gpus=64, preemption={"withinQueue": "LowerPriority"})
    low, high = ops.priority_class("low", 100), ops.priority_class("high", 1000)
    with DeletionWatch(ops.cp, ops.ns) as watch:
        runner = ops.start_scheduler(eviction_grace_period_seconds=120)
        victims = job(ops, "victim", 4, 2, queue, low, grace_s=120, linger=True,
                      backoffLimitPerIndex=2)
        wait_for(lambda: ops.tenant.all_bound(victims), 30, what="the victim Job bound")
        spare = ops.cp.create_node(f"{ops.tenant.pool}-spare", gpus=4,
                                   labels={POOL_LABEL: ops.tenant.pool})
        preemptor = job(ops, "preemptor", 1, 8, queue, high, grace_s=0, runtime_s=3)
        wait_for(lambda: all(n in watch.deleting for n in victims), 60,
                 what="the victim Job evicted")
        # (Counted as failures: the controller's backoff, 10 s for each index's first.)
        replacements = wait_for(lambda: live_pods(ops, "victim") if len(
            live_pods(ops, "victim")) == 4 else [], 90,
            what="the Job controller's 4 replacements (while the victims terminate)")
        assert not set(replacements) & set(victims)
        wait_for(lambda: all(unschedulable_message(ops.tenant.pods()[n])
                             for n in replacements), 30,
                 what="the replacements' pending reason")
        for _ in runner.during_cycles(10):  # with 4 GPUs free on the spare node
            assert ops.tenant.bound(replacements) == [], "a replacement bound beside leavers"
        for name in victims:
            ops.release(name)
        wait_for(lambda: ops.tenant.all_bound(preemptor), 60, what="the preemptor bound")
        # The preemptor finishes; then the replacements go whole, all on the one node with
        # room for 4, none on the spare node.
        wait_for(lambda: ops.tenant.all_bound(replacements), 90, what="the replacements bound")
        assert set(ops.tenant.nodes_of(replacements).values()) == {f"{ops.tenant.pool}-n0"}
        assert spare not in {n for nodes in watch.nodes.values() for n in nodes}
        assert watch.rebinds() == {}


def trainer_connection(ops: Ops, account: str) -> Connection:
    """The trainer's ServiceAccount, bound to the shipped checkpoint-writer ClusterRole in
    the test's namespace, as the helper sees it inside a pod."""
    role = yaml.safe_load(WRITER_ROLE.read_text())
    rbac = client.RbacAuthorizationV1Api(ops.cp.api)
    try:
        rest.call(rbac.create_cluster_role, role)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
        rest.call(rbac.replace_cluster_role, role["metadata"]["name"], role)
    config = yaml.safe_load(ops.cp.service_account_kubeconfig(ops.ns, account).read_text())
    rest.call(rbac.create_namespaced_role_binding, ops.ns, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "trainer-checkpoints"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": role["metadata"]["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ops.ns}]})
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    ca = certs.CertPaths.under(ops.cp.cluster.state_dir / "pki").ca_cert
    return Connection(cluster["server"], user["token"], str(ca), ops.ns)


def test_a_preempted_checkpointing_job_is_recreated_and_runs_again_whole(ops: Ops) -> None:
    """Two low-priority Jobs of 2 pods share a node; one records a checkpoint through the
    shipped helper (with the shipped Role only). A high-priority gang needs one Job's room:
    the checkpointed Job is the victim (it loses the least work), each pod evicted with its
    own grace period (20 s, under the 60 s cap), and, with ``DisruptionTarget -> Ignore`` and
    ``backoffLimit: 0``, the Job controller recreates its pods instead of failing the Job.
    They wait, then run again whole."""
    ops.tenant.create_nodes(1, gpus=8)
    queue = ops.queue("q", gpus=64, preemption={"withinQueue": "LowerPriority"})
    low, high = ops.priority_class("low", 100), ops.priority_class("high", 1000)
    conn = trainer_connection(ops, "trainer")
    with DeletionWatch(ops.cp, ops.ns) as watch:
        runner = ops.start_scheduler(eviction_grace_period_seconds=60)
        recipe: dict[str, Any] = {"backoffLimit": 0, "podFailurePolicy": IGNORE_DISRUPTIONS}
        fresh = job(ops, "fresh", 2, 2, queue, low, grace_s=20, **recipe)
        stale = job(ops, "stale", 2, 2, queue, low, grace_s=20, **recipe)
        wait_for(lambda: ops.tenant.all_bound(fresh + stale), 30, what="both Jobs bound")
        wait_for(lambda: set(ops.tenant.phases(fresh + stale).values()) == {"Running"}, 30,
                 what="both Jobs running")
        time.sleep(2)  # work the stale Job would lose; the fresh one saves it now
        written = mark(target="pod", name=fresh[0], connection=conn)
        annotations = ops.tenant.pods()[fresh[0]]["metadata"]["annotations"]
        assert annotations["gangscheduler.io/last-checkpoint"] == written
        def checkpointed() -> list[str]:
            """The running gangs (on 1.36 the Job controller's PodGroup names them) whose
            last checkpoint the scheduler knows."""
            running = runner.live.cache.cycle_input(time.time()).snapshot.running.values()
            return [rg.id for rg in running if rg.last_checkpoint is not None
                    and any(ref.name in fresh for role in rg.gang.roles for ref in role.pods)]

        wait_for(checkpointed, 30, what="the scheduler saw the checkpoint")
        # The Role is bound in the trainer's namespace only.
        with pytest.raises(CheckpointError, match="HTTP 403"):
            mark(target="pod", name=fresh[0], namespace="default", connection=conn)

        preemptor = job(ops, "preemptor", 2, 2, queue, high, grace_s=0, runtime_s=3)
        # (On 1.36 each Job's gang is the PodGroup its controller made, priority 0 without a
        # class: the pods' classes decide, or nothing could be preempted here.)
        wait_for(lambda: all(n in watch.deleting for n in fresh), 60,
                 what="the checkpointed Job evicted")
        assert {n: watch.deleting[n] for n in fresh} == {n: 20 for n in fresh}, \
            "each victim pod keeps its own terminationGracePeriodSeconds"
        assert not any(n in watch.deleting for n in stale), "the costlier victim was taken"
        # Its pods exit on SIGTERM (Failed, DisruptionTarget): ignored, so recreated.
        resumed = wait_for(lambda: [n for n in live_pods(ops, "fresh") if n not in fresh]
                           if len([n for n in live_pods(ops, "fresh") if n not in fresh]) == 2
                           else [], 90, what="the Job controller's 2 new pods")
        status = job_status(ops, "fresh")
        assert not status.get("failed"), status
        assert not any(c["type"] == "Failed" and c["status"] == "True"
                       for c in status.get("conditions") or []), status
        wait_for(lambda: ops.tenant.all_bound(preemptor), 60, what="the preemptor bound")
        wait_for(lambda: ops.tenant.all_bound(resumed), 90,
                 what="the recreated gang bound again once the preemptor finished")
        wait_for(lambda: set(ops.tenant.phases(resumed).values()) == {"Running"}, 30,
                 what="the recreated gang running")
        watch.seen_bound(resumed)  # and so the preemptor's end before it
        starts = [watch.first_bound[n] for n in resumed]
        assert all(t >= max(watch.finished.get(n, 0.0) for n in preemptor) for t in starts)
        assert ops.tenant.all_bound(stale) and watch.rebinds() == {}
