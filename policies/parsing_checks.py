"""The checks every field of a ``Queue`` or ``SchedulerPolicy`` object goes through: an error
collector with the typed reads (mapping, known fields, enum, boolean, number, duration) and
the object header (apiVersion, kind, metadata.name).

Why apart from ``parsing``: the parsers of the fields (``parsing``, ``parsing_guards``,
``parsing_interactive``) all read through the same checks, so each rule (what a number may
be, how an unknown field is reported) is written once, and the field modules can use the
collector without importing the parser that imports them.

Pure and total: bad input gives a ``FieldError`` naming the field path and the reason, never
an exception.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from policies.errors import FieldError
from policies.queues import API_VERSION
from scheduler.model.durations import MAX_DURATION, MAX_DURATION_SECONDS

#: A Kubernetes object name (and a queue's parent, which names one).
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class ObjectErrors:
    """Collects errors for one object so every check can run and report."""

    __slots__ = ("errors", "obj")

    def __init__(self, obj: str) -> None:
        self.obj = obj
        self.errors: list[FieldError] = []

    def add(self, path: str, reason: str) -> None:
        self.errors.append(FieldError(self.obj, path, reason))

    def mapping(self, raw: Any, path: str) -> Mapping[str, Any]:
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            self.add(path, f"must be a mapping, got {type(raw).__name__}")
            return {}
        return raw

    def unknown(self, m: Mapping[str, Any], path: str, known: set[str]) -> None:
        for key in sorted((k for k in m if k not in known), key=str):
            self.add(f"{path}.{key}", f"unknown field (known: {', '.join(sorted(known))})")

    def enum(self, raw: Any, path: str, enum: type[Any], default: Any) -> Any:
        if raw is None:
            return default
        try:
            return enum(raw)
        except ValueError:
            allowed = " | ".join(e.value for e in enum)
            self.add(path, f"must be one of {allowed}, got {raw!r}")
            return default

    def boolean(self, raw: Any, path: str, default: bool) -> bool:
        if raw is None:
            return default
        if not isinstance(raw, bool):
            self.add(path, f"must be true or false, got {raw!r}")
            return default
        return raw

    def number(self, raw: Any, path: str, default: float | None, positive: bool = False) -> Any:
        if raw is None:
            return default
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            self.add(path, f"must be a number, got {raw!r}")
            return default
        if not math.isfinite(raw):
            self.add(path, f"must be a finite number, got {raw!r}")
            return default
        if positive and raw <= 0:
            self.add(path, f"must be > 0, got {raw!r}")
            return default
        if raw < 0:
            self.add(path, f"must be >= 0, got {raw!r}")
            return default
        return float(raw)

    def seconds(self, raw: Any, path: str, default: float | None,
                positive: bool = False) -> Any:
        """A duration in seconds: a number, at most ``MAX_DURATION_SECONDS`` (a year): any
        time worked out from more (an expected end, a reservation's start) is beyond what a
        timestamp can represent."""
        value = self.number(raw, path, default, positive)
        if value is not None and value > MAX_DURATION_SECONDS:
            self.add(path, f"must be at most {MAX_DURATION_SECONDS:.0f} ({MAX_DURATION}), "
                     f"got {raw!r}")
            return default
        return value


def object_name(obj: Any, index: int) -> str:
    """The name to report errors under, even for objects without a usable name."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if isinstance(name, str) and name:
        return name
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    return f"<{kind if isinstance(kind, str) else 'object'} #{index}>"


def check_header(obj: Any, kind: str, err: ObjectErrors) -> str | None:
    """Check apiVersion, kind and metadata.name; return the name (None when unusable)."""
    if not isinstance(obj, Mapping):
        err.add("", f"must be a mapping, got {type(obj).__name__}")
        return None
    if obj.get("apiVersion") != API_VERSION:
        err.add("apiVersion", f"must be {API_VERSION}, got {obj.get('apiVersion')!r}")
    if obj.get("kind") != kind:
        err.add("kind", f"must be {kind}, got {obj.get('kind')!r}")
    meta = obj.get("metadata")
    name = err.mapping(meta, "metadata").get("name")
    if name is None:  # (metadata that is not a mapping was reported just above)
        if meta is None or isinstance(meta, Mapping):
            err.add("metadata.name", "required")
        return None
    if not isinstance(name, str) or not DNS_SUBDOMAIN.match(name):
        err.add("metadata.name", f"must be a DNS subdomain (a-z, 0-9, '-', '.'), got {name!r}")
        return None
    return name
