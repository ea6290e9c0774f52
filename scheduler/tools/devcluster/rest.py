"""Call generated Kubernetes API methods with plain dicts in and out.

Why: the generated client's models are strict (required fields), slow to build, and typed so
that a dict body or a raw reply does not type-check. The dev cluster writes objects it fully
controls and reads a few fields, so it sends dicts and parses the JSON reply itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes import client

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


def call(method: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``method(*args, **kwargs)`` without models; the reply body as a dict ({} if empty).

    Non-2xx replies still raise `kubernetes.client.ApiException`.
    """
    reply = method(*args, _preload_content=False, **kwargs)
    body = reply.data
    return dict(json.loads(body)) if body else {}


def code_of(method: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """``method(*args, **kwargs)`` without parsing the reply; the HTTP status code.

    For calls whose reply the generated client cannot parse, such as ``pods/binding``
    (kubernetes-client/python issues 547 and 825).
    """
    reply = method(*args, _preload_content=False, **kwargs)
    reply.release_conn()
    return int(reply.status)


def exists(read: Callable[..., Any], *args: Any) -> bool:
    """Whether the object ``read(*args)`` reads exists (404: no; other errors raise)."""
    try:
        call(read, *args)
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True
