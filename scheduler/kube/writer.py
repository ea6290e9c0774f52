"""A background writer: one thread running the latest write task per key.

Everything a person reads (pod conditions, PodGroup status, events, Queue status) goes
through one, so the scheduling loop never waits on a status write, and a write superseded
before it ran (a reason that changed again, a gang bound meanwhile) is never made.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

import structlog

log = structlog.get_logger("gang_scheduler.writer")

Task = Callable[[], object]  # the result, if any, is ignored


class BackgroundWriter:
    """A single thread running the latest write task per key (older ones are dropped)."""

    def __init__(self, name: str = "status-writer") -> None:
        self._latest: dict[str, Task] = {}
        self._lock = threading.Lock()
        self._wake: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._started = 0  # tasks taken up so far
        self._finished = 0  # tasks done so far (they run one at a time, in that order)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, key: str, task: Task) -> None:
        with self._lock:
            fresh = key not in self._latest
            self._latest[key] = task
        if fresh:
            self._wake.put(key)

    def cancel(self, key: str) -> None:
        """Drop the task waiting under *key*, if any (one already running finishes)."""
        with self._lock:
            self._latest.pop(key, None)

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

    def _run(self) -> None:
        while True:
            key = self._wake.get()
            if key is None:
                return
            with self._lock:
                task = self._latest.pop(key, None)
                if task is not None:
                    self._started += 1
            if task is None:
                continue
            try:
                task()
            except Exception as exc:  # a failed status write must never stop the writer
                log.warning("status_write_failed", key=key, error=str(exc))
            finally:
                with self._lock:
                    self._finished += 1

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every submitted task ran (for tests and shutdown)."""
        done = threading.Event()
        self.submit(f"__flush__{id(done)}", done.set)
        return done.wait(timeout)

    def stop(self) -> None:
        self._wake.put(None)
