"""Child processes of the dev cluster: start them in their own process group, stop them fully.

Why process groups and start times: `up` may run in one shell and `down` in another, long after
the starting Python process has exited, so a process is identified by its pid *and* its start
time (from /proc), and `down` only ever signals a pid whose start time still matches, never a
recycled one. Each child leads its own session so that one `killpg` reaches anything it forked,
and Ctrl-C in the starting shell does not take the cluster down by accident. When the starting
process owns the cluster (tests, `up --foreground`), children also get PR_SET_PDEATHSIG so they
die with it even if it is SIGKILLed and atexit never runs. That signal is SIGKILL, not SIGTERM:
all children get it at once, and kube-apiserver's graceful shutdown stalls once etcd is gone.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1


@dataclass(frozen=True, slots=True)
class ManagedProcess:
    """What is needed to find and stop a child later, possibly from another process."""

    name: str
    pid: int
    start_ticks: int  # field 22 of /proc/<pid>/stat: distinguishes a recycled pid
    log: str
    argv: tuple[str, ...] = ()  # how it was started (``DevCluster.restart`` starts it again)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["argv"] = list(self.argv)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ManagedProcess:
        return cls(str(data["name"]), int(data["pid"]), int(data["start_ticks"]),
                   str(data["log"]), tuple(str(a) for a in data.get("argv") or ()))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start ticks) of a pid, or None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()  # the command name may contain spaces
    return fields[0], int(fields[19])


def is_alive(proc: ManagedProcess) -> bool:
    stat = _stat(proc.pid)
    return stat is not None and stat[1] == proc.start_ticks and stat[0] not in ("Z", "X")


def _die_with(parent: int) -> Callable[[], None]:
    """A preexec hook: SIGKILL this child when `parent` dies (also if it already has)."""

    def hook() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return hook


def spawn(name: str, argv: Sequence[str], log: Path, owned: bool,
          env: dict[str, str] | None = None, cwd: Path | None = None) -> ManagedProcess:
    """Start `argv` in a new session, stdout and stderr appended to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        popen = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, env=env, cwd=cwd,
            preexec_fn=_die_with(os.getpid()) if owned else None,
        )
    _CHILDREN[popen.pid] = popen  # keep it referenced so that we can reap it
    stat = _stat(popen.pid)
    ticks = stat[1] if stat else 0
    return ManagedProcess(name, popen.pid, ticks, str(log), tuple(argv))


_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def _reap(pid: int) -> None:
    popen = _CHILDREN.get(pid)
    if popen is not None and popen.poll() is not None:
        del _CHILDREN[pid]


def kill(proc: ManagedProcess) -> None:
    """SIGKILL the process group at once (a crash) and wait until it is gone."""
    if is_alive(proc):
        _signal_group(proc, signal.SIGKILL)
        _wait_dead(proc, 10.0)
    _reap(proc.pid)


def stop(proc: ManagedProcess, grace_s: float = 10.0) -> bool:
    """SIGTERM the process group, then SIGKILL after `grace_s`. True if it had to be killed."""
    if not is_alive(proc):
        _reap(proc.pid)
        return False
    _signal_group(proc, signal.SIGTERM)
    if _wait_dead(proc, grace_s):
        return False
    _signal_group(proc, signal.SIGKILL)
    _wait_dead(proc, 5.0)
    return True


def _signal_group(proc: ManagedProcess, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # the child leads its session, so pgid == pid
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(proc.pid, sig)


def _wait_dead(proc: ManagedProcess, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _reap(proc.pid)
        if not is_alive(proc) and not group_alive(proc.pid):
            return True
        time.sleep(0.05)
    return False


def group_alive(pgid: int) -> bool:
    """Whether any process is still in process group `pgid` (a forked grandchild, say)."""
    try:
        os.killpg(pgid, 0)  # cheap first check; it also succeeds for zombies
    except (ProcessLookupError, PermissionError):
        return False
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _stat(int(entry))
        if stat is not None and stat[0] not in ("Z", "X") and _pgid_of(int(entry)) == pgid:
            return True
    return False


def _pgid_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def wait_until(check: Callable[[], bool], timeout_s: float, what: str,
               proc: ManagedProcess | None = None, interval_s: float = 0.1) -> None:
    """Poll `check` until it is true; fail early (with the log tail) if `proc` dies."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        if proc is not None and not is_alive(proc):
            raise RuntimeError(f"{proc.name} exited while waiting for {what}:\n{tail(proc)}")
        time.sleep(interval_s)
    detail = f"\n{tail(proc)}" if proc is not None else ""
    raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}{detail}")


def tail(proc: ManagedProcess, lines: int = 30) -> str:
    try:
        text = Path(proc.log).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
