"""A background writer: one thread running the latest write task per key.

Everything a person reads (pod conditions, PodGroup status, events, Queue status) goes
through one, so the scheduling loop never waits on a status write, and a write superseded
before it ran (a reason that changed again, a gang bound meanwhile) is never made.

A task whose writes got no answer (or a 429 or 5xx: the apiserver or etcd restarting) is kept
and run again once the apiserver answers, unless a newer task for the same key came first:
many writes are made once (a ``Scheduled`` event, a PodGroup's condition at the bind, a Queue's
``Valid`` condition) and would otherwise be lost to an outage. While the apiserver does not
answer at all, tasks are postponed rather than sent to fail one by one. ``Retry`` counts both
(``status_writes_failed_total``, ``status_write_retries_total``).

A task whose write the apiserver refused (a 4xx that is not "gone": the write itself is wrong)
or that raised is counted as failed too, but not kept: the same write would fail the same way.
Its failure is logged once (``Once``): a pending gang's task is submitted again every cycle, and
a warning per cycle would bury every other line of the log.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from scheduler.kube.client import refused_writes, unanswered_writes

log = structlog.get_logger("gang_scheduler.writer")

Task = Callable[[], object]  # the result, if any, is ignored
_FLUSH = "__flush__"  # the key prefix of flush markers: they run even while writes are postponed


def _nothing() -> None:
    return None


def _always() -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Retry:
    """When failed tasks may run again, and what counts them."""

    #: Does the apiserver answer right now (the client's outage tracker)?
    answering: Callable[[], bool] = _always
    failed: Callable[[], None] = _nothing  # a task failed or was postponed
    retried: Callable[[], None] = _nothing  # a kept task was run again
    #: The first wait before kept tasks run again while the apiserver answers (5xx), doubled
    #: after each round that failed again, up to ``max_interval``.
    interval: float = 1.0
    max_interval: float = 30.0


class Once:
    """What failed and was logged, by key: a failure repeated with the same reason is logged
    once at warning level (again at debug), again when its reason changes or after the key
    succeeded once. Bounded: the oldest keys are forgotten first."""

    def __init__(self, max_keys: int = 10000) -> None:
        self._lock = threading.Lock()
        self._logged: dict[str, str] = {}  # key -> the reason logged
        self.max_keys = max_keys

    def failed(self, event: str, key: str, reason: str, **fields: object) -> None:
        """Log *event* for *key* failing for *reason*: a warning the first time."""
        with self._lock:
            first = self._logged.get(key) != reason
            if first:
                if key not in self._logged and len(self._logged) >= self.max_keys:
                    self._logged.pop(next(iter(self._logged)))
                self._logged[key] = reason
        (log.warning if first else log.debug)(event, key=key, reason=reason, **fields)

    def succeeded(self, key: str) -> None:
        with self._lock:
            self._logged.pop(key, None)


class BackgroundWriter:
    """A single thread running the latest write task per key (older ones are dropped)."""

    def __init__(self, name: str = "status-writer", retry: Retry | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._latest: dict[str, Task] = {}
        self._kept: dict[str, Task] = {}  # failed or postponed: run again when answered
        self._lock = threading.Lock()
        self._wake: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._started = 0  # tasks taken up so far
        self._finished = 0  # tasks done so far (they run one at a time, in that order)
        self.retry = retry or Retry()
        self._clock = clock
        self._interval = self.retry.interval
        self._retry_at = 0.0
        self._once = Once()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, key: str, task: Task) -> None:
        with self._lock:
            self._kept.pop(key, None)  # superseded
            fresh = key not in self._latest
            self._latest[key] = task
        if fresh:
            self._wake.put(key)

    def cancel(self, key: str) -> None:
        """Drop the task waiting under *key*, if any (one already running finishes)."""
        with self._lock:
            self._latest.pop(key, None)
            self._kept.pop(key, None)

    @property
    def started(self) -> int:
        """How many tasks have been taken up so far."""
        with self._lock:
            return self._started

    @property
    def finished(self) -> int:
        """How many tasks are done: once ``finished >= n``, the *n* first are."""
        with self._lock:
            return self._finished

    @property
    def kept(self) -> int:
        """How many failed tasks wait to be run again."""
        with self._lock:
            return len(self._kept)

    def _run(self) -> None:
        while True:
            try:
                key = self._wake.get(timeout=self._wait())
            except queue.Empty:
                self._run_kept()
                continue
            if key is None:
                return
            with self._lock:
                task = self._latest.pop(key, None)
                if task is not None:
                    self._started += 1
            if task is None:
                continue
            try:
                if not key.startswith(_FLUSH) and not self.retry.answering():
                    self._keep(key, task)  # it would only fail: postponed until answered
                    continue
                before, refused = unanswered_writes(), refused_writes()
                try:
                    task()
                except Exception as exc:  # a failed status write must never stop the writer
                    self.retry.failed()
                    self._once.failed("status_write_failed", key, f"{type(exc).__name__}: {exc}")
                else:
                    if refused_writes() != refused:
                        self.retry.failed()  # (logged, once, by whoever sent it)
                    else:
                        self._once.succeeded(key)
                if unanswered_writes() != before:
                    self._keep(key, task)
                elif not self._kept:
                    self._interval = self.retry.interval  # answered again: start over
            finally:
                with self._lock:
                    self._finished += 1

    def _wait(self) -> float | None:
        """How long to wait for new tasks before looking at the kept ones (None: forever)."""
        with self._lock:
            if not self._kept:
                return None
        return max(0.05, min(self._retry_at - self._clock(), 1.0))

    def _keep(self, key: str, task: Task) -> None:
        self.retry.failed()
        with self._lock:
            if key in self._latest:
                return  # a newer task for the key is queued: it is the one to run
            first = not self._kept
            self._kept[key] = task
        if first:
            self._retry_at = self._clock() + self._interval

    def _run_kept(self) -> None:
        """Queue the kept tasks again once the apiserver answers and their wait is over."""
        if self._clock() < self._retry_at or not self.retry.answering():
            return
        with self._lock:
            kept, self._kept = self._kept, {}
            for key, task in kept.items():
                self._latest.setdefault(key, task)
        if not kept:
            return
        log.info("status_writes_retried", writes=len(kept))
        for key in kept:
            self.retry.retried()
            self._wake.put(key)
        self._interval = min(self.retry.max_interval, self._interval * 2)
        self._retry_at = self._clock() + self._interval

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every submitted task ran (for tests and shutdown); kept tasks are not
        waited for."""
        done = threading.Event()
        self.submit(f"{_FLUSH}{id(done)}", done.set)
        return done.wait(timeout)

    def stop(self) -> None:
        self._wake.put(None)
