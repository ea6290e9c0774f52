"""Issue 39, "failed runs explained": a Job failing in a backoff loop is explained with its
ranks' exit reasons, with the real Job controller.

An Indexed Job of 2 ranks with ``backoffLimitPerIndex: 1`` whose containers exit 3 after a
few seconds (kwok plays it: ``gangscheduler.io/simulated-exit-code``). ``explain NS/JOB``
names each rank's exit code and the retries its index has left while the Job backs off and
retries, and once both ranks used their retry and the Job has no pod left to run, says so
(no retry: the rank failed for good) still naming each rank's exit code. The live
scheduler's cache keeps the same records. Every wait polls state with a generous timeout.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from scheduler.tools.devcluster import rest
from tests.e2e.cluster_api import SIMULATED_EXIT_CODE, SIMULATED_RUNTIME, ControlPlane, wait_for
from tests.e2e.live import QUEUE_LABEL
from tests.e2e.ops_support import Ops, ops_for
from tests.e2e.test_deploy_support import CLI

pytestmark = pytest.mark.e2e

RANKS = (0, 1)


@pytest.fixture
def ops(control_plane: ControlPlane) -> Iterator[Ops]:
    yield from ops_for(control_plane)


def explain(ops: Ops, target: str, tmp: Path) -> str:
    """``gang-scheduler explain TARGET`` as a user runs it (exit code checked: found)."""
    config = tmp / "explain.yaml"
    config.write_text(f"schedulerName: {ops.tenant.scheduler_name}\n")
    env = {**os.environ, "KUBECONFIG": str(ops.cp.kubeconfig), "HOME": str(tmp)}
    done = subprocess.run([str(CLI), "explain", target, "--config", str(config)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    text = done.stdout + done.stderr
    assert done.returncode == 0, text
    return text


def rank_lines(text: str) -> dict[int, list[str]]:
    """Each rank's lines of the "last failures" section: its failure, then what follows."""
    section = text.split("last failures", 1)[1] if "last failures" in text else ""
    found: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in section.splitlines():
        if m := re.match(r"  rank (\d+): ", line):
            current = found.setdefault(int(m.group(1)), [])
        elif not line.startswith("    "):
            current = None
        if current is not None:
            current.append(line.strip())
    return found


def test_a_job_failing_in_a_backoff_loop_is_explained_by_its_ranks_exit_codes(
        ops: Ops, tmp_path: Path) -> None:
    tenant = ops.tenant
    tenant.create_nodes(1, gpus=8)
    runner = ops.start_scheduler()
    template = {"metadata": {"labels": {QUEUE_LABEL: tenant.queue}, "annotations": {
        SIMULATED_RUNTIME: "10", SIMULATED_EXIT_CODE: "3"}}, "spec": tenant.pod_spec(1)}
    rest.call(client.BatchV1Api(ops.cp.api).create_namespaced_job, tenant.namespace, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "crashy", "labels": {QUEUE_LABEL: tenant.queue}},
        "spec": {"parallelism": 2, "completions": 2, "completionMode": "Indexed",
                 "backoffLimitPerIndex": 1, "template": template}})
    target = f"{tenant.namespace}/crashy"
    seen: list[str] = []

    def first_failures_explained() -> bool:
        text = explain(ops, target, tmp_path)
        seen.append(text)
        ranks = rank_lines(text)
        return all(any("exit code 3 (Error) in container main" in ln for ln in ranks.get(r, []))
                   and ("retry 1 of backoffLimitPerIndex 1 comes next (the last: one more "
                        f"failure fails rank {r})") in ranks[r]
                   for r in RANKS)

    # After each rank's first failure: its exit code, and one failure used of one allowed
    # (the pod the controller makes again is the last try).
    wait_for(first_failures_explained, 240, interval_s=1.0,
             what="explain naming each rank's first exit code and retries left")
    print(f"\nexplain {target} while it backs off:\n{seen[-1]}")

    def retries_used_up() -> bool:
        pods = tenant.job_pods("crashy")
        active = [n for n, p in pods.items()
                  if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        return len(pods) == 4 and not active

    wait_for(retries_used_up, 240, interval_s=1.0, what="each rank's second pod failed too")
    final = ""

    def both_ranks_failed_for_good() -> bool:
        nonlocal final
        final = explain(ops, target, tmp_path)
        ranks = rank_lines(final)
        return all(any("exit code 3 (Error)" in ln for ln in ranks.get(r, []))
                   and any(ln.startswith("no retry: ") for ln in ranks[r]) for r in RANKS)

    wait_for(both_ranks_failed_for_good, 180, interval_s=1.0,
             what="explain saying no rank is retried")
    print(f"\nexplain {target} once its ranks used up their retries:\n{final}")
    assert "not found" not in final and "(newest per rank; 2 earlier kept)" in final, final
    # The running scheduler's cache kept both attempts of both ranks.
    gangs = {runner.live.cache.gang_of_pod(tenant.namespace, n)
             for n in tenant.job_pods("crashy")}
    kept = [f for g in gangs if g for f in runner.live.cache.failures(g)]
    assert sorted((f.rank, f.exit_code) for f in kept) == [
        ("0", 3), ("0", 3), ("1", 3), ("1", 3)], kept
