"""The scheduler as a child process, for the e2e tests that SIGKILL it.

Why a process: only then does a kill leave exactly what a crash leaves (no ``finally``, no
thread still binding, no status flushed).
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from scheduler.tools.devcluster import procs
from tests.e2e.cluster_api import ControlPlane, answers_ready, wait_for
from tests.e2e.live import Tenant

REPO_ROOT = Path(__file__).resolve().parents[2]
CLI = REPO_ROOT / ".venv" / "bin" / "gang-scheduler"


# The scheduler, as a process ---------------------------------------------------------------
def _die_with_parent() -> None:
    """In the child: SIGKILL when the test process dies (the control plane dies with it too,
    and a scheduler left behind would retry against nothing forever)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class SchedulerProcess:
    """``gang-scheduler run`` as a child process, for tests that must SIGKILL it."""

    cp: ControlPlane
    tenant: Tenant
    workdir: Path
    config_yaml: str = ""
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0
    runs: int = 0
    #: With an identity, the replica takes part in leader election (the config's Lease).
    identity: str = ""
    kubeconfig: Path | None = None  # default: the control plane's own
    args: tuple[str, ...] = ()  # more flags for `gang-scheduler run`

    def start(self, timeout_s: float = 60.0) -> None:
        self.runs += 1
        config = self.workdir / f"config{'-' + self.identity if self.identity else ''}.yaml"
        config.write_text(self.config_yaml or "{}\n")
        self.port = procs.free_port()
        log = self.log_path.open("wb")
        election = ["--identity", self.identity] if self.identity else ["--no-leader-election"]
        self.proc = subprocess.Popen(
            [str(CLI), "run", "--kubeconfig", str(self.kubeconfig or self.cp.kubeconfig),
             "--config", str(config), "--scheduler-name", self.tenant.scheduler_name,
             *election, "--metrics-address", f"127.0.0.1:{self.port}", "--log-format", "json",
             *self.args],
            stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, preexec_fn=_die_with_parent)
        log.close()
        wait_for(self._ready, timeout_s, 0.1, what=f"scheduler ready on :{self.port} "
                 f"(log: {self.log_path})")

    @property
    def log_path(self) -> Path:
        name = f"scheduler-{self.identity + '-' if self.identity else ''}{self.runs}.log"
        return self.workdir / name

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"scheduler exited with {self.proc.returncode}; see "
                                 f"{self.log_path}")
        return answers_ready(self.port)

    def kill(self) -> None:
        """SIGKILL: no cleanup of any kind runs in the scheduler."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def pause(self) -> None:
        """SIGSTOP: frozen as by a long GC pause or a frozen VM; ``resume`` thaws it."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")
