"""``spec.guards`` of a Queue: parsed apart from ``parsing`` so the guards' fields and checks
sit in one place (``policies.guards`` has the rules).

Pure and total like ``parsing``: bad input gives a ``FieldError`` naming the field path and
the reason, never an exception; the queue is then refused as a whole (live: ``Valid=False``,
the last valid version kept).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from policies.guards import NO_GUARDS, Budget, Guards, Period

GUARDS_FIELDS = {"maxRuntimeSeconds", "budget", "maxRunningGangs", "maxPendingGangs"}
BUDGET_FIELDS = {"gpuHours", "period"}
#: The most gangs a cap may name (a cap is a count of objects; beyond this it is a typo).
MAX_GANGS = 1_000_000


class Errors(Protocol):
    """What ``parsing._Errors`` offers (its checks, shared with every other queue field)."""

    def add(self, path: str, reason: str) -> None: ...
    def mapping(self, raw: Any, path: str) -> Mapping[str, Any]: ...
    def unknown(self, m: Mapping[str, Any], path: str, known: set[str]) -> None: ...
    def enum(self, raw: Any, path: str, enum: type[Any], default: Any) -> Any: ...
    def number(self, raw: Any, path: str, default: float | None,
               positive: bool = False) -> Any: ...
    def seconds(self, raw: Any, path: str, default: float | None,
                positive: bool = False) -> Any: ...


def parse_guards(raw: Any, err: Errors) -> Guards:
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


def _budget(raw: Any, err: Errors) -> Budget | None:
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


def _count(raw: Any, path: str, err: Errors) -> int | None:
    """A whole number of gangs >= 1 (0 would hold the queue for good: delete it instead)."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MAX_GANGS:
        err.add(path, f"must be a whole number from 1 to {MAX_GANGS}, got {raw!r}")
        return None
    return raw
