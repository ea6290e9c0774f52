"""A gang left partly bound while the scheduler keeps running is repaired without a restart:
completed when its other members fit, released when they cannot, a failed release retried,
and a completion that failed for want of an answer retried as soon as the apiserver answers.
An apiserver that stops answering mid-bind costs no pod: the gang is parked, not rolled back,
and completed once it answers; one whose room was taken meanwhile is released, its pods
with ``DisruptionTarget`` (a Job's podFailurePolicy ignores them).

The partly bound state is made the way a scheduler killed mid-bind leaves it: the members
exist, the test binds the first one itself (its Binding, as the dead predecessor sent it) and
waits for it to be Running, and the running scheduler then finds the others pending beside a
started member (until then they sat in a group nobody schedules). Before live repair, such a
gang was only rolled back at a restart (a gang at 1 of 16 kept 8 GPUs until then) and
otherwise never.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from kubernetes import client

from scheduler.decide.plan import RollbackCause
from scheduler.kube.client import JSON, Response, TransportError
from scheduler.kube.write.binder import UNKNOWN, PodFailure
from scheduler.model import PodRef
from scheduler.tools.devcluster import rest
from scheduler.tools.devcluster.nodes import cordon_node
from tests.e2e.cluster_api import SIMULATED_RUNTIME, ControlPlane, wait_for
from tests.e2e.live import GROUP_LABEL, InProcessScheduler, PodWatch, Tenant

pytestmark = pytest.mark.e2e

GRACE_S = 2.0
PARKED = "parked"  # a pod group with no PodGroup: its pods wait, unscheduled


def leave_partly_bound(cp: ControlPlane, tenant: Tenant, node: str, size: int) -> list[str]:
    """Gang ``half`` of *size* one-GPU members with ``half-0`` bound to *node* and Running and
    the others pending, as a bind cut short leaves it: they existed before ``half-0`` started
    (parked meanwhile in a group without a PodGroup, which nobody schedules, and moved into
    ``half`` once it runs); the names."""
    tenant.create_group("half", size)
    names = [f"half-{i}" for i in range(size)]
    for name in names[1:]:
        tenant.create_pod(name, group=PARKED)
    tenant.create_pod("half-0", group="half")
    assert cp.bind(tenant.namespace, "half-0", node) == 201
    cp.wait_pod_phase(tenant.namespace, "half-0", "Running", timeout_s=60)
    for name in names[1:]:
        rest.call(cp.core.patch_namespaced_pod, name, tenant.namespace,
                  {"metadata": {"labels": {GROUP_LABEL: "half"}}},
                  _content_type=rest.MERGE_PATCH)
    return names


def test_a_started_partly_bound_gang_is_completed_without_a_restart(
        control_plane: ControlPlane, tenant: Tenant,
        start_scheduler: Callable[..., InProcessScheduler]) -> None:
    (node,) = tenant.create_nodes(1, gpus=8)
    runner = start_scheduler(partial_gang_grace_seconds=300.0)
    with PodWatch(control_plane, tenant.namespace) as watch:
        names = leave_partly_bound(control_plane, tenant, node, 4)
        wait_for(lambda: tenant.all_bound(names), 60, what="the gang completed")
        assert watch.rebinds() == {}
    assert "half-0" in tenant.pods(), "the started member was rolled back, not completed"
    assert runner.live.scheduler.cycles > 0 and runner.thread is not None
    assert runner.thread.is_alive(), "the scheduler restarted or died"


def test_one_that_cannot_be_completed_is_released_after_its_grace_a_failed_release_retried(
        control_plane: ControlPlane, tenant: Tenant,
        start_scheduler: Callable[..., InProcessScheduler]) -> None:
    (node,) = tenant.create_nodes(1, gpus=8)
    runner = start_scheduler(partial_gang_grace_seconds=GRACE_S)
    binder = runner.live.binder
    original = binder.delete_pods
    attempts: list[tuple[str, ...]] = []

    def delete_pods(pods: Sequence[PodRef], grace_period_seconds: int = 0,
                    retries: int | None = None, gang: str = "") -> list[PodFailure]:
        attempts.append(tuple(p.name for p in pods))
        if len(attempts) == 1:  # the first rollback fails: the apiserver did not answer
            return [PodFailure(p, "", UNKNOWN, "delete: no reply") for p in pods]
        return original(pods, grace_period_seconds, retries, gang)

    binder.delete_pods = delete_pods  # type: ignore[method-assign]
    # Nothing more fits: no new pod may go to the node (the test's own Binding still may).
    cordon_node(control_plane.api, node)
    started = time.monotonic()
    names = leave_partly_bound(control_plane, tenant, node, 4)
    wait_for(lambda: "half-0" not in tenant.pods(), 90, what="the started member released")
    assert time.monotonic() - started >= GRACE_S, "released before its grace was over"
    assert attempts[:2] == [("half-0",), ("half-0",)], attempts
    assert tenant.bound(names) == []
    assert runner.thread is not None and runner.thread.is_alive()


class Outage:
    """The binder's requests to bind fail without a reply while ``away`` is set (the
    apiserver restarting, as the binder sees it); everything else goes through. With
    *after*, ``away`` sets itself once that many binds went through (mid-gang)."""

    def __init__(self, inner: Any, after: int | None = None) -> None:
        self.inner, self.away = inner, threading.Event()
        self.refused, self.after = 0, after
        self._lock = threading.Lock()

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                body: Any = None, content_type: str = JSON,
                timeout: float | tuple[float, float] | None = None) -> Response:
        if method == "POST" and path.endswith("/binding"):
            with self._lock:
                if self.after is not None and not self.away.is_set():
                    self.after -= 1
                    if self.after < 0:
                        self.away.set()
                if self.away.is_set():
                    self.refused += 1
                    self.inner.outages.failed(f"{method} {path}", "connection refused")
                    raise TransportError(f"{method} {path}: connection refused")
        return self.inner.request(method, path, query=query, body=body,
                                  content_type=content_type, timeout=timeout)

    def back(self, client: Any) -> None:
        """The apiserver answers again; the informers' re-list after a real restart is the
        first request that gets an answer (this outage only hit binds: one GET for it)."""
        self.after = None
        self.away.clear()
        client.request("GET", "/version")


def deleted_by_scheduler(runner: InProcessScheduler) -> dict[str, float]:
    """Pods the scheduler deleted, by cause (its metric)."""
    registry = runner.live.metrics.registry
    return {str(c): registry.get_sample_value("gang_scheduler_pods_deleted_total",
                                              {"cause": str(c)}) or 0.0 for c in RollbackCause}


def test_an_apiserver_away_mid_bind_costs_no_pod_and_the_gang_completes_when_it_answers(
        control_plane: ControlPlane, tenant: Tenant,
        start_scheduler: Callable[..., InProcessScheduler]) -> None:
    """The issue's case, with bare pods (nothing would recreate one deleted): two members
    bound, then no reply, for longer than a rollback used to wait (three retries in 3.5 s) and
    than the gang's grace. Its bound members stay, the rest keeps their node, and once the
    apiserver answers the rest is bound."""
    tenant.create_nodes(1, gpus=8)
    runner = start_scheduler(bind_concurrency=1, bind_backoff_initial_seconds=1.0,
                             partial_gang_grace_seconds=GRACE_S)
    outage = Outage(runner.live.binder.client, after=2)
    runner.live.binder.client = outage  # type: ignore[assignment]
    with PodWatch(control_plane, tenant.namespace) as watch:
        names = tenant.create_gang("g", 6)
        away = time.monotonic()
        # Retried each time the rest of the cluster answers (the binds alone are away), parked
        # in between: long enough for the old rollback (and the grace) to have struck.
        wait_for(lambda: watch.deleted or (
            outage.refused >= 8 and time.monotonic() - away > 3 * GRACE_S), 90,
                 what="binds retried while the apiserver is away")
        assert watch.deleted == {}, "the outage cost pods"
        assert len(tenant.bound(names)) == 2
        outage.back(runner.live.client)
        wait_for(lambda: tenant.all_bound(names), 60, what="the gang completed")
        assert watch.deleted == {} and watch.rebinds() == {}
    assert deleted_by_scheduler(runner) == dict.fromkeys(map(str, RollbackCause), 0.0)
    assert tenant.events("GangRolledBack") == []


def test_a_job_gang_whose_room_was_taken_is_released_with_disruption_target(
        control_plane: ControlPlane, tenant: Tenant,
        start_scheduler: Callable[..., InProcessScheduler]) -> None:
    """Two members bound, the binds then away, and the node cordoned meanwhile: once it
    answers the rest fits nowhere, so after its grace the gang is rolled back (NoRoom). Each
    bound pod gets ``DisruptionTarget`` before its delete, so the Job, whose backoffLimit is
    0 and whose podFailurePolicy ignores DisruptionTarget, replaces them without failing."""
    (node,) = tenant.create_nodes(1, gpus=8)
    runner = start_scheduler(bind_concurrency=1, bind_backoff_initial_seconds=1.0,
                             partial_gang_grace_seconds=GRACE_S)
    outage = Outage(runner.live.binder.client, after=2)
    runner.live.binder.client = outage  # type: ignore[assignment]
    ignore = {"rules": [{"action": "Ignore",
                         "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    with PodWatch(control_plane, tenant.namespace) as watch:
        # Long enough a runtime that the bound members still run when they are released.
        tenant.create_job("j", parallelism=4, gpus=2, runtime_s=30.0, backoffLimit=0,
                          podFailurePolicy=ignore)
        wait_for(lambda: outage.refused >= 1, 60, what="the binds away mid-gang")
        first = tenant.bound(list(tenant.job_pods("j")))
        assert len(first) == 2, first
        # Away for longer than a rollback used to wait (three retries in 3.5 s, then deletes).
        wait_for(lambda: outage.refused >= 5 or all_deleting(watch, first), 60,
                 what="the binds retried while away")
        cordon_node(control_plane.api, node)
        wait_for(lambda: any(n.name == node and n.unschedulable
                             for n in runner.live.cache.nodes()), 30,
                 what="the scheduler to see the node cordoned")
        # A bind decided before the cordon was seen may still be on its way, and would bind
        # the rest onto the cordoned node once the apiserver answers (as kube-scheduler's
        # would): wait for a cycle that saw the cordon, with no bind of the gang in flight.
        seen, gang = runner.live.scheduler.cycles, f"{tenant.namespace}/j"
        wait_for(lambda: runner.live.scheduler.cycles > seen
                 and gang not in runner.live.scheduler.flights.gangs(), 30,
                 what="no bind decided before the cordon still in flight")
        outage.back(runner.live.client)
        deleting = wait_for(lambda: all_deleting(watch, first), 90,
                            what="the bound members deleted")
        for pod in deleting:  # the condition was there when the delete came
            conditions = [c for c in pod["status"].get("conditions", [])
                          if c["type"] == "DisruptionTarget"]
            assert len(conditions) == 1, f"{pod['metadata']['name']}: {conditions}"
            assert (conditions[0]["status"], conditions[0]["reason"]) == ("True",
                                                                          "GangRolledBack")
            assert "(NoRoom)" in conditions[0]["message"], conditions
        # Counted once the deletes return, which may be after the watch saw them.
        wait_for(lambda: deleted_by_scheduler(runner)["NoRoom"] == 2, 30,
                 what="the two deletes counted as NoRoom")
        # The replacements come (after the Job controller's backoff) while the node is still
        # cordoned; they and the two members never bound finish 1 s after they start: the
        # 30 s runtime was for the released members only.
        def rest_of_gang() -> list[str]:
            names = [n for n, p in tenant.job_pods("j").items()
                     if n not in first and not p["metadata"].get("deletionTimestamp")]
            return names if len(names) == 4 else []

        waiting = wait_for(rest_of_gang, 120, what="the Job's two replacements")
        assert tenant.bound(waiting) == [], "bound on the cordoned node"
        for name in waiting:
            rest.call(tenant.cp.core.patch_namespaced_pod, name, tenant.namespace,
                      {"metadata": {"annotations": {SIMULATED_RUNTIME: "1"}}},
                      _content_type=rest.MERGE_PATCH)
        cordon_node(control_plane.api, node, on=False)
        wait_for(lambda: job_status(tenant, "j").get("succeeded") == 4, 180,
                 what="the Job completed with its replacements")
    status = job_status(tenant, "j")
    assert not status.get("failed"), status
    assert not [c for c in status.get("conditions") or () if c["type"] == "Failed"], status


def all_deleting(watch: PodWatch, names: list[str]) -> list[dict[str, Any]]:
    """The first version of each named pod with a deletion timestamp; [] until all have one."""
    with watch._lock:
        firsts = [next((v for v in watch.seen.get(n, ()) if v["metadata"].get(
            "deletionTimestamp")), None) for n in names]
    return [v for v in firsts if v is not None] if all(firsts) else []


def job_status(tenant: Tenant, name: str) -> dict[str, Any]:
    return rest.call(client.BatchV1Api(tenant.cp.api).read_namespaced_job, name,
                     tenant.namespace).get("status") or {}


def test_completion_is_not_delayed_by_the_backoff_once_the_apiserver_answers(
        control_plane: ControlPlane, tenant: Tenant,
        start_scheduler: Callable[..., InProcessScheduler]) -> None:
    (node,) = tenant.create_nodes(1, gpus=8)
    runner = start_scheduler(bind_backoff_initial_seconds=120.0,
                             bind_backoff_max_seconds=300.0, partial_gang_grace_seconds=300.0)
    outage = Outage(runner.live.binder.client)
    runner.live.binder.client = outage  # type: ignore[assignment]
    outage.away.set()
    gang_id = f"{tenant.namespace}/half"
    names = leave_partly_bound(control_plane, tenant, node, 4)
    backoff = wait_for(lambda: runner.live.scheduler.backing_off(0.0).get(gang_id), 60,
                       what="the completion failed and backs off")
    assert backoff is not None and outage.refused >= 3
    assert tenant.bound(names) == ["half-0"]
    outage.back(runner.live.client)
    wait_for(lambda: tenant.all_bound(names), 60, what="the gang completed")
    # Order, not a margin: completed while its 120 s backoff still had long to run.
    assert time.time() < backoff, "completed only once the backoff ran out"
    assert "half-0" in tenant.pods()
