"""Ports of the dev cluster's children: picked outside the kernel's ephemeral range, and a
child that lost its port to another process is started again on a new one.

The children here are real processes (a Python listener), so "address already in use" is the
kernel's own refusal, not a string the test wrote into a log.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.tools.devcluster import procs

LISTENER = """
import socket, sys, time
sock = socket.socket()
sock.bind(("127.0.0.1", int(sys.argv[1])))  # raises "[Errno 98] Address already in use"
sock.listen()
print("listening", flush=True)
time.sleep(120)
"""


@pytest.fixture
def taken() -> Iterator[int]:
    """A port another process (this test) is listening on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", procs.free_port()))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.fixture
def started() -> Iterator[list[procs.ManagedProcess]]:
    children: list[procs.ManagedProcess] = []
    yield children
    for child in children:
        procs.stop(child, grace_s=2)


def listen(log: Path, ports: Iterator[int], tries: list[int],
           children: list[procs.ManagedProcess]) -> procs.ManagedProcess:
    """Start the listener on the next port and wait until it listens (or dies)."""
    port = next(ports)
    tries.append(port)
    child = procs.spawn("listener", [sys.executable, "-c", LISTENER, str(port)], log, owned=True)
    children.append(child)
    procs.wait_until(lambda: "listening" in procs.since_start(child), 30, "the listener", child)
    return child


def test_a_port_is_free_and_below_the_ephemeral_range() -> None:
    low, _ = procs.ephemeral_range()
    for _ in range(20):
        port = procs.free_port()
        assert procs.LISTEN_LOW <= port < low
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free: binding it does not raise


def test_a_taken_port_is_never_handed_out(taken: int, monkeypatch: pytest.MonkeyPatch) -> None:
    pick = procs._PICK.randrange
    first = iter([taken, taken])  # the taken port comes up twice, then chance picks again
    monkeypatch.setattr(procs._PICK, "randrange",
                        lambda low, high: next(first, None) or pick(low, high))
    assert procs.free_port() != taken
    assert next(first, None) is None, "the taken port was not tried"


def test_a_child_that_lost_its_port_is_started_again_on_another(
        tmp_path: Path, taken: int, started: list[procs.ManagedProcess]) -> None:
    tries: list[int] = []
    ports = iter([taken, procs.free_port()])
    child = procs.start_listening(lambda: listen(tmp_path / "l.log", ports, tries, started))
    assert tries[0] == taken and len(tries) == 2
    assert procs.is_alive(child) and "listening" in procs.since_start(child)
    assert "address already in use" in (tmp_path / "l.log").read_text().lower()


def test_the_last_attempt_fails_with_the_childs_own_words(
        tmp_path: Path, taken: int, started: list[procs.ManagedProcess]) -> None:
    tries: list[int] = []
    with pytest.raises(procs.Exited, match=r"(?i)address already in use"):
        procs.start_listening(lambda: listen(tmp_path / "l.log", iter([taken] * 5), tries, started),
                              attempts=3)
    assert tries == [taken] * 3


def test_any_other_death_is_not_retried(tmp_path: Path,
                                        started: list[procs.ManagedProcess]) -> None:
    log = tmp_path / "l.log"
    log.write_text("OSError: [Errno 98] Address already in use  (an earlier run's)\n")
    tries: list[int] = []
    with pytest.raises(procs.Exited) as raised:
        procs.start_listening(lambda: listen(log, iter([-1]), tries, started))
    assert tries == [-1], "retried a child that died of something else"
    assert "earlier run" not in raised.value.output  # only what this child logged counts
    assert "earlier run" in str(raised.value)  # while the message shows the log's tail
