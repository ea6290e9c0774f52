"""Write ``gangscheduler.io/last-checkpoint`` from inside a training pod.

Preemption prefers the victims that lose the least work, counted from each gang's last
checkpoint; only the trainer knows when it saved one, so the trainer writes the time. This
module is the few lines it needs: standard library only (no ``kubernetes`` client, no
gang-scheduler dependencies), so it can be copied into any training image as it is, or run
as ``gang-scheduler checkpoint mark`` where gang-scheduler is installed.

Inside a pod it authenticates as the pod's ServiceAccount, which needs the
``gang-scheduler-checkpoint-writer`` ClusterRole (``deploy/users/checkpoint-writer.yaml``)
bound in its namespace. By default it annotates the pod it runs in (``POD_NAME`` from the
downward API): a Job's pods are its gang, so any one member's mark counts for the gang.

    from checkpoint import mark          # after torch.save(...)
    mark()                               # now, on this pod
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ANNOTATION = "gangscheduler.io/last-checkpoint"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")

#: What can carry the mark (any of them counts for the gang): kind -> API path prefix.
TARGETS: Mapping[str, str] = {
    "pod": "/api/v1/namespaces/{ns}/pods/{name}",
    "job": "/apis/batch/v1/namespaces/{ns}/jobs/{name}",
    "podgroup": "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups/{name}",
}


class CheckpointError(Exception):
    """The mark could not be written; the message says which object and why."""


@dataclass(frozen=True, slots=True)
class Connection:
    """Where the apiserver is and who we are to it."""

    server: str
    token: str
    ca_file: str | None = None
    namespace: str = ""

    @classmethod
    def in_cluster(cls, account: Path = SERVICE_ACCOUNT,
                   environ: Mapping[str, str] | None = None) -> Connection:
        """The pod's own ServiceAccount, as every in-cluster client finds it."""
        env = os.environ if environ is None else environ
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
        if not host or not port:
            raise CheckpointError("not running in a pod: KUBERNETES_SERVICE_HOST/PORT unset")
        try:
            token = (account / "token").read_text().strip()
            namespace = (account / "namespace").read_text().strip()
        except OSError as exc:
            raise CheckpointError(f"no service account token in {account}: {exc}") from None
        server = f"https://{'[' + host + ']' if ':' in host else host}:{port}"
        return cls(server, token, str(account / "ca.crt"), namespace)


def stamp(when: datetime) -> str:
    """RFC 3339 in UTC, whole seconds: what the scheduler parses."""
    if when.tzinfo is None:
        raise CheckpointError(f"checkpoint time {when.isoformat()} has no time zone")
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def mark(when: datetime | None = None, *, target: str = "pod", name: str | None = None,
         namespace: str | None = None, connection: Connection | None = None,
         timeout: float = 10.0) -> str:
    """Annotate *target* (``pod``, ``job`` or ``podgroup``) *name* with checkpoint time
    *when* (default: now); returns the time written. *name* defaults to ``$POD_NAME`` for a
    pod; *namespace* to the connection's (the pod's own)."""
    if target not in TARGETS:
        raise CheckpointError(f"target {target!r}: expected one of {', '.join(TARGETS)}")
    conn = connection or Connection.in_cluster()
    name = name or (os.environ.get("POD_NAME") if target == "pod" else None)
    if not name:
        raise CheckpointError(f"which {target}? pass its name (for this pod: set POD_NAME "
                              "from the downward API, fieldRef metadata.name)")
    ns = namespace or conn.namespace
    if not ns:
        raise CheckpointError(f"{target} {name}: no namespace given")
    text = stamp(when or datetime.now(UTC))
    path = TARGETS[target].format(ns=urllib.parse.quote(ns, safe=""),
                                  name=urllib.parse.quote(name, safe=""))
    body = json.dumps({"metadata": {"annotations": {ANNOTATION: text}}}).encode()
    request = urllib.request.Request(
        conn.server.rstrip("/") + path, data=body, method="PATCH",
        headers={"Authorization": f"Bearer {conn.token}", "Accept": "application/json",
                 "Content-Type": "application/merge-patch+json"})
    context = ssl.create_default_context(cafile=conn.ca_file) if conn.ca_file else None
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context):
            pass
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        with contextlib.suppress(ValueError, AttributeError):  # not a Status: say it as is
            detail = str(json.loads(detail).get("message") or detail)
        raise CheckpointError(f"{target} {ns}/{name}: HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise CheckpointError(f"{target} {ns}/{name}: cannot reach {conn.server}: {exc}"
                              ) from None
    return text


if __name__ == "__main__":  # python checkpoint.py [RFC3339-TIME]: copied into an image
    import sys

    try:
        at = datetime.fromisoformat(sys.argv[1].replace("Z", "+00:00")) if sys.argv[1:] else None
        print(mark(at))
    except (CheckpointError, ValueError) as exc:
        sys.exit(f"checkpoint: {exc}")
