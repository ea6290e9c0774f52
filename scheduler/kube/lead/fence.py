"""Fencing: a replica that no longer owns the leader Lease writes nothing.

Leader election alone does not fence writes. A leader paused past its lease (SIGSTOP, a long GC
pause, a frozen VM) resumes in the middle of a cycle with a plan made on a stale view, while a
standby has taken over and may already have placed other gangs on the same GPUs; without a
fence its binds, evictions and status writes go out as if nothing happened. So every mutating
request of the scheduler goes through ``FencedClient``, which asks the elector, at the moment of
the write, whether this process still owns the Lease renewed within its renew deadline (by its
own monotonic clock, which a pause moves forward). A write that fails the check is never sent:
it raises ``Fenced``, a ``TransportError``, so every writer treats it as a write that did not
happen (nothing is assumed bound, nothing is rolled back by a replica that may not act).

That check cannot close one window: a leader paused *between* the check and the send writes
on resume, after a standby took over. So the writes that matter most, Bindings, Evictions and
pod deletions, also carry the term they were decided in: ``FencedClient`` stamps them with the
leader's identity and the Lease's ``leaseTransitions`` (``FenceToken``; a pod about to be
deleted is stamped first, with the user deleting it, since a DELETE has no object to stamp),
and a ValidatingAdmissionPolicy whose parameter is the leader Lease
(``scheduler.kube.lead.fence_policy``) refuses, in the apiserver, one whose stamp is not the Lease's
current holder and term. Such a refusal is the same thing as the client-side one and raises
``Fenced`` too. Status writes and events are fenced by the client-side check only. Binds
additionally carry the pod's uid (``scheduler.kube.write.binder``), so a bind never lands on a
recreated namesake.

Reads (GET, watches) are never fenced: a standby keeps its caches warm. The Lease itself is
written through the unfenced client by the elector, which must be able to acquire it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from scheduler.kube.client import (
    JSON,
    MERGE_PATCH,
    WRITES,
    KubeClient,
    Requester,
    Response,
    TransportError,
)

log = structlog.get_logger()


#: Annotations on every Binding and Eviction a leader sends, and on a pod before it deletes
#: it: who sent it, in which term of which Lease ("namespace/name": two installations in
#: one cluster fence only their own).
LEADER_ANNOTATION = "gangscheduler.io/leader"
TERM_ANNOTATION = "gangscheduler.io/leader-term"
LEASE_ANNOTATION = "gangscheduler.io/leader-lease"
#: On a pod the leader is about to delete, with the term's stamp: the user deleting it.
USER_ANNOTATION = "gangscheduler.io/leader-user"
#: Starts the message of the admission policy's refusal: how a refusal is told apart from
#: any other 403 (RBAC, another policy).
REFUSAL_MARK = "gang-scheduler leader fence:"
#: The writes stamped with the term: creating these subresources of a pod.
STAMPED_SUBRESOURCES = ("binding", "eviction")


class Fenced(TransportError):
    """A write refused: this replica does not own the leader Lease (checked before sending,
    or by the apiserver's admission policy on the term the write carries)."""


@dataclass(frozen=True, slots=True)
class FenceToken:
    """The term a write is made in, as the Lease records it: its ``holderIdentity`` and its
    ``leaseTransitions``, which every change of holder increments (``LeaderElector``), so a
    takeover makes every token of the previous term stale; *lease* ("namespace/name") says
    which Lease, so only that Lease's policy binding checks it."""

    identity: str
    transitions: int
    lease: str

    def annotations(self) -> dict[str, str]:
        return {LEADER_ANNOTATION: self.identity, TERM_ANNOTATION: str(self.transitions),
                LEASE_ANNOTATION: self.lease}


def stamped(path: str, body: Any, token: FenceToken | None) -> Any:
    """*body* with the term's annotations when it is a Binding or Eviction (a POST to
    ``.../pods/<name>/binding|eviction``); otherwise, or without a token, unchanged."""
    if token is None or not isinstance(body, dict) \
            or path.rsplit("/", 1)[-1] not in STAMPED_SUBRESOURCES:
        return body
    metadata = dict(body.get("metadata") or {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), **token.annotations()}
    return {**body, "metadata": metadata}


def is_pod_path(path: str) -> bool:
    """``/api/v1/namespaces/<ns>/pods/<name>``: a pod itself, not a subresource."""
    parts = path.split("/")
    return len(parts) == 7 and parts[:3] == ["", "api", "v1"] and parts[5] == "pods"


def whoami(client: Requester) -> str | None:
    """The user the apiserver authenticates this client as (a SelfSubjectReview), None
    when it cannot be asked."""
    try:
        resp = client.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                              body={"apiVersion": "authentication.k8s.io/v1",
                                    "kind": "SelfSubjectReview"})
    except TransportError:
        return None
    if not resp.ok:
        return None
    user = (((resp.json() or {}).get("status") or {}).get("userInfo") or {}).get("username")
    return str(user) if user else None


