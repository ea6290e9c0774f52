"""structlog configuration: JSON lines in a cluster, readable console output locally.

Log keys are stable snake_case (cycle, gang, namespace, queue, node, reason) so that a log
pipeline can index them; the per-cycle summary line binds ``cycle`` once.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

LogFormat = Literal["auto", "json", "console"]


def configure_logging(level: str = "info", fmt: LogFormat = "auto") -> None:
    """Configure structlog (and stdlib logging, which the kubernetes client uses)."""
    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json"
    numeric = logging.getLevelNamesMapping().get(level.upper())
    if numeric is None:
        raise ValueError(f"--log-level: unknown level {level!r} (debug, info, warning, error)")
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    # urllib3 warns once per retried request ("Retrying (Retry(total=2...))"): hundreds of
    # lines while the apiserver restarts. The client logs one warning per outage instead,
    # with its duration (scheduler.kube.client.Outages); urllib3's own errors still show.
    if numeric > logging.DEBUG:
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
