"""High availability on a real control plane: two ``gang-scheduler run`` processes with leader
election on a Lease; the leader is SIGKILLed (no cleanup, no release) and the standby takes
over within the lease duration and schedules; no pod is ever bound twice; while the leader
lives, the standby schedules nothing.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from scheduler.tools.devcluster import rest
from scheduler.tools.devcluster.procs import free_port
from tests.e2e.cluster_api import ControlPlane, answers_ready, wait_for
from tests.e2e.live import PodWatch
from tests.e2e.ops_support import Ops, ops_for, scrape, value

pytestmark = pytest.mark.e2e

LEASE_S, RENEW_S, RETRY_S = 3, 2, 0.5


def micro_time(value: str) -> datetime:
    """A Lease's MicroTime (``2026-12-01T19:00:00.123456Z``)."""
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")
REPO_ROOT = Path(__file__).resolve().parents[2]
CLI = REPO_ROOT / ".venv" / "bin" / "gang-scheduler"


@pytest.fixture
def ops(control_plane: ControlPlane) -> Iterator[Ops]:
    yield from ops_for(control_plane)


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class Replica:
    """One ``gang-scheduler run --identity NAME`` process with leader election on."""

    identity: str
    log_path: Path
    proc: subprocess.Popen[bytes]
    port: int

    @classmethod
    def start(cls, ops: Ops, identity: str, config: Path, workdir: Path) -> Replica:
        port, log_path = free_port(), workdir / f"scheduler-{identity}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [str(CLI), "run", "--kubeconfig", str(ops.cp.kubeconfig), "--config",
                 str(config), "--identity", identity, "--metrics-address",
                 f"127.0.0.1:{port}", "--log-format", "json"],
                stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
                preexec_fn=_die_with_parent)
        replica = cls(identity, log_path, proc, port)
        ops.cleanup.append(replica.stop)
        wait_for(replica.ready, 60, what=f"replica {identity} ready (log: {log_path})")
        return replica

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.identity} exited: {self.log_path.read_text()[-3000:]}")
        return answers_ready(self.port)

    def metric(self, name: str, **labels: str) -> float:
        return value(scrape(self.port), name, **labels)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


def test_the_standby_takes_over_when_the_leader_is_killed(ops: Ops,
                                                           tmp_path: Path) -> None:
    ops.tenant.create_nodes(2, gpus=8)
    lease_ns = ops.cp.new_namespace("lease")
    lease_name = ops.name("lease")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"schedulerName: {ops.tenant.scheduler_name}\n"
        f"defaultQueue: {ops.tenant.queue}\n"
        "cycleIntervalSeconds: 0.5\nbindBackoffInitialSeconds: 1\neventMinIntervalSeconds: 1\n"
        f"leaderElection:\n  enabled: true\n  leaseName: {lease_name}\n"
        f"  leaseNamespace: {lease_ns}\n  leaseDurationSeconds: {LEASE_S}\n"
        f"  renewDeadlineSeconds: {RENEW_S}\n  retryPeriodSeconds: {RETRY_S}\n")
    leases = client.CoordinationV1Api(ops.cp.api)

    def spec() -> dict[str, Any]:
        try:
            return dict(rest.call(leases.read_namespaced_lease, lease_name, lease_ns)["spec"])
        except client.ApiException as exc:
            if exc.status == 404:
                return {}
            raise

    def holder() -> str:
        return str(spec().get("holderIdentity") or "")

    with PodWatch(ops.cp, ops.ns) as watch:
        a = Replica.start(ops, "a", config, tmp_path)
        wait_for(lambda: holder() == "a", 30, what="a owns the Lease")
        b = Replica.start(ops, "b", config, tmp_path)
        first = ops.tenant.create_gang("first", 2, gpus=4)
        wait_for(lambda: ops.tenant.all_bound(first), 30, what="first gang bound by a")
        # a counts the bind once its Bindings returned, after the test may see the pods bound.
        wait_for(lambda: a.metric("gang_scheduler_binds_total", result="success") == 1, 30,
                 what="a counted its bind")
        time.sleep(2 * RETRY_S)  # more renewals: the standby has more chances to act
        # The standby watched all along, but ran no cycle and wrote nothing.
        assert (b.metric("gang_scheduler_is_leader"), b.metric("gang_scheduler_cycles_total"),
                b.metric("gang_scheduler_binds_total", result="success")) == (0, 0, 0)
        assert a.metric("gang_scheduler_is_leader") == 1
        assert a.metric("gang_scheduler_binds_total", result="success") == 1
        placed = ops.tenant.nodes_of(first)

        a.kill()
        killed = time.monotonic()
        # a's last renewal: b may not take the Lease for a whole lease after it (b needs more
        # than LEASE_S - RETRY_S of it to have passed, so this read comes first).
        last = spec()
        assert last["holderIdentity"] == "a", last
        second = ops.tenant.create_gang("second", 2, gpus=4)
        wait_for(lambda: holder() == "b", 60, interval_s=0.05, what="b takes over")
        took_over = time.monotonic() - killed
        taken = spec()
        gap = (micro_time(taken["acquireTime"]) - micro_time(last["renewTime"])).total_seconds()
        wait_for(lambda: ops.tenant.all_bound(second), 30, what="second gang bound by b")
        watch.seen_bound(second)
        bound_after = max(watch.first_bound[n] for n in second) - killed
        print(f"failover: Lease taken over {took_over:.2f}s after SIGKILL "
              f"({gap:.2f}s after a's last renewal), new gang bound "
              f"{bound_after:.2f}s after it (leaseDuration {LEASE_S}s, retry {RETRY_S}s)")
        # Order on the Lease's own timestamps, not a margin on the test's clock: b acquired it
        # no sooner than a whole lease after a's last renewal (never two leaders), as one
        # new holder. How soon after is the printed figure (a loaded machine delays it).
        assert gap >= LEASE_S - 0.01, (last, taken)  # (MicroTime: to the microsecond)
        assert taken["leaseTransitions"] == last["leaseTransitions"] + 1, (last, taken)
        assert b.metric("gang_scheduler_is_leader") == 1
        assert ops.tenant.nodes_of(first) == placed  # the first gang was left alone
        assert watch.rebinds() == {}
        assert '"leader_acquired"' in b.log_path.read_text()
