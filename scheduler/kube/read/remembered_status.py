"""What a Queue's status says the queue is remembered for (fair share with memory).

The leader writes ``status.rememberedGPUHours`` and ``status.rememberedAt``
(``scheduler.kube.write.queue_status``); every replica reads them back from the Queue objects
it watches, so the one that takes the lease next starts from them
(``scheduler.run.remembered``) rather than from nothing.

A status is written by the scheduler, but anyone with write access to ``queues/status`` may
change it: a malformed pair is not used (the queue starts from nothing) and is told by the
field path and the reason, never silently read as 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from scheduler.kube.read.fields import FieldError, parse_time


def saved_usage(status: Mapping[str, Any]) -> tuple[float, float] | None:
    """(GPU-seconds, as of when) from a Queue's *status*; None when it has none (memory off,
    or never written); ``FieldError`` naming the field when it is malformed."""
    hours = status.get("rememberedGPUHours")
    if hours is None:
        return None
    if isinstance(hours, bool) or not isinstance(hours, int | float) \
            or not math.isfinite(hours) or hours < 0:
        raise FieldError("status.rememberedGPUHours",
                         f"must be a finite number >= 0, got {hours!r}")
    at = status.get("rememberedAt")
    if not at:
        raise FieldError("status.rememberedAt", "required with status.rememberedGPUHours")
    return float(hours) * 3600.0, parse_time(at, "status.rememberedAt")
