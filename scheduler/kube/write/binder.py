"""Binding whole gangs, and the pod deletions and evictions that undo or preempt them.

The apiserver has no multi-pod transaction, so atomicity is ours: every member is bound
concurrently through ``pods/binding``; if any member fails, the members this call did bind are
deleted (grace 0: they never started, and their controller recreates them) so a gang is never
left partly bound. Binds carry the pod's uid as a precondition, so a deleted-and-recreated
namesake is never bound by mistake, and an already bound pod answers 409 and fails its gang:
a bound pod is never re-bound.

Complete before undoing: when every failure of a gang is transient (no reply, 429, 5xx: the
apiserver restarting, etcd slow), the failed and skipped members are bound again a few times
(``complete_delays``) before anything is deleted, because a rollback deletes pods, and a pod
without a controller (a bare-pod PodGroup, an MPI launcher) is then lost for good. A retried
bind that answers 409 because the first attempt did land (its reply was lost) counts as bound
when the pod is on the intended node. A failure that retrying cannot mend (the pod deleted or
recreated, already bound elsewhere, forbidden) rolls the gang back at once.

Fenced mid-gang (this replica stopped holding the Lease, or its renewal is late, between two
binds; or the apiserver's fence refused a bind stamped with a term the Lease has moved past,
``scheduler.kube.lead.fence``): the members bound so far are left as they are
(``BindOutcome.left``), not deleted. Deleting is not this replica's to do any more: its
deletes would be fenced too, or, sent the moment its renewal lands, race a new leader that
may be completing the gang. The leader, this replica again or another, repairs the partly
bound gang on its next cycle (``scheduler.decide.housekeeping``): it completes it, or rolls it back.

A bind whose reply was lost (timeout, reset) has an unknown outcome; rollback reads the pod back
and deletes it if it did get bound. Rollback deletions are retried; any that still fail are
reported loudly in ``BindOutcome.rollback_failed`` for the startup repair to finish.
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
UNKNOWN = 0  # status of a request whose outcome is unknown (no reply)
SKIPPED = -1  # status of a bind not attempted because another member had already failed
FENCED = -2  # status of a bind not sent: this replica does not hold the leader Lease
#: Replies that a later attempt may not get: the apiserver or etcd overloaded or restarting.
TRANSIENT = frozenset({UNKNOWN, SKIPPED, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class PodFailure:
    """Why one pod's request failed: the HTTP status (``UNKNOWN``/``SKIPPED`` otherwise)."""

    pod: PodRef
    node: str
    status: int
    reason: str

    def __str__(self) -> str:
        return f"{self.pod}: {self.reason}"


