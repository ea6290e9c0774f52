"""Binding whole gangs, and the pod deletions and evictions that undo or preempt them.

The apiserver has no multi-pod transaction, so atomicity is ours: every member of a gang is
bound concurrently through ``pods/binding``, and once one fails the members still queued are
not sent (``SKIPPED``). Binds carry the pod's uid as a precondition, so a deleted-and-recreated
namesake is never bound by mistake; a bound pod is never re-bound.

Nothing is deleted here. A gang that fails part-way keeps the members it bound
(``BindOutcome.bound``), and whether to complete it or roll it back is the decision core's
(``scheduler.decide.housekeeping``), which the simulator shares:

- every failure transient (no reply, 429, 5xx: the apiserver or etcd restarting): the members
  not bound are *parked* (``BindOutcome.parked``): the loop keeps them assumed on their nodes
  and places them again once the apiserver answers. Deleting would gain nothing (nobody can
  bind while it is away) and lose pods: one without a controller for good;
- a failure retrying cannot mend (the pod deleted or recreated, forbidden): the members
  bound stay for the next cycle to complete the gang (with a recreated member) or roll it
  back, naming the cause;
- fenced mid-gang (this replica stopped owning the Lease, or its renewal is late, between
  two binds; or the apiserver's fence refused a bind stamped with a term the Lease has moved
  past, ``scheduler.kube.lead.fence``): the members bound are left to the leader, this replica
  again or another, which repairs the partly bound gang on its next cycle.

A reply that may have succeeded is read back before anything is decided: a bind without a
reply, and a bind answered 409 (a bind whose reply was lost landed: a retry, or a new leader
re-placing the member), count as bound when the pod (this incarnation) is on a node.
Deletions (``delete_pods``) are the rollback's and are retried.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import structlog

from scheduler.kube.client import Requester, TransportError, path_segment
from scheduler.kube.lead.fence import Fenced
from scheduler.model import PodRef

log = structlog.get_logger()

PodNode = tuple[PodRef, str]
UNKNOWN = 0  # code of a request whose outcome is unknown (no reply)
SKIPPED = -1  # code of a bind not attempted because another member had already failed
FENCED = -2  # code of a bind not sent: this replica does not own the leader Lease
#: Replies that a later attempt may not get: the apiserver or etcd overloaded or restarting.
TRANSIENT = frozenset({UNKNOWN, SKIPPED, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class PodFailure:
    """Why one pod's request failed: its *code*, the HTTP status (``UNKNOWN``, ``SKIPPED`` or
    ``FENCED`` when there was none)."""

    pod: PodRef
    node: str
    code: int
    reason: str

    def __str__(self) -> str:
        return f"{self.pod}: {self.reason}"


@dataclass(frozen=True, slots=True)
class BindOutcome:
    """What happened to one gang: all of it bound, or which members are and why the rest are
    not (see the module docstring: nothing is deleted)."""

    gang: str
    #: The members bound, each on the node it is on: every member on success.
    bound: tuple[PodNode, ...] = ()
    failed: tuple[PodFailure, ...] = ()  # members whose bind failed (or was skipped)
    #: Every failure transient: the members not bound, on their nodes, to be bound once the
    #: apiserver answers.
    parked: tuple[PodNode, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def fenced(self) -> bool:
        """Not bound because this replica may not write (nothing wrong with the gang)."""
        return any(f.code == FENCED for f in self.failed)

    @property
    def transient(self) -> bool:
        """Failed only for want of an answer (no reply, 429, 5xx): nothing wrong with the
        gang itself, so its members are parked for a retry once the apiserver answers."""
        return bool(self.failed) and all(f.code in TRANSIENT for f in self.failed)

    @property
    def unanswered(self) -> bool:
        """Transient, and no failure but binds without a reply (or not sent after one): the
        apiserver away, so its retry is due the moment it answers again (a 429 or 5xx is an
        answer: it backs off)."""
        return self.transient and all(f.code in (UNKNOWN, SKIPPED) for f in self.failed)

    def describe(self) -> str:
        """One line for events and logs: the first real failure, and what was kept."""
        if self.ok:
            return f"bound {len(self.bound)} pods"
        first = next((f for f in self.failed if f.code != SKIPPED), self.failed[0])
        if self.fenced:
            return (f"binding {first} failed; {len(self.bound)} bound members left for the "
                    "leader to complete or roll back")
        if self.transient:
            return (f"binding {first} failed; {len(self.bound)} bound members kept, "
                    f"{len(self.parked)} parked on their nodes until the apiserver answers")
        return f"binding {first} failed; {len(self.bound)} bound members kept"


@dataclass(frozen=True, slots=True)
class EvictOutcome:
    pod: PodRef
    ok: bool
    code: int
    reason: str = ""


def _pod_path(pod: PodRef, sub: str = "") -> str:
    base = f"/api/v1/namespaces/{path_segment(pod.namespace)}/pods/{path_segment(pod.name)}"
    return f"{base}/{sub}" if sub else base


class Binder:
    """Binds, deletes and evicts pods concurrently over one shared thread pool.

    Do not call its methods from inside its own executor (they wait on that pool).
    ``queue_of`` names a gang's queue for log lines: every line about a gang carries its
    ``gang``, ``namespace`` and ``queue`` (the live scheduler passes the cache's lookup).
    """

    def __init__(self, client: Requester, *, concurrency: int = 32,
                 timeout: tuple[float, float] = (5.0, 30.0), delete_attempts: int = 3,
                 queue_of: Callable[[str], str] | None = None) -> None:
        self.client = client
        self.queue_of = queue_of
        self.timeout = timeout
        self.delete_attempts = delete_attempts
        self.executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bind")
        pool = getattr(getattr(getattr(client, "api_client", None), "configuration", None),
                       "connection_pool_maxsize", None)
        if isinstance(pool, int) and pool < concurrency:
            log.warning("connection_pool_too_small", pool_maxsize=pool, concurrency=concurrency,
                        reason="connections beyond the pool are opened and closed per request")

    def close(self) -> None:
        self.executor.shutdown(wait=True)

    def gang_keys(self, gang: str) -> dict[str, str]:
        """``gang``, ``namespace`` and ``queue`` for log lines about *gang* ("ns/name")."""
        if not gang:
            return {}
        queue = self.queue_of(gang) if self.queue_of is not None else ""
        return {"gang": gang, "namespace": gang.split("/", 1)[0], "queue": queue}

    # Binding ------------------------------------------------------------------------------
    def bind_gang(self, pod_nodes: Sequence[PodNode], scheduler_name: str,
                  gang: str = "") -> BindOutcome:
        """Bind one gang's members (see the module docstring for a failure part-way)."""
        return self.bind_gangs([(gang, pod_nodes)], scheduler_name)[0]

    def bind_gangs(self, gangs: Sequence[tuple[str, Sequence[PodNode]]],
                   scheduler_name: str) -> list[BindOutcome]:
        """Bind many gangs at once: all their members share the pool."""
        started = []
        for gang, pods in gangs:
            gang_failed = threading.Event()  # lets queued members of a failed gang skip
            keys = self.gang_keys(gang)
            started.append((gang, keys, pods, [
                self.executor.submit(self._bind_member, ref, node, keys, gang_failed)
                for ref, node in pods]))
        outcomes = []
        for gang, keys, pods, futures in started:
            results = self._read_back(pods, [f.result() for f in futures])
            outcome = _outcome(gang, pods, results)
            if outcome.ok:
                log.debug("gang_bound", **keys, pods=len(pods), scheduler=scheduler_name)
            elif outcome.fenced:
                log.warning("gang_left_partly_bound", **keys, bound=len(outcome.bound),
                            reason="fenced: the leader completes or rolls it back")
            outcomes.append(outcome)
        return outcomes

    def _bind_member(self, ref: PodRef, node: str, keys: dict[str, str],
                     gang_failed: threading.Event) -> PodFailure | str:
        """The node the pod is bound to now, or why it is not."""
        if gang_failed.is_set():
            return PodFailure(ref, node, SKIPPED, "not attempted: another member failed")
        metadata = {"name": ref.name, "namespace": ref.namespace}
        if ref.uid:
            metadata["uid"] = ref.uid  # precondition: never bind a recreated namesake
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": metadata,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        try:
            resp = self.client.request("POST", _pod_path(ref, "binding"), body=body,
                                       timeout=self.timeout)
        except Fenced as exc:
            gang_failed.set()
            return PodFailure(ref, node, FENCED, str(exc))
        except TransportError as exc:
            gang_failed.set()
            return PodFailure(ref, node, UNKNOWN, f"no reply from the apiserver: {exc}")
        if resp.ok:
            return node
        if resp.status == 409:  # a bind whose reply was lost may have landed: read it back
            on = self._read(ref)[1]
            if on:
                return on
        gang_failed.set()
        reason = _bind_reason(resp.status, resp.message())
        log.info("bind_failed", **(keys or {"namespace": ref.namespace}), pod=ref.name, node=node,
                 status=resp.status, reason=reason)
        return PodFailure(ref, node, resp.status, reason)

    def _read_back(self, pods: Sequence[PodNode],
                   results: list[PodFailure | str]) -> list[PodFailure | str]:
        """Binds without a reply, read back (they may have landed): the node each pod is on,
        the pod gone or recreated since (a failure retrying cannot mend), or, when the
        apiserver does not answer or the pod is not bound, still without a reply."""
        unknown = [i for i, r in enumerate(results)
                   if isinstance(r, PodFailure) and r.code == UNKNOWN]
        out = list(results)
        for i, (code, on) in zip(unknown, self.executor.map(
                lambda i: self._read(pods[i][0]), unknown), strict=True):
            if on:
                out[i] = on
            elif code in (404, 409):
                ref, node = pods[i]
                out[i] = PodFailure(ref, node, code, _bind_reason(
                    code, "read back after a bind without a reply"))
        return out

    def _read(self, ref: PodRef) -> tuple[int, str]:
        """(code, node) of this incarnation of the pod: 200 and the node it is bound to
        ("" if none), 404 gone, 409 recreated (another uid), 0 or another code when the
        apiserver did not answer or could not tell."""
        try:
            resp = self.client.request("GET", _pod_path(ref), timeout=self.timeout)
        except TransportError:
            return UNKNOWN, ""
        if not resp.ok:
            return resp.status, ""
        pod = resp.json() or {}
        if ref.uid and (pod.get("metadata") or {}).get("uid") != ref.uid:
            return 409, ""
        return resp.status, str((pod.get("spec") or {}).get("nodeName") or "")

    # Deleting and evicting ----------------------------------------------------------------
    def delete_pods(self, pods: Sequence[PodRef], grace_period_seconds: int = 0,
                    retries: int | None = None, gang: str = "") -> list[PodFailure]:
        """Delete pods (uid-preconditioned) concurrently; returns only the failures.

        A pod already gone (404) or replaced by a namesake (409 on the uid precondition) counts
        as deleted. Transport errors and 5xx are retried up to *retries* attempts in total
        (``delete_attempts`` unless told).
        *gang*, when the pods are one gang's, goes into the log lines.
        """
        keys = self.gang_keys(gang)
        attempts = self.delete_attempts if retries is None else retries
        results = self.executor.map(
            lambda ref: self._delete(ref, grace_period_seconds, attempts, keys), pods)
        return [r for r in results if r is not None]

    def _delete(self, ref: PodRef, grace: int, attempts: int,
                keys: dict[str, str]) -> PodFailure | None:
        body: dict[str, object] = {"apiVersion": "v1", "kind": "DeleteOptions",
                                   "gracePeriodSeconds": grace}
        if ref.uid:
            body["preconditions"] = {"uid": ref.uid}
        failure = PodFailure(ref, "", UNKNOWN, "not attempted")
        for attempt in range(max(1, attempts)):
            if attempt:
                time.sleep(0.2 * 2 ** attempt)
            try:
                resp = self.client.request("DELETE", _pod_path(ref), body=body,
                                           timeout=self.timeout)
            except Fenced as exc:  # not this replica's to delete: retrying cannot mend it
                failure = PodFailure(ref, "", FENCED, f"delete: {exc}")
                break
            except TransportError as exc:
                failure = PodFailure(ref, "", UNKNOWN, f"delete: no reply: {exc}")
                continue
            if resp.ok or resp.status in (404, 409):
                return None
            failure = PodFailure(ref, "", resp.status, f"delete: {resp.message()}")
            if resp.status < 500 and resp.status != 429:
                break
        log.warning("delete_failed", **(keys or {"namespace": ref.namespace}), pod=ref.name,
                    reason=failure.reason)
        return failure

    def evict_pod(self, pod: PodRef, grace_period_seconds: int | None = None) -> EvictOutcome:
        """Evict through ``policy/v1`` Eviction, which honours PodDisruptionBudgets."""
        options: dict[str, object] = {}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if pod.uid:
            options["preconditions"] = {"uid": pod.uid}
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod.name, "namespace": pod.namespace},
                "deleteOptions": options}
        try:
            resp = self.client.request("POST", _pod_path(pod, "eviction"), body=body,
                                       timeout=self.timeout)
        except Fenced as exc:  # not this replica's to evict: no apiserver fault either
            return EvictOutcome(pod, False, FENCED, str(exc))
        except TransportError as exc:
            return EvictOutcome(pod, False, UNKNOWN, f"no reply from the apiserver: {exc}")
        if resp.ok:
            return EvictOutcome(pod, True, resp.status)
        if resp.status in (404, 409):  # already gone, or a namesake: nothing left to evict
            return EvictOutcome(pod, True, resp.status, "already gone")
        if resp.status == 429:
            return EvictOutcome(pod, False, 429,
                                f"blocked by PodDisruptionBudget: {resp.message()}")
        return EvictOutcome(pod, False, resp.status, resp.message())

    def evict_pods(self, pods: Sequence[PodRef],
                   grace_period_seconds: int | Mapping[str, int] | None = None,
                   ) -> list[EvictOutcome]:
        """Evict many pods concurrently (a whole victim gang); the grace period is one for
        all, or each pod's by uid."""
        def grace(p: PodRef) -> int | None:
            if isinstance(grace_period_seconds, Mapping):
                return grace_period_seconds.get(p.uid)
            return grace_period_seconds

        futures: list[Future[EvictOutcome]] = [
            self.executor.submit(self.evict_pod, p, grace(p)) for p in pods]
        return [f.result() for f in futures]


def _outcome(gang: str, pods: Sequence[PodNode],
             results: Sequence[PodFailure | str]) -> BindOutcome:
    """One gang's outcome from each member's result (its node, or why not)."""
    bound = tuple((ref, r) for (ref, _), r in zip(pods, results, strict=True)
                  if isinstance(r, str))
    failed = tuple(r for r in results if isinstance(r, PodFailure))
    outcome = BindOutcome(gang, bound=bound, failed=failed)
    if outcome.transient:
        parked = tuple(pn for pn, r in zip(pods, results, strict=True)
                       if isinstance(r, PodFailure))
        return BindOutcome(gang, bound=bound, failed=failed, parked=parked)
    return outcome


def _bind_reason(code: int, message: str) -> str:
    """Short, stable reasons for the common bind failures, with the server's words."""
    if code == 404:
        return f"pod deleted before binding ({message})"
    if code == 409:
        return f"conflict: already bound or recreated ({message})"
    if code == 403:
        return f"forbidden ({message})"
    return f"HTTP {code}: {message}"
