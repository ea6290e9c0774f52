"""For tests that run a CLI command in-process: its logging set-up, made harmless.

A command calls ``logconfig.configure_logging``, which points structlog (for the whole process,
caching loggers on first use) at ``sys.stderr``: in a test that is the captured stream, closed
after the test, and later tests that log fail with "I/O operation on closed file" or lose
the warnings they check. Here the command's set-up keeps errors only, on the real stderr,
caches nothing, and the previous configuration comes back afterwards. ``errors_only_logged``
does the same around a scheduler running in the test process, whose log lines would otherwise
land in the captured stdout a test parses.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

import pytest
import structlog

from scheduler.run import logconfig


def _errors_only(*_args: object, **_kwargs: object) -> None:
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.dev.ConsoleRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR),
        logger_factory=structlog.PrintLoggerFactory(file=sys.__stderr__),
        cache_logger_on_first_use=False)


@contextlib.contextmanager
def errors_only_logged() -> Iterator[None]:
    saved = structlog.get_config()
    _errors_only()
    try:
        yield
    finally:
        structlog.configure(**saved)


def quiet_cli_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The body of an autouse fixture for tests that call ``main([...])``."""
    monkeypatch.setattr(logconfig, "configure_logging", _errors_only)
    with errors_only_logged():
        yield
