"""Warnings about what users wrote, from the informers to a Warning event on the object.

Two kinds: annotations (and a few labels: ``label_problems``) the scheduler cannot read
(``InvalidAnnotation``: it uses a default instead), and objects of its own it cannot use at
all (``InvalidObject``: a pod with this scheduler's name or a PodGroup whose conversion
failed, naming the field and the reason; the object is ignored until fixed, so without the
event its gang would just wait, unexplained).

Why a sink between the two: the informers see every object (on their own threads, and on every
replica) but must not block on the apiserver; the leader's loop can write events. So an
informer records what it found (and logs it, once per object and finding), and the loop drains
the new findings after each cycle and emits one ``InvalidAnnotation`` Warning event per object
whose findings changed. An object whose findings did not change is not warned again, however
often it is updated; a fixed object is forgotten, so breaking it again warns again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from scheduler.kube.events import EventReason
from scheduler.kube.read import informer
from scheduler.model.annotation_checks import annotation_problems, label_problems

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class Finding:
    """What is wrong with one object's annotations."""

    kind: str  # "Pod", "PodGroup", "Job"
    api_version: str
    namespace: str
    name: str
    uid: str
    problems: tuple[str, ...]
    reason: str = EventReason.INVALID_ANNOTATION  # the event's reason

    @property
    def message(self) -> str:
        return "; ".join(self.problems)


class InputWarnings:
    """Thread-safe: informers ``check``; the leader's loop ``drain``s."""

    def __init__(self, max_tracked: int = 50000,
                 clock: Callable[[], float] = time.time) -> None:
        self.clock = clock  # what a time in an annotation is checked against
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[str, ...]] = {}  # uid -> problems last found
        self._new: dict[str, Finding] = {}  # uid -> finding not yet drained
        self.max_tracked = max_tracked

    def check(self, kind: str, api_version: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        annotations = meta.get("annotations") or {}
        if not uid or not isinstance(annotations, Mapping):
            return
        labels = meta.get("labels") or {}
        problems = annotation_problems(
            {str(k): v for k, v in annotations.items() if isinstance(v, str)}, self.clock())
        if isinstance(labels, Mapping):
            problems += label_problems(
                {str(k): v for k, v in labels.items() if isinstance(v, str)})
        self._record(uid, problems, lambda: Finding(
            kind, api_version, str(meta.get("namespace") or ""), str(meta.get("name") or ""),
            uid, problems))

    def unusable(self, kind: str, api_version: str, obj: Mapping[str, Any],
                 problem: str | None) -> None:
        """The object could not be converted (*problem*: why), or could again (None)."""
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "") if isinstance(meta, Mapping) else ""
        if not uid:
            return
        problems = (f"{problem}; the scheduler ignores this {kind} until it is fixed",
                    ) if problem else ()
        self._record(f"{uid}#object", problems, lambda: Finding(
            kind, api_version, str(meta.get("namespace") or ""), str(meta.get("name") or ""),
            uid, problems, EventReason.INVALID_OBJECT))

    def _record(self, key: str, problems: tuple[str, ...],
                finding: Callable[[], Finding]) -> Finding | None:
        """Remember *problems* under *key*; the new finding, if they changed."""
        with self._lock:
            if self._seen.get(key, ()) == problems:
                return None
            if not problems:
                self._seen.pop(key, None)
                self._new.pop(key, None)
                return None
            if len(self._seen) >= self.max_tracked:  # bounded: forget the oldest
                self._seen.pop(next(iter(self._seen)))
            self._seen[key] = problems
            self._new[key] = found = finding()
        log.warning("object_unusable" if found.reason == EventReason.INVALID_OBJECT
                    else "annotation_invalid", kind=found.kind, namespace=found.namespace,
                    object=found.name, problems=found.message)
        return found

    def forget(self, obj: Mapping[str, Any]) -> None:
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        with self._lock:
            for key in (uid, f"{uid}#object"):
                self._seen.pop(key, None)
                self._new.pop(key, None)

    def drain(self) -> list[Finding]:
        """The findings since the last drain, oldest first."""
        with self._lock:
            out, self._new = list(self._new.values()), {}
        return out

    def checking(self, kind: str, api_version: str,
                 handler: informer.Handler) -> informer.Handler:
        """*handler* (an informer handler) that checks each object it is handed first."""

        def handle(event: informer.EventType, obj: dict[str, Any]) -> None:
            if event is informer.EventType.DELETED:
                self.forget(obj)
            else:
                self.check(kind, api_version, obj)
            handler(event, obj)

        return handle
