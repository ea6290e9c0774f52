"""List+watch on raw JSON: one thread per resource keeps a handler in step with the apiserver.

Why our own (client-go's reflector, in small): the official ``watch.Watch`` builds model objects
and hides the bookmark/410 mechanics we need control of. This one lists in pages, parses with
``client.decode``, watches from the list's resourceVersion with bookmarks, and on ``410 Gone``
re-lists and hands the handler a *diff* against what it already delivered: objects that
vanished while we were away arrive as DELETED, so the cache never keeps a ghost.

Connection problems re-watch from the last resourceVersion after a capped, jittered exponential
backoff; an absent CRD (PodGroups, Queues) is "synced and empty" and retried slowly, so a
cluster without the CRD still schedules.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import structlog
import urllib3

from scheduler.kube.client import (
    ApiError,
    KubeClient,
    Response,
    TransportError,
    decode,
    path_segment,
)

log = structlog.get_logger()
#: How often a list that takes long (tens of thousands of pods on a busy apiserver) logs how
#: many objects it has so far.
PROGRESS_EVERY_S = 5.0
#: Objects per page of a list. Why not client-go's 500: the apiserver (1.36) pages a list from
#: its watch cache, and each page has a cost of its own; measured listing 22,400 pods, 500 per
#: page took 2.8-3.3 s of apiserver CPU and 5,000 per page 1.3 s (one page: 1.2 s). A page of
#: 5,000 pods is about 15 MB of JSON.
PAGE_SIZE = 5000


@dataclass(frozen=True, slots=True)
class ResourceKind:
    """What to list and watch: a collection path across all namespaces."""

    name: str  # plural, used in logs and as the cache's kind ("pods")
    path: str  # "/api/v1/pods", "/apis/batch/v1/jobs"
    optional: bool = False  # a CRD that may not be installed: absent means "no objects"
    namespaced: bool = True  # False for cluster-scoped kinds (nodes, queues)

    def in_namespace(self, namespace: str) -> ResourceKind:
        """The same kind listed in one namespace only (what a tenant's Role may allow)."""
        if not self.namespaced:
            raise ValueError(f"{self.name} are cluster-scoped")
        group, _, plural = self.path.rpartition("/")
        return replace(self, path=f"{group}/namespaces/{path_segment(namespace)}/{plural}")


NODES = ResourceKind("nodes", "/api/v1/nodes", namespaced=False)
PODS = ResourceKind("pods", "/api/v1/pods")
JOBS = ResourceKind("jobs", "/apis/batch/v1/jobs")
JOBSETS = ResourceKind("jobsets", "/apis/jobset.x-k8s.io/v1alpha2/jobsets", optional=True)
#: Operators' objects that size their pods' gangs (``operator_convert``), by kind.
OPERATOR_OBJECTS = {
    "PyTorchJob": ResourceKind("pytorchjobs", "/apis/kubeflow.org/v1/pytorchjobs", optional=True),
    "MPIJob": ResourceKind("mpijobs", "/apis/kubeflow.org/v1/mpijobs", optional=True),
    "RayCluster": ResourceKind("rayclusters", "/apis/ray.io/v1/rayclusters", optional=True),
}
PRIORITY_CLASSES = ResourceKind("priorityclasses", "/apis/scheduling.k8s.io/v1/priorityclasses",
                                namespaced=False)
PODGROUPS = ResourceKind("podgroups", "/apis/scheduling.x-k8s.io/v1alpha1/podgroups", optional=True)
# Kubernetes' own gang API: served at v1alpha2 by 1.36 and v1beta1 by 1.37, off by default, so
# every version is optional (a version the apiserver does not serve has no objects).
NATIVE_PODGROUPS = tuple(
    ResourceKind(f"podgroups.{v}", f"/apis/scheduling.k8s.io/{v}/podgroups", optional=True)
    for v in ("v1alpha2", "v1beta1"))
WORKLOADS = tuple(
    ResourceKind(f"workloads.{v}", f"/apis/scheduling.k8s.io/{v}/workloads", optional=True)
    for v in ("v1alpha2", "v1beta1"))
QUEUES = ResourceKind("queues", "/apis/gangscheduler.io/v1alpha1/queues", optional=True,
                      namespaced=False)
NAMESPACES = ResourceKind("namespaces", "/api/v1/namespaces", namespaced=False)
CLAIMS = ResourceKind("persistentvolumeclaims", "/api/v1/persistentvolumeclaims")
VOLUMES = ResourceKind("persistentvolumes", "/api/v1/persistentvolumes", namespaced=False)
STORAGE_CLASSES = ResourceKind("storageclasses", "/apis/storage.k8s.io/v1/storageclasses",
                               namespaced=False)
CSINODES = ResourceKind("csinodes", "/apis/storage.k8s.io/v1/csinodes", namespaced=False)
# Dynamic Resource Allocation (GA in 1.34): optional, so an older apiserver (or one with the
# API turned off) still schedules, without devices.
DRA_API = "resource.k8s.io/v1"
DEVICE_CLASSES = ResourceKind("deviceclasses", f"/apis/{DRA_API}/deviceclasses", optional=True,
                              namespaced=False)
RESOURCE_SLICES = ResourceKind("resourceslices", f"/apis/{DRA_API}/resourceslices",
                               optional=True, namespaced=False)
RESOURCE_CLAIMS = ResourceKind("resourceclaims", f"/apis/{DRA_API}/resourceclaims",
                               optional=True)
CLAIM_TEMPLATES = ResourceKind("resourceclaimtemplates",
                               f"/apis/{DRA_API}/resourceclaimtemplates", optional=True)
DEVICE_KINDS = (DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS, CLAIM_TEMPLATES)


class EventType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


Handler = Callable[[EventType, dict[str, Any]], None]


class _Gone(Exception):
    """The resourceVersion is too old (HTTP 410 or an ERROR event with code 410): re-list."""


class ResourceAbsent(Exception):
    """An optional resource's API is not served (CRD not installed)."""


def unmanaged(obj: Any) -> Any:
    """*obj* (in place) without ``metadata.managedFields``, server-side apply's record of who
    set which field: nothing here reads it, and it is 40 % of what a real kwok pod decodes to
    (10,200 pods: 186 MiB of Python objects, 112 MiB without, ``bench_list_encoding.py``),
    kept for as long as the informer keeps the object. kube-scheduler's informers drop it
    the same way; an update that omits it leaves the apiserver's copy as it was."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def list_all(client: KubeClient, kind: ResourceKind, page_size: int = PAGE_SIZE,
             resource_version: str | None = None) -> tuple[list[dict[str, Any]], str]:
    """Every object of *kind* in pages, and the list's resourceVersion.

    ``resource_version="0"`` lets the apiserver answer from its watch cache (what client-go's
    reflector asks for on its first list): measured at 10,000 pods, about two thirds of the
    apiserver CPU of a quorum read from etcd, and possibly a moment behind it, which the watch
    that follows from the list's resourceVersion makes up. None asks for the latest state.
    A continue token that expires mid-list restarts the list; an absent optional CRD raises
    ``ResourceAbsent``; any other failure raises ``ApiError``.
    """
    items: list[dict[str, Any]] = []
    cont: str | None = None
    said = time.monotonic()
    while True:
        if time.monotonic() - said >= PROGRESS_EVERY_S:  # a long list says how far it got
            said = time.monotonic()
            log.info("listing", resource=kind.name, objects=len(items))
        query = {"limit": page_size, "continue": cont,
                 "resourceVersion": None if cont else resource_version}
        resp = client.request("GET", kind.path, query=query, timeout=(5.0, 120.0))
        if resp.status == 410 and cont:  # continue token expired mid-list: start over
            items, cont = [], None
            continue
        if resp.status == 410:
            raise _Gone
        if resp.status == 404 and kind.optional:
            raise ResourceAbsent(kind.path)
        if not resp.ok:
            raise ApiError("GET", f"{kind.path} (list)", resp)
        body = decode(resp.data)
        items.extend(map(unmanaged, body.get("items") or ()))
        meta = body.get("metadata") or {}
        cont = meta.get("continue") or None
        if not cont:
            return items, str(meta.get("resourceVersion") or "")


@dataclass(slots=True)
class Backoff:
    """Exponential backoff with equal jitter: ``initial * 2**n`` capped, then 50-100 % of it."""

    initial: float = 0.5
    cap: float = 30.0
    rng: random.Random | None = None
    attempts: int = 0

    def next(self) -> float:
        base = min(self.cap, self.initial * (2 ** min(self.attempts, 30)))
        self.attempts += 1
        return base * (0.5 + 0.5 * (self.rng or random).random())

    def reset(self) -> None:
        self.attempts = 0


def object_id(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def _rv(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def iter_lines(resp: urllib3.BaseHTTPResponse, chunk: int = 1 << 16) -> Iterator[bytes]:
    """Complete newline-terminated lines of a streamed body, as they arrive."""
    pending = b""
    for data in resp.stream(chunk, decode_content=True):
        if b"\n" not in data:
            pending += data
            continue
        lines = (pending + data).split(b"\n")
        pending = lines.pop()
        yield from (line for line in lines if line.strip())
    if pending.strip():
        yield pending


class Informer:
    """Keeps *handler* in step with one resource; ``start()`` runs it in a daemon thread."""

    def __init__(self, client: KubeClient, kind: ResourceKind, handler: Handler, *,
                 page_size: int = PAGE_SIZE, watch_timeout: tuple[int, int] = (240, 360),
                 absent_retry: float = 30.0, backoff: Backoff | None = None,
                 rng: random.Random | None = None,
                 on_absent: Callable[[ResourceKind], None] | None = None) -> None:
        self.client, self.kind, self.handler = client, kind, handler
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.absent_retry = absent_retry
        self._rng = rng or random.Random()
        self.backoff = backoff or Backoff(rng=self._rng)
        self._store: dict[str, dict[str, Any]] = {}  # what the handler has been told, by id
        self._rv = ""  # "" = must (re-)list
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._resp: urllib3.BaseHTTPResponse | None = None
        self._interrupted = False
        self._thread: threading.Thread | None = None
        self._log = log.bind(resource=kind.name)
        self.relists = 0  # full lists done after the first one (410s, absent CRDs)
        self._absent = False  # the resource was absent at the last list (already said)
        #: Told when an optional resource is found absent (not again until it came back):
        #: for a caller that must say more than this informer's own log line.
        self.on_absent = on_absent

    # Lifecycle ----------------------------------------------------------------------------
    @property
    def has_synced(self) -> bool:
        """True once the first full list has been delivered to the handler."""
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    @property
    def resource_version(self) -> str:
        return self._rv

    @property
    def watching(self) -> bool:
        """True while a watch connection is open."""
        return self._resp is not None

    def start(self) -> threading.Thread:
        self._thread = threading.Thread(target=self.run, name=f"informer-{self.kind.name}",
                                        daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self.interrupt()
        if self._thread is not None:
            self._thread.join(timeout)

    def interrupt(self) -> None:
        """Drop the current watch connection; the loop re-watches from the last resourceVersion."""
        resp = self._resp
        if resp is not None:
            self._interrupted = True
            with contextlib.suppress(Exception):  # best effort: it may be closed already
                resp.shutdown()  # type: ignore[attr-defined]  # urllib3 >= 2.3: unblocks a read

    def objects(self) -> list[dict[str, Any]]:
        """The raw objects as last delivered (informer thread writes; copy before iterating)."""
        return list(self._store.values())

    # The loop -----------------------------------------------------------------------------
    def run(self) -> None:
        while not self._stop.is_set():
            try:
                if not self._rv:
                    self._list()
                self._watch()
                self.backoff.reset()  # the server ended a healthy watch: start over quickly
            except _Gone:
                self._log.info("watch_expired", resource_version=self._rv)
                self._rv = ""
            except ResourceAbsent:
                # Said once at info (an optional API this cluster does not serve, say the
                # v1beta1 gang API on 1.36 stays absent for good), then only at debug: the
                # retry every absent_retry seconds is not news. Told again once it came back.
                level = self._log.debug if self._absent else self._log.info
                level("resource_absent", path=self.kind.path, retry_s=self.absent_retry)
                if not self._absent and self.on_absent is not None:
                    self.on_absent(self.kind)
                self._absent = True
                self._replace([], "0")
                self._rv = ""
                self._stop.wait(self.absent_retry)
            except (TransportError, ApiError, ValueError, urllib3.exceptions.HTTPError,
                    OSError) as exc:
                if self._stop.is_set():
                    break
                delay = self.backoff.next()
                self._log.warning("informer_retry", error=str(exc), retry_s=round(delay, 2),
                                  relist=not self._rv)
                self._stop.wait(delay)

    def _check(self, resp: Response, what: str) -> None:
        if resp.status == 410:
            raise _Gone
        if resp.status == 404 and self.kind.optional:
            raise ResourceAbsent
        if not resp.ok:
            raise ApiError("GET", f"{self.kind.path} ({what})", resp)

    def _list(self) -> None:
        # The first list may come from the watch cache; a re-list (after 410 Gone) may not:
        # the cache could be as far behind as the watch that expired.
        first = not self._synced.is_set()
        items, rv = list_all(self.client, self.kind, self.page_size, "0" if first else None)
        if self._synced.is_set():
            self.relists += 1
        self._absent = False
        self._replace(items, rv)
        self._log.info("listed", objects=len(items), resource_version=rv)

    def _replace(self, items: list[dict[str, Any]], rv: str) -> None:
        """Deliver the difference between a full list and what the handler knows."""
        fresh = {object_id(o): o for o in items}
        for oid, old in list(self._store.items()):
            new = fresh.get(oid)
            if new is None or _uid(new) != _uid(old):  # gone, or replaced by a namesake
                del self._store[oid]
                self._deliver(EventType.DELETED, old)
        for oid, obj in fresh.items():
            known = self._store.get(oid)
            if known is None:
                self._store[oid] = obj
                self._deliver(EventType.ADDED, obj)
            elif _rv(known) != _rv(obj):
                self._store[oid] = obj
                self._deliver(EventType.MODIFIED, obj)
        self._rv = rv
        self._synced.set()

    def _watch(self) -> None:
        low, high = self.watch_timeout
        seconds = self._rng.randint(low, high)
        query = {"watch": "1", "resourceVersion": self._rv, "allowWatchBookmarks": "true",
                 "timeoutSeconds": seconds}
        resp = self.client.stream(self.kind.path, query, timeout=(5.0, seconds + 30.0))
        self._resp, self._interrupted = resp, False
        drained = False
        try:
            if resp.status != 200:
                self._check(Response(resp.status, resp.data), "watch")
            for line in iter_lines(resp):
                if self._stop.is_set():
                    return
                self._handle_line(line)
            drained = True
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if self._stop.is_set() or self._interrupted:
                return
            raise TransportError(f"watch {self.kind.path}: {exc}") from exc
        finally:
            self._resp = None
            if not drained:  # unread bytes or a broken stream: never reuse this connection
                resp.close()
            resp.release_conn()

    def _handle_line(self, line: bytes) -> None:
        event = decode(line)
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "BOOKMARK":
            self._rv = _rv(obj) or self._rv
            return
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone
            raise ValueError(f"watch error {obj.get('code')}: {obj.get('message')}")
        unmanaged(obj)
        oid = object_id(obj)
        if kind == "DELETED":
            self._store.pop(oid, None)
            self._deliver(EventType.DELETED, obj)
        elif kind in ("ADDED", "MODIFIED"):
            old = self._store.get(oid)
            if old is not None and _uid(old) != _uid(obj):  # missed a delete of a namesake
                self._deliver(EventType.DELETED, old)
                old = None
            self._store[oid] = obj
            self._deliver(EventType.ADDED if old is None else EventType.MODIFIED, obj)
        self._rv = _rv(obj) or self._rv

    def _deliver(self, kind: EventType, obj: dict[str, Any]) -> None:
        try:
            self.handler(kind, obj)
        except Exception:  # a handler bug must not stop the informer (the object is skipped)
            self._log.exception("handler_failed", event_type=str(kind), object=object_id(obj))


def _uid(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")
