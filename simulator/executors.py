"""Where a sweep's independent runs execute: local processes (the default) or a Ray cluster.

Why one seam: every sweep (``simulate --sweep``, ``simulate --checkpoint-sweep``, ``packing``)
is a list of runs that share nothing, each deterministic for its input. The sweep hands the
list to an executor and gets the results back *in the order it gave them*, whatever order
they finished in, so what it writes is byte-identical wherever the runs ran. ``done`` is
called once per finished run (the progress bar), in finishing order.

Local processes need no extra package. Ray is an optional extra (``pip install
'gang-scheduler[ray]'``) and is only imported when an address is given: an environment
variable alone (``RAY_ADDRESS``) never sends work to a cluster; ``--ray-address env`` says
to use it. The project's own packages travel with the runs (Ray's ``py_modules``), so the
cluster runs the same code as the command; its Python needs the project's dependencies and
the same Ray and Python versions as this one.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import pickle
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_PROCESSES = 2  # this project's reference machine has 2 cores
RAY_ADDRESS_ENV = "RAY_ADDRESS"
#: How long to wait for a TCP connection to the cluster before calling it unreachable.
CONNECT_TIMEOUT_SECONDS = 5.0
#: The packages a run's code lives in, shipped to the cluster with every sweep.
_PROJECT_PACKAGES = ("scheduler", "policies", "simulator")


class ExecutorError(RuntimeError):
    """The executor cannot be used (Ray not installed, the cluster unreachable); the message
    says what to do."""


class RunFailed(RuntimeError):
    """One run raised. *index* is its position in the list given; the caller names the run
    (a size, a policy and seed) since only it knows what the item means."""

    def __init__(self, index: int, cause: BaseException, where: str) -> None:
        self.index = index
        self.cause = cause
        self.where = where  # "" for local processes, " on Ray at ADDR" for Ray
        detail = str(cause).strip().splitlines()
        self.reason = f"{type(cause).__name__}: {detail[0]}" if detail else type(cause).__name__
        super().__init__(f"run {index} failed{where}: {self.reason}")


class Executor(Protocol):
    @property
    def shares_files(self) -> bool:
        """True when the runs read this machine's files (a path names the same file)."""
        ...

    def run_all(self, fn: Callable[[T], R], items: Sequence[T],
                done: Callable[[int, R], None] | None = None) -> list[R]:
        """``[fn(item) for item in items]``, run wherever this executor runs things; raises
        ``RunFailed`` for the first run seen failing, after cancelling the rest."""
        ...


@dataclass(frozen=True, slots=True)
class LocalProcesses:
    """*processes* worker processes on this machine (1: in this process, no pickling)."""

    processes: int = DEFAULT_PROCESSES

    @property
    def shares_files(self) -> bool:
        return True

    def run_all(self, fn: Callable[[T], R], items: Sequence[T],
                done: Callable[[int, R], None] | None = None) -> list[R]:
        results: dict[int, R] = {}
        workers = max(1, min(self.processes, len(items), os.cpu_count() or 1))
        if workers == 1:
            for i, item in enumerate(items):
                try:
                    results[i] = fn(item)
                except Exception as exc:
                    raise RunFailed(i, exc, "") from exc
                _tell(done, i, results[i])
            return [results[i] for i in range(len(items))]
        _check_picklable(fn)
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures: dict[Future[R], int] = {pool.submit(fn, item): i
                                             for i, item in enumerate(items)}
            for future in as_completed(futures):
                i = futures[future]
                try:
                    results[i] = future.result()
                except Exception as exc:  # the run's exception, or BrokenProcessPool
                    pool.shutdown(cancel_futures=True)  # do not wait for the other runs
                    raise RunFailed(i, exc, "") from exc
                _tell(done, i, results[i])
        return [results[i] for i in range(len(items))]