def refused_by_policy(resp: Response) -> bool:
    """Did the leader fence's admission policy refuse this write (not RBAC, not another
    policy)? The policy answers 403 with a message that starts with ``REFUSAL_MARK``."""
    return resp.status == 403 and REFUSAL_MARK in resp.message()


class FencedClient(KubeClient):
    """``KubeClient`` whose writes go out only while *leading* says this replica leads, its
    Bindings and Evictions stamped with *token*'s term and each pod it deletes stamped first
    (None: leader election is off, nothing stamped, the admission policy lets them through).

    Shares the connection pool of *inner*. *on_fenced* is called once per refused write
    (a metric), and *on_refused_by_apiserver* too when the apiserver refused it; the refusal
    is logged once per episode, not once per write.
    """

    def __init__(self, inner: KubeClient, leading: Callable[[], bool],
                 on_fenced: Callable[[], None] | None = None,
                 token: Callable[[], FenceToken | None] = lambda: None,
                 on_refused_by_apiserver: Callable[[], None] | None = None) -> None:
        super().__init__(inner.api_client, inner.timeout, inner.outages)
        self._leading, self._on_fenced, self._token = leading, on_fenced, token
        self._on_refused_by_apiserver = on_refused_by_apiserver
        self._inner = inner
        self._username: str | None = None  # asked on the first stamped delete
        self._lock = threading.Lock()
        self._episode: tuple[float, int] | None = None  # (since, writes refused)

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                body: Any = None, content_type: str = JSON,
                timeout: float | tuple[float, float] | None = None) -> Response:
        if method in WRITES:
            if not self._leading():
                self._refused(method, path)
                raise Fenced(f"{method} {path}: not sent, this replica does not own the "
                             "leader Lease (fenced)")
            token = self._token()
            if method == "POST":
                body = stamped(path, body, token)
            elif method == "DELETE" and token is not None and is_pod_path(path):
                failed = self._stamp_for_delete(path, body, token, timeout)
                if failed is not None:
                    return failed  # the pod is gone, or another one: nothing to delete
        resp = super().request(method, path, query=query, body=body,
                               content_type=content_type, timeout=timeout)
        if method in WRITES:
            if refused_by_policy(resp):
                if self._on_refused_by_apiserver is not None:
                    self._on_refused_by_apiserver()
                self._refused(method, path, resp.message())
                raise Fenced(f"{method} {path}: refused by the apiserver: {resp.message()}")
            if self._episode is not None:
                self._resumed()
        return resp

    def _stamp_for_delete(self, path: str, body: Any, token: FenceToken,
                          timeout: float | tuple[float, float] | None) -> Response | None:
        """Before deleting a pod: stamp it with the term and this replica's user, a PATCH
        the apiserver's fence refuses in a stale term; the DELETE that follows is checked
        against that stamp (``scheduler.kube.lead.fence_policy``), so a pause between the two
        cannot carry a stale delete through once the Lease moved on. A pod stamped since by
        the new leader is one it is deleting itself. Returns the PATCH's reply when it did
        not succeed (404, 409: the pod gone or replaced), which the caller reads as the
        DELETE's; None to go on. Without a user (it could not be learnt) nothing is
        stamped and the DELETE goes out checked only by this client."""
        user = self._user()
        if user is None:
            return None
        metadata: dict[str, Any] = {"annotations": {**token.annotations(),
                                                    USER_ANNOTATION: user}}
        uid = ((body or {}).get("preconditions") or {}).get("uid")
        if uid:
            metadata["uid"] = uid  # never stamp a recreated namesake
        resp = super().request("PATCH", path, body={"metadata": metadata},
                               content_type=MERGE_PATCH, timeout=timeout)
        if refused_by_policy(resp):
            if self._on_refused_by_apiserver is not None:
                self._on_refused_by_apiserver()
            self._refused("DELETE", path, resp.message())
            raise Fenced(f"DELETE {path}: stamping refused by the apiserver: {resp.message()}")
        return None if resp.ok else resp

    def _user(self) -> str | None:
        """This client's user, asked until once answered (it does not change)."""
        if self._username is None:
            self._username = whoami(self._inner)
        return self._username

    def _refused(self, method: str, path: str,
                 reason: str = "the leader Lease is not ours (expired, lost or a pause)"
                 ) -> None:
        if self._on_fenced is not None:
            self._on_fenced()
        with self._lock:
            first = self._episode is None
            since, count = self._episode or (time.monotonic(), 0)
            self._episode = (since, count + 1)
        if first:
            log.warning("writes_fenced", first=f"{method} {path}", reason=reason)

    def _resumed(self) -> None:
        with self._lock:
            episode, self._episode = self._episode, None
        if episode is not None:
            log.info("writes_unfenced", refused=episode[1],
                     fenced_for_s=round(time.monotonic() - episode[0], 1))
