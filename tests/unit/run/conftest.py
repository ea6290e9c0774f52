"""Log lines reach ``structlog.testing.capture_logs`` whatever other tests configured (a
level filter, cached loggers): the loggers of the modules under test are fresh for each test."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog

from scheduler.run import gpu_metrics, latency, observe


@pytest.fixture(autouse=True)
def _every_log_line(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    old = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
                        cache_logger_on_first_use=False)
    try:
        for module in (gpu_metrics, latency, observe):
            monkeypatch.setattr(module, "log", structlog.get_logger("test"))
        yield
    finally:
        structlog.configure(**old)
