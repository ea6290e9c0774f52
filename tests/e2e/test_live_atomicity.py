"""No gang is ever left partly bound for good, and none loses a member to a fault that did
not take it: a member vanishing mid-bind, and the scheduler SIGKILLed mid-bind, on a real
control plane.

The races are made deterministic rather than hoped for: the in-process test wraps the binder
to delete a member between the decision and the bind; the SIGKILL test binds one pod at a time
(``bindConcurrency: 1``) and kills the scheduler process as soon as the watch shows the first
member bound, then checks that the gang really was cut in half before restarting it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from scheduler.kube.write.binder import BindOutcome, PodNode
from scheduler.model import PodRef
from scheduler.tools.devcluster.nodes import cordon_node
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.live import InProcessScheduler, PodWatch, Tenant
from tests.e2e.live_process import SchedulerProcess
from tests.e2e.reliability import deletions_logged

pytestmark = pytest.mark.e2e

BACKOFF_S = 2.0


def test_a_member_deleted_between_decision_and_bind_costs_the_others_nothing(
        tenant: Tenant, start_scheduler: Callable[..., InProcessScheduler]) -> None:
    """The bind of the deleted member fails (404) after the others were bound: they stay (the
    binder deletes nothing), the gang backs off, and once its controller (the test) recreates
    the member, the repair binds just that one, after the backoff."""
    tenant.create_nodes(1, gpus=8)
    runner = start_scheduler(bind_concurrency=1, bind_backoff_initial_seconds=BACKOFF_S)
    binder = runner.live.binder
    original = binder.bind_gangs
    gang_id = f"{tenant.namespace}/g"
    calls: list[tuple[float, BindOutcome]] = []
    victim: list[PodRef] = []

    def bind_gangs(gangs: Sequence[tuple[str, Sequence[PodNode]]],
                   scheduler_name: str) -> list[BindOutcome]:
        # The scheduler's own clock (time.time), read after the cycle that chose to bind took
        # its `now`: a retry allowed only once `now` passed the backoff's end enters later still.
        entered = time.time()
        for gid, pod_nodes in gangs:
            if gid == gang_id and not victim:  # the first attempt loses its last member
                victim.append(pod_nodes[-1][0])
                tenant.delete_pod(victim[0].name)
        outcomes = original(gangs, scheduler_name)
        calls.extend((entered, o) for o in outcomes if o.gang == gang_id)
        return outcomes

    binder.bind_gangs = bind_gangs  # type: ignore[method-assign]
    names = tenant.create_gang("g", 8)
    wait_for(lambda: calls, 30, what="the first bind attempt")
    failed_at, first = calls[0]
    assert not first.ok and not first.transient
    assert [(f.pod.name, f.code) for f in first.failed] == [(victim[0].name, 404)]
    kept = sorted(ref.name for ref, _ in first.bound)
    assert kept == sorted(set(names) - {victim[0].name}), first.describe()
    backoff = wait_for(lambda: runner.live.scheduler.backing_off(0.0).get(gang_id), 30,
                       what="a backoff recorded for the gang")  # (0.0: however soon this looks)
    assert backoff is not None and backoff > failed_at, "the backoff ends before the failure"

    # The test is the gang's controller: it recreates the deleted member.
    tenant.create_pod(victim[0].name, group="g")
    wait_for(lambda: tenant.all_bound(names), 30, what="the gang completed")
    # The pods are bound once the Bindings land; the wrapper records the attempt only when
    # the binder returns, a moment later.
    wait_for(lambda: len(calls) >= 2, 30, what="the retry's outcome recorded")
    retried_at, second = calls[-1]
    assert second.ok and [ref.name for ref, _ in second.bound] == [victim[0].name]
    assert len(calls) == 2
    # Order, not a margin: the retry's cycle began after the recorded backoff had run out.
    assert retried_at >= backoff, "retried before the backoff ran out"
    assert sorted(tenant.bound(names)) == sorted(names) and tenant.events("GangRolledBack") == []


def start_killable(cp: ControlPlane, tenant: Tenant, workdir: Path) -> SchedulerProcess:
    proc = SchedulerProcess(cp, tenant, workdir, config_yaml=(
        f"defaultQueue: {tenant.queue}\nbindConcurrency: 1\ncycleIntervalSeconds: 0.5\n"
        "logLevel: info\n"))
    proc.start()
    return proc


def kill_mid_bind(proc: SchedulerProcess, watch: PodWatch, tenant: Tenant,
                  names: list[str]) -> list[str]:
    """SIGKILL the scheduler once the first member is bound; the members bound at that point
    (checked to be some but not all, or the test would prove nothing)."""
    wait_for(watch.bound_names, 60, 0.002, what="the first member bound")
    proc.kill()
    bound = tenant.bound(names)
    assert 0 < len(bound) < len(names), f"the kill did not land mid-gang: {len(bound)} bound"
    return bound


def test_sigkill_mid_bind_then_restart_completes_the_gang(
        control_plane: ControlPlane, tenant: Tenant, tmp_path: Path) -> None:
    tenant.create_nodes(10, gpus=8)
    proc = start_killable(control_plane, tenant, tmp_path)
    try:
        with PodWatch(control_plane, tenant.namespace) as watch:
            names = tenant.create_gang("big", 80)
            kill_mid_bind(proc, watch, tenant, names)
            proc.start()
            wait_for(lambda: tenant.all_bound(names), 60, what="the gang completed")
            assert watch.rebinds() == {}, "a pod was bound twice"
            assert watch.deleted == {}, "a SIGKILL cost a pod"
        # Logged once the completion's binds have returned: after the test may see them bound.
        wait_for(lambda: "partial_gang_completed" in proc.log(), 30,
                 what="partial_gang_completed in the log")
        assert "Failed" not in tenant.phases(names).values()
        assert deletions_logged(proc.log_path) == {}
    finally:
        proc.stop()


def test_sigkill_mid_bind_then_restart_rolls_back_what_cannot_complete(
        control_plane: ControlPlane, tenant: Tenant, tmp_path: Path) -> None:
    nodes = tenant.create_nodes(10, gpus=8)
    proc = start_killable(control_plane, tenant, tmp_path)
    try:
        with PodWatch(control_plane, tenant.namespace) as watch:
            names = tenant.create_gang("big", 80)
            bound = kill_mid_bind(proc, watch, tenant, names)
            for node in nodes:  # nothing more fits: the restart cannot complete the gang
                cordon_node(control_plane.api, node)
            proc.start()
            wait_for(lambda: all(n not in tenant.pods() for n in bound), 60,
                     what="the bound members deleted")
            # A Binding sent just before the SIGKILL may have landed after `bound` was read:
            # that member is rolled back too, in the same pass but maybe a moment later.
            wait_for(lambda: tenant.bound(names) == [], 60, what="no member left bound")
            assert watch.rebinds() == {}
        wait_for(lambda: "partial_gang_rolled_back" in proc.log(), 30,
                 what="partial_gang_rolled_back in the log")
        # Not the SIGKILL: the cordon left no room for the rest, and the log says so.
        logged = wait_for(lambda: deletions_logged(proc.log_path), 30,
                          what="the deletions logged with their cause")
        assert set(logged) == {"NoRoom"} and logged["NoRoom"] >= len(bound), logged
    finally:
        proc.stop()
