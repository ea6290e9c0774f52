"""Reading fields of apiserver JSON: the checked readers every converter shares.

Why one place: each converter (pods, PodGroups, Jobs, the native gang API, JobSets, volumes)
must fail the same way on a malformed field, with a ``ConversionError`` that names the object
and the field path, so the caller can log it and keep the object's last good state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from scheduler.model import workloads

T = TypeVar("T")


class ConversionError(ValueError):
    """An object the scheduler cannot use: ``pod ns/name: spec.x[0].y: reason``."""

    def __init__(self, kind: str, key: str, path: str, reason: str) -> None:
        self.kind, self.key, self.path, self.reason = kind, key, path, reason
        super().__init__(f"{kind} {key}: {path}: {reason}" if path else f"{kind} {key}: {reason}")



class FieldError(Exception):
    """Internal: a field problem before the object's identity is attached."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path, self.reason = path, reason


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects); ``?`` when missing."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    name, ns = meta.get("name") or "?", meta.get("namespace")
    return f"{ns}/{name}" if ns else str(name)


def converted(kind: str, obj: Any, build: Callable[[], T]) -> T:
    """Run *build*, turning any failure into a ``ConversionError`` naming the object."""
    try:
        if not isinstance(obj, Mapping):
            raise FieldError("", f"expected an object, got {type(obj).__name__}")
        return build()
    except FieldError as exc:
        raise ConversionError(kind, object_key(obj), exc.path, exc.reason) from None
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise ConversionError(kind, object_key(obj), "", f"malformed object: {exc}") from exc


def read_map(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(path, f"expected an object, got {type(value).__name__}")
    return value


def read_list(obj: Mapping[str, Any], key: str, path: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise FieldError(path, f"expected a list, got {type(value).__name__}")
    return value


def read_str_map(obj: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in read_map(obj, key, path).items()}


def read_int(obj: Mapping[str, Any], key: str, path: str, default: int | None,
         minimum: int | None = None) -> int | None:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(path, f"expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise FieldError(path, f"must be >= {minimum}, got {value}")
    return value


def read_name(meta: Mapping[str, Any]) -> str:
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise FieldError("metadata.name", "missing")
    return name


def parse_time(text: Any, path: str = "metadata.creationTimestamp") -> float:
    """RFC 3339 (``2024-05-01T12:00:00Z``) -> epoch seconds; absent -> 0.0."""
    if not text:
        return 0.0
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        raise FieldError(path, f"malformed time {text!r}") from None


def read_owner(meta: Mapping[str, Any]) -> workloads.OwnerRef | None:
    """The controller among ``metadata.ownerReferences`` (what recreates the object), if any."""
    for i, ref in enumerate(read_list(meta, "ownerReferences", "metadata.ownerReferences")):
        if isinstance(ref, Mapping) and ref.get("controller"):
            if not ref.get("kind") or not ref.get("name"):
                raise FieldError(f"metadata.ownerReferences[{i}]",
                                 "controller without kind or name")
            return workloads.OwnerRef(kind=str(ref["kind"]), name=str(ref["name"]),
                                      uid=str(ref.get("uid") or ""))
    return None
