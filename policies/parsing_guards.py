"""``spec.guards`` of a Queue: parsed apart from ``parsing`` so the guards' fields and checks
sit in one place (``policies.guards`` has the rules).

Pure and total like ``parsing``: bad input gives a ``FieldError`` naming the field path and
the reason, never an exception; the queue is then refused as a whole (live: ``Valid=False``,
the last valid version kept).
"""

from __future__ import annotations

from typing import Any

from policies.guards import NO_GUARDS, Budget, Guards, Period
from policies.parsing_checks import ObjectErrors

GUARDS_FIELDS = {"maxRuntimeSeconds", "budget", "maxRunningGangs", "maxPendingGangs"}
BUDGET_FIELDS = {"gpuHours", "period"}
#: The most gangs a cap may name (a cap is a count of objects; beyond this it is a typo).
MAX_GANGS = 1_000_000


def parse_guards(raw: Any, err: ObjectErrors) -> Guards:
    """``spec.guards`` (absent: no guards)."""
    if raw is None:
        return NO_GUARDS
    m = err.mapping(raw, "spec.guards")
    err.unknown(m, "spec.guards", GUARDS_FIELDS)
    return Guards(
        max_runtime_seconds=err.seconds(m.get("maxRuntimeSeconds"),
                                        "spec.guards.maxRuntimeSeconds", None, positive=True),
        budget=_budget(m.get("budget"), err),
        max_running_gangs=_count(m.get("maxRunningGangs"), "spec.guards.maxRunningGangs", err),
        max_pending_gangs=_count(m.get("maxPendingGangs"), "spec.guards.maxPendingGangs", err),
    )


def _budget(raw: Any, err: ObjectErrors) -> Budget | None:
    if raw is None:
        return None
    path = "spec.guards.budget"
    m = err.mapping(raw, path)
    err.unknown(m, path, BUDGET_FIELDS)
    if "gpuHours" not in m:
        err.add(f"{path}.gpuHours", "required: the GPU-hours the queue may use per period")
    if "period" not in m:
        err.add(f"{path}.period", "required: Day | Week | Month (calendar periods in UTC)")
    hours = err.number(m.get("gpuHours"), f"{path}.gpuHours", None)
    period = err.enum(m.get("period"), f"{path}.period", Period, None)
    if hours is None or period is None:
        return None
    return Budget(hours, period)


def _count(raw: Any, path: str, err: ObjectErrors) -> int | None:
    """A whole number of gangs >= 1 (0 would hold the queue for good: delete it instead)."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MAX_GANGS:
        err.add(path, f"must be a whole number from 1 to {MAX_GANGS}, got {raw!r}")
        return None
    return raw