@dataclass(frozen=True, slots=True)
class BindOutcome:
    """What happened to one gang: all of ``bound``, or none of it and the reasons why."""

    gang: str
    bound: tuple[PodNode, ...] = ()  # every member on success; empty after a rollback
    failed: tuple[PodFailure, ...] = ()  # members whose bind failed (or was skipped)
    rolled_back: tuple[PodRef, ...] = ()  # bound by this call, then deleted
    rollback_failed: tuple[PodFailure, ...] = ()  # still bound: the gang is partly bound!
    #: Bound by this call and kept: a later bind was fenced, so the leader's repair completes
    #: or rolls back the partly bound gang (see the module docstring).
    left: tuple[PodNode, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def fenced(self) -> bool:
        """Not bound because this replica may not write (nothing wrong with the gang)."""
        return any(f.status == FENCED for f in self.failed)

    @property
    def unanswered(self) -> bool:
        """Failed only for want of an answer (no reply, 429, 5xx): nothing wrong with the
        gang itself, so it may be tried again as soon as the apiserver answers."""
        return bool(self.failed) and all(f.status in TRANSIENT for f in self.failed)

    def describe(self) -> str:
        """One line for events and logs: the first real failure, and what was undone."""
        if self.ok:
            return f"bound {len(self.bound)} pods"
        first = next((f for f in self.failed if f.status != SKIPPED), self.failed[0])
        if self.fenced:
            return (f"binding {first} failed; {len(self.left)} bound members left for the "
                    "leader to complete or roll back")
        text = f"binding {first} failed; rolled back {len(self.rolled_back)} bound members"
        if self.rollback_failed:
            text += f"; could not delete {', '.join(map(str, self.rollback_failed))}"
        return text


@dataclass(frozen=True, slots=True)
class EvictOutcome:
    pod: PodRef
    ok: bool
    status: int
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
                 timeout: tuple[float, float] = (5.0, 30.0), rollback_attempts: int = 3,
                 queue_of: Callable[[str], str] | None = None,
                 complete_delays: Sequence[float] = (0.5, 1.0, 2.0)) -> None:
        self.client = client
        self.queue_of = queue_of
        self.timeout = timeout
        self.rollback_attempts = rollback_attempts
        self.complete_delays = tuple(complete_delays)
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
        """Bind every member or none (see the module docstring)."""
        return self.bind_gangs([(gang, pod_nodes)], scheduler_name)[0]

    def bind_gangs(self, gangs: Sequence[tuple[str, Sequence[PodNode]]],
                   scheduler_name: str) -> list[BindOutcome]:
        """Bind many gangs at once: all their members share the pool, each gang is atomic."""
        started = []
        for gang, pods in gangs:
            gang_failed = threading.Event()  # lets queued members of a failed gang skip
            keys = self.gang_keys(gang)
            started.append((gang, keys, pods, [
                self.executor.submit(self._bind_member, ref, node, keys, gang_failed)
                for ref, node in pods]))
        outcomes = []
        for gang, keys, pods, futures in started:
            results = self._complete(pods, [f.result() for f in futures], keys)
            failures = tuple(r for r in results if r is not None)
            if not failures:
                log.debug("gang_bound", **keys, pods=len(pods), scheduler=scheduler_name)
                outcomes.append(BindOutcome(gang, bound=tuple(pods)))
                continue
            bound = tuple(pn for pn, r in zip(pods, results, strict=True) if r is None)
            if any(f.status == FENCED for f in failures):
                log.warning("gang_left_partly_bound", **keys, bound=len(bound),
                            reason="fenced: the leader completes or rolls it back")
                outcomes.append(BindOutcome(gang, failed=failures, left=bound))
                continue
            unknown = [pn for pn, r in zip(pods, results, strict=True)
                       if r is not None and r.status == UNKNOWN]
            outcomes.append(self._roll_back(gang, keys, failures, list(bound), unknown))
        return outcomes

    def _complete(self, pods: Sequence[PodNode], results: list[PodFailure | None],
                  keys: dict[str, str]) -> list[PodFailure | None]:
        """Bind the failed members again while every failure is transient (see the module
        docstring); the results of the last attempt."""
        for attempt, delay in enumerate(self.complete_delays, start=1):
            failed = [i for i, r in enumerate(results) if r is not None]
            if not failed or not all(r.status in TRANSIENT for r in results if r is not None):
                break
            log.info("gang_bind_retried", **keys, attempt=attempt, pods=len(failed),
                     reason=str(next(r for r in results if r is not None and
                                     r.status != SKIPPED)))
            time.sleep(delay)
            gang_failed = threading.Event()
            futures = {i: self.executor.submit(self._bind_member, *pods[i], keys, gang_failed,
                                               True) for i in failed}
            for i, future in futures.items():
                results[i] = future.result()
        return results

    def _bind_member(self, ref: PodRef, node: str, keys: dict[str, str],
                     gang_failed: threading.Event, retry: bool = False) -> PodFailure | None:
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
        if resp.ok or (retry and resp.status == 409 and self._bound_to(ref, node)):
            return None  # (a 409 on a retry: the first attempt landed, its reply was lost)
        gang_failed.set()
        reason = _bind_reason(resp.status, resp.message())
        log.info("bind_failed", **(keys or {"namespace": ref.namespace}), pod=ref.name, node=node,
                 status=resp.status, reason=reason)
        return PodFailure(ref, node, resp.status, reason)

    def _roll_back(self, gang: str, keys: dict[str, str], failures: tuple[PodFailure, ...],
                   bound: list[PodNode], unknown: list[PodNode]) -> BindOutcome:
        # A bind without a reply may have happened: read the pod back to find out.
        maybe = list(self.executor.map(lambda pn: self._is_bound(pn[0]), unknown))
        to_delete = [ref for ref, _ in bound] + [
            ref for (ref, _), yes in zip(unknown, maybe, strict=True) if yes]
        not_deleted = tuple(self.delete_pods(to_delete, retries=self.rollback_attempts,
                                             gang=gang))
        undone = tuple(ref for ref in to_delete if all(f.pod != ref for f in not_deleted))
        outcome = BindOutcome(gang, failed=failures, rolled_back=undone,
                              rollback_failed=not_deleted)
        if not_deleted:
            log.error("gang_partly_bound", **keys, reason=outcome.describe())
        else:
            log.info("gang_rolled_back", **keys, reason=outcome.describe())
        return outcome

    def _bound_to(self, ref: PodRef, node: str) -> bool:
        """Is this incarnation of the pod bound to *node* (False when we cannot tell)?"""
        try:
            resp = self.client.request("GET", _pod_path(ref), timeout=self.timeout)
        except TransportError:
            return False
        pod = (resp.json() or {}) if resp.ok else {}
        return ((not ref.uid or (pod.get("metadata") or {}).get("uid") == ref.uid)
                and (pod.get("spec") or {}).get("nodeName") == node)

    def _is_bound(self, ref: PodRef) -> bool:
        """True when the pod (this incarnation) has a node, or when we cannot tell."""
        try:
            resp = self.client.request("GET", _pod_path(ref), timeout=self.timeout)
        except TransportError:
            return True
        if resp.status == 404:
            return False
        if not resp.ok:
            return True
        pod = resp.json() or {}
        same = not ref.uid or (pod.get("metadata") or {}).get("uid") == ref.uid
        return same and bool((pod.get("spec") or {}).get("nodeName"))

    # Deleting and evicting ----------------------------------------------------------------
    def delete_pods(self, pods: Sequence[PodRef], grace_period_seconds: int = 0,
                    retries: int = 1, gang: str = "") -> list[PodFailure]:
        """Delete pods (uid-preconditioned) concurrently; returns only the failures.

        A pod already gone (404) or replaced by a namesake (409 on the uid precondition) counts
        as deleted. Transport errors and 5xx are retried up to *retries* attempts in total.
        *gang*, when the pods are one gang's, goes into the log lines.
        """
        keys = self.gang_keys(gang)
        results = self.executor.map(
            lambda ref: self._delete(ref, grace_period_seconds, retries, keys), pods)
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


def _bind_reason(status: int, message: str) -> str:
    """Short, stable reasons for the common bind failures, with the server's words."""
    if status == 404:
        return f"pod deleted before binding ({message})"
    if status == 409:
        return f"conflict: already bound or recreated ({message})"
    if status == 403:
        return f"forbidden ({message})"
    return f"HTTP {status}: {message}"
