"""The reads and conditional merge patches pre-bind writes are made of.

Every pre-bind write reads its object and patches it with the resourceVersion it read, so an
object changed meanwhile fails the write (HTTP 409) instead of being overwritten: a PV taken
by another claim, a ResourceClaim allocated by another scheduler. Failures are returned as
words for the gang's reason; a write the leader fence refused (``Fenced``) is raised instead,
never turned into a reason like any other: the gang is not to be backed off, and nothing
may be taken back by a replica that may not write (``PreBindWriter`` decides what follows).
"""

from __future__ import annotations

from typing import Any

from scheduler.kube.client import MERGE_PATCH, Requester, TransportError
from scheduler.kube.lead.fence import Fenced

#: How the reason of a write refused for a stale resourceVersion (HTTP 409) starts.
CONFLICT = "changed meanwhile"
#: The reason of a GET of an object that does not exist (HTTP 404).
GONE = "HTTP 404"


class Api:
    """Reads and conditional merge patches over a (fenced) client."""

    def __init__(self, client: Requester, timeout: tuple[float, float]) -> None:
        self.client = client
        self.timeout = timeout

    def get(self, path: str) -> dict[str, Any] | str:
        """The object, or why not (``GONE...`` when it does not exist)."""
        try:
            resp = self.client.request("GET", path, timeout=self.timeout)
        except TransportError as exc:
            return f"no reply from the apiserver: {exc}"
        if not resp.ok:
            return f"HTTP {resp.status}: {resp.message()}"
        body = resp.json()
        return body if isinstance(body, dict) else "unreadable reply"

    def patch_object(self, path: str, body: dict[str, Any]) -> dict[str, Any] | str:
        """Merge-patch *path* with *body* (conditional when it carries
        ``metadata.resourceVersion``): the object as patched, or why not (``CONFLICT...``
        on a 409). Raises ``Fenced`` when this replica may not write."""
        try:
            resp = self.client.request("PATCH", path, body=body, content_type=MERGE_PATCH,
                                       timeout=self.timeout)
        except Fenced:
            raise
        except TransportError as exc:
            return f"no reply from the apiserver: {exc}"
        if resp.ok:
            try:
                reply = resp.json()
            except ValueError:
                reply = None
            return reply if isinstance(reply, dict) else {}
        if resp.status == 409:
            return f"{CONFLICT} ({resp.message()})"
        return f"HTTP {resp.status}: {resp.message()}"

    def patch(self, path: str, body: dict[str, Any]) -> str:
        """``patch_object`` when the reply does not matter: why not, "" when done."""
        out = self.patch_object(path, body)
        return out if isinstance(out, str) else ""