@dataclass(frozen=True, slots=True)
class RayCluster:
    """The Ray cluster at *address* (``HOST:PORT`` of its head, or ``ray://HOST:PORT`` for
    Ray Client); one CPU per run. Connects for one ``run_all`` and disconnects after (a
    command runs one sweep)."""

    address: str

    @property
    def shares_files(self) -> bool:
        return False

    @property
    def where(self) -> str:
        return f" on Ray at {self.address}"

    def run_all(self, fn: Callable[[T], R], items: Sequence[T],
                done: Callable[[int, R], None] | None = None) -> list[R]:
        import ray

        self._connect(ray)
        try:
            # Ray retries a run whose worker or node died (its default, 3 times): a run is
            # deterministic, so a retry gives the same result; a run that raised is not retried.
            task: Any = ray.remote(num_cpus=1)(_apply)
            shared = ray.put(fn)  # once, not once per run (a packing run carries the cluster)
            refs = [task.remote(shared, item) for item in items]
            index = {ref: i for i, ref in enumerate(refs)}
            results: dict[int, R] = {}
            pending = list(refs)
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                i = index[ready[0]]
                try:
                    results[i] = ray.get(ready[0])
                except Exception as exc:  # RayTaskError wraps the run's own exception
                    for ref in pending:
                        ray.cancel(ref, force=True)
                    cause = getattr(exc, "cause", None)
                    raise RunFailed(i, cause if isinstance(cause, BaseException) else exc,
                                    self.where) from exc
                _tell(done, i, results[i])
            return [results[i] for i in range(len(items))]
        finally:
            ray.shutdown()

    def _connect(self, ray: Any) -> None:
        check_reachable(self.address)
        try:
            ray.init(address=self.address, runtime_env={"py_modules": _project_packages(),
                                                        "excludes": ["__pycache__", "*.pyc"]},
                     logging_level=logging.WARNING, log_to_driver=False)
        except Exception as exc:
            raise ExecutorError(f"cannot use the Ray cluster at {self.address}: "
                                f"{type(exc).__name__}: {_first_line(exc)}") from exc


def executor_for(processes: int, ray_address: str | None) -> Executor:
    """The executor the flags ask for: *ray_address* (``env`` reads ``$RAY_ADDRESS``) or
    *processes* local processes. Raises ``ExecutorError`` when Ray is asked for but not
    installed, the address is malformed or unset, or nothing answers there."""
    if ray_address is None:
        return LocalProcesses(processes)
    address = ray_address.strip()
    if address == "env":
        address = os.environ.get(RAY_ADDRESS_ENV, "").strip()
        if not address:
            raise ExecutorError(f"--ray-address env: ${RAY_ADDRESS_ENV} is not set")
    if address in ("auto", "local", ""):
        raise ExecutorError(f"--ray-address: give the head's HOST:PORT (or ray://HOST:PORT), "
                            f"got {ray_address!r}; 'env' takes it from ${RAY_ADDRESS_ENV}, "
                            "and without the flag the runs use local processes (--jobs)")
    if not ray_installed():
        raise ExecutorError("--ray-address: Ray is not installed; install the extra: "
                            "pip install 'gang-scheduler[ray]'")
    check_reachable(address)
    return RayCluster(address)


def ray_installed() -> bool:
    return importlib.util.find_spec("ray") is not None


def check_reachable(address: str) -> None:
    """Fail fast, naming the address and the reason, when no TCP connection can be opened
    there (Ray itself retries for a minute before giving up)."""
    host, port = _host_port(address)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_SECONDS):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise ExecutorError(f"--ray-address {address}: cannot connect to {host}:{port}: "
                            f"{reason}") from exc


def _host_port(address: str) -> tuple[str, int]:
    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ExecutorError(f"--ray-address: expected HOST:PORT or ray://HOST:PORT, "
                            f"got {address!r}")
    return host, int(port)


def _apply(fn: Callable[[T], R], item: T) -> R:
    """What a Ray task runs (module-level: Ray ships it by reference)."""
    return fn(item)


def _tell(done: Callable[[int, R], None] | None, index: int, result: R) -> None:
    if done is not None:
        done(index, result)


def _project_packages() -> list[str]:
    root = Path(__file__).resolve().parent.parent
    return [str(root / name) for name in _PROJECT_PACKAGES]


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


def _check_picklable(fn: Callable[..., Any]) -> None:
    try:
        pickle.dumps(fn)
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise TypeError(
            "the runs must be picklable to run in worker processes (a module-level "
            f"function, or functools.partial or a dataclass instance of one), got {fn!r}: {exc}"
        ) from exc
