"""gang-scheduler under the real Kueue (issue 40, item 1): Kueue admits Jobs by the quota of
its ClusterQueue and unsuspends them with its flavor's nodeSelector injected; gang-scheduler,
in the Kueue mode (its own quota step off), places each admitted Job's pods all-or-nothing.

- The deadlock Kueue's quota cannot see: its ClusterQueue has quota for 16 GPUs, the nodes
  room for 12, so Kueue admits both 8-pod Jobs. Placed pod by pod (the dev cluster's
  kube-scheduler, as Kueue's docs pair it), they take 12 GPUs between them and at least one
  is bound in part; gang-scheduler runs one whole (8 of 8) and leaves the other with none
  bound, waiting for room.
- Kueue preempts a running gang: a higher-priority Job in the same ClusterQueue makes Kueue
  evict the running one (it suspends the Job, whose controller deletes its pods), and
  gang-scheduler places the new Job whole on the nodes that frees.

The same steps as the README's "Under Kueue" recipe. Kueue is started once in the session
cluster (``kueue_support.ensure_kueue``).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from scheduler.run.kueue_mode import KueueConfig
from tests.e2e.cluster_api import ControlPlane, wait_for
from tests.e2e.kueue_support import KueueTenant, ensure_kueue
from tests.e2e.live import POOL_LABEL, InProcessScheduler, Tenant
from tests.e2e.test_deploy_support import CLI

pytestmark = pytest.mark.e2e

SIZE = 8  # pods of one GPU per Job


@pytest.fixture
def kueue(control_plane: ControlPlane, tenant: Tenant) -> KueueTenant:
    started = time.monotonic()
    ensure_kueue(control_plane)
    print(f"[kueue] ready after {time.monotonic() - started:.1f}s")
    return KueueTenant(tenant)


def kueue_mode(start_scheduler: Callable[..., InProcessScheduler],
               tenant: Tenant) -> InProcessScheduler:
    """The tenant's scheduler in the Kueue mode: placement only, in the tenant's pool."""
    return start_scheduler(kueue=KueueConfig(enabled=True, pools=(tenant.pool,)))


def explained(tenant: Tenant, target: str, tmp: Path) -> tuple[int, str]:
    """``gang-scheduler explain TARGET`` in the Kueue mode, as a user runs it."""
    config = tmp / "explain.yaml"
    config.write_text(f"schedulerName: {tenant.scheduler_name}\n"
                      f"kueue: {{enabled: true, pools: [{tenant.pool}]}}\n")
    env = {**os.environ, "KUBECONFIG": str(tenant.cp.kubeconfig), "HOME": str(tmp)}
    done = subprocess.run([str(CLI), "explain", target, "--config", str(config)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, done.stdout + done.stderr


def test_two_admitted_jobs_on_room_for_one_run_one_whole_not_both_in_part(
        kueue: KueueTenant, tenant: Tenant, tmp_path: Path,
        start_scheduler: Callable[..., InProcessScheduler]) -> None:
    started = time.monotonic()
    tenant.create_nodes(3, gpus=4)  # room for 12 GPUs
    scheduler = kueue_mode(start_scheduler, tenant)
    kueue.create_queues(gpus=16)  # quota for both
    for job in ("a", "b"):
        kueue.create_job(job, SIZE)
    wait_for(lambda: kueue.admitted("a") and kueue.admitted("b"), 120,
             what="Kueue admitting both Jobs (its quota covers 16 GPUs)")
    # Unsuspended, each Job's controller creates its 8 pods, with the flavor's node selector.
    wait_for(lambda: all(len(kueue.live_pods(j)) == SIZE for j in ("a", "b")), 120,
             what="both Jobs' pods")
    for job in ("a", "b"):
        selectors = {p["spec"].get("nodeSelector", {}).get(POOL_LABEL)
                     for p in kueue.live_pods(job).values()}
        assert selectors == {tenant.pool}, f"Kueue injected its flavor's nodeSelector in {job}"
    whole = wait_for(lambda: next((j for j in ("a", "b") if kueue.bound(j) == SIZE), ""),
                     120, what="one Job bound whole")
    other = "b" if whole == "a" else "a"
    for _ in scheduler.during_cycles(4):  # however many passes: never a part of the other
        assert kueue.bound(other) == 0, f"{other} bound in part: {kueue.bound(other)}"
        assert kueue.bound(whole) == SIZE
    assert kueue.admitted(other)  # Kueue's decision stands: it is capacity that holds it
    # A third Job is past the ClusterQueue's quota: Kueue holds it suspended, without pods,
    # and explain says that layer holds it, in Kueue's words.
    kueue.create_job("c", SIZE)
    wait_for(lambda: kueue.condition("c", "QuotaReserved").get("status") == "False", 120,
             what="Kueue holding Job c back by quota")
    code, text = explained(tenant, f"{tenant.namespace}/c", tmp_path)
    print(f"explain c:\n{text}")
    assert code == 0, text
    held = kueue.workload("c")
    assert held is not None
    assert (f"held by Kueue: not admitted yet (Workload {held['metadata']['name']}: couldn't "
            "assign flavors") in " ".join(text.split()), text
    print(f"[kueue] deadlock scenario: one Job whole, the other 0 bound, "
          f"{time.monotonic() - started:.1f}s")


def test_kube_scheduler_under_kueue_binds_both_jobs_in_part(kueue: KueueTenant,
                                                           tenant: Tenant) -> None:
    # The same two admitted Jobs for the dev cluster's kube-scheduler (pod by pod; a Job that
    # is not Indexed gets no PodGroup from its controller): it fills the 12 GPUs with pods of
    # both Jobs, so at least one is bound in part and holds GPUs it cannot use.
    tenant.create_nodes(3, gpus=4)
    kueue.create_queues(gpus=16)
    for job in ("a", "b"):
        kueue.create_job(job, SIZE, scheduler_name="default-scheduler")
    wait_for(lambda: kueue.bound("a") + kueue.bound("b") == 12, 180,
             what="kube-scheduler filling the 12 GPUs")
    bound = {j: kueue.bound(j) for j in ("a", "b")}
    print(f"[kueue] kube-scheduler bound {bound} of {SIZE} each")
    assert any(0 < n < SIZE for n in bound.values()), bound
    assert kueue.admitted("a") and kueue.admitted("b")


def test_kueue_preempts_a_running_gang_and_the_new_job_is_placed_whole(
        kueue: KueueTenant, tenant: Tenant, tmp_path: Path,
        start_scheduler: Callable[..., InProcessScheduler]) -> None:
    started = time.monotonic()
    tenant.create_nodes(2, gpus=4)  # room for 8 GPUs, as much as the quota
    kueue_mode(start_scheduler, tenant)
    kueue.create_queues(gpus=8, preemption={"withinClusterQueue": "LowerPriority"})
    low = kueue.create_priority_class("low", 100)
    high = kueue.create_priority_class("high", 1000)
    kueue.create_job("low", SIZE, low)
    wait_for(lambda: kueue.bound("low") == SIZE, 120, what="the low-priority Job bound whole")
    kueue.create_job("high", SIZE, high)
    # Kueue evicts the running Workload for the higher-priority one: it suspends the Job,
    # whose controller deletes its pods; then it admits the new one.
    wait_for(lambda: kueue.job("low")["spec"].get("suspend") is True, 120,
             what="Kueue suspending the running low-priority Job")
    evicted = kueue.condition("low", "Evicted")
    assert evicted.get("status") == "True" and evicted.get("reason") == "Preempted", evicted
    wait_for(lambda: kueue.bound("high") == SIZE, 180, what="the high-priority Job bound whole")
    assert kueue.live_pods("low") == {}
    assert not kueue.admitted("low")
    # Preempted and suspended, it waits for Kueue again, and explain says so.
    code, text = explained(tenant, f"{tenant.namespace}/low", tmp_path)
    print(f"explain low:\n{text}")
    said = " ".join(text.split())
    assert code == 0 and "held by Kueue: not admitted yet (Workload " in said, text
    assert "Kueue evicted it before: Preempted" in said, text
    print(f"[kueue] preemption scenario: {time.monotonic() - started:.1f}s")
