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
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
PR_SET_PDEATHSIG = 1
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LISTEN_LOW = 10000  # the lowest port handed out: above the well-known and common service ports
ADDRESS_IN_USE = "address already in use"  # how Go's net package says a port was taken
START_ATTEMPTS = 3
_PICK = random.Random()  # seeded from os.urandom: a test seeding `random` does not repeat ports


@dataclass(frozen=True, slots=True)
class ManagedProcess:
    """What is needed to find and stop a child later, possibly from another process."""

    name: str
    pid: int
    start_ticks: int  # field 22 of /proc/<pid>/stat: distinguishes a recycled pid
    log: str
    argv: tuple[str, ...] = ()  # how it was started (``DevCluster.restart`` starts it again)
    log_start: int = 0  # the log's size when it started: what came before is another run's

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["argv"] = list(self.argv)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ManagedProcess:
        return cls(str(data["name"]), int(data["pid"]), int(data["start_ticks"]),
                   str(data["log"]), tuple(str(a) for a in data.get("argv") or ()),
                   int(data.get("log_start") or 0))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now, below the kernel's ephemeral range.

    Not port 0: the kernel hands the ports of that range to every bind(0) and every outgoing
    connection, so between this check and the child's own bind a client socket or another
    cluster's check could take it (flake check run 1 at 774926f: etcd died with "address
    already in use" on 60045). Below the range only listeners compete, and `start_listening`
    starts again on new ports when one of them won.
    """
    high = ephemeral_range()[0]
    for _ in range(100):
        port = _PICK.randrange(LISTEN_LOW, high) if high > LISTEN_LOW else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise OSError(f"no free TCP port on 127.0.0.1 between {LISTEN_LOW} and {high}")


def ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux's default if it cannot be read)."""
    try:
        low, high = EPHEMERAL_RANGE.read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def start_listening(start: Callable[[], T], attempts: int = START_ATTEMPTS) -> T:
    """``start()`` (which picks its ports with `free_port`, spawns and waits until ready), once
    more on new ports each time its child died because another process bound a port first.
    Any other failure, or the last attempt's, is raised as it is."""
    for attempt in range(1, attempts + 1):
        try:
            return start()
        except Exited as exc:
            if attempt == attempts or ADDRESS_IN_USE not in exc.output.lower():
                raise
    raise AssertionError("unreachable")


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
        log_start = out.tell()
        popen = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, env=env, cwd=cwd,
            preexec_fn=_die_with(os.getpid()) if owned else None,
        )
    _CHILDREN[popen.pid] = popen  # keep it referenced so that we can reap it
    stat = _stat(popen.pid)
    ticks = stat[1] if stat else 0
    return ManagedProcess(name, popen.pid, ticks, str(log), tuple(argv), log_start)


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
            raise Exited(proc, what)
        time.sleep(interval_s)
    detail = f"\n{tail(proc)}" if proc is not None else ""
    raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}{detail}")


class Exited(RuntimeError):
    """A child died while it was being waited for; `output` is what it logged in this run."""

    def __init__(self, proc: ManagedProcess, what: str) -> None:
        super().__init__(f"{proc.name} exited while waiting for {what}:\n{tail(proc)}")
        self.proc = proc
        self.output = since_start(proc)


def since_start(proc: ManagedProcess) -> str:
    """What *proc* logged since it was spawned (its log is appended to across restarts)."""
    try:
        with open(proc.log, "rb") as f:
            f.seek(proc.log_start)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def tail(proc: ManagedProcess, lines: int = 30) -> str:
    try:
        text = Path(proc.log).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
