"""The kubelet's status resync that kwok lacks: touch the pods kwok left behind.

A kubelet's status manager re-writes every pod's status every 10 s, so a status write the
apiserver lost (a 500 while etcd restarts) is repaired within seconds. kwok v0.8.0 drops a
stage whose write fails with anything but connection refused, 429, 503 or a timeout, and looks
at that pod again only on its next watch event; an apiserver restart makes it re-list every
pod, an etcd restart does not (README, "kwok drops a write that fails mid-request"). So after
an etcd outage a pod can stay Running past its simulated runtime forever, and its Job never
completes: most likely the reliability rig's "pods lost" at 7cb69f3 (Job ``g1``, one pod
Running with 5 of 6 succeeded, in a run that restarted etcd).

``resync`` stands in for the status manager: every pod whose next kwok stage is overdue by
more than a grace period gets a metadata annotation (``gangscheduler.io/kwok-resync``), a
watch event on which kwok replays the stage its state selects. Nothing else changes: the
stages select on phase, deletion and the simulation annotations, none of which the touch
writes. It returns what it touched, so a caller reports how often kwok needed it rather than
hiding it.
"""

from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Any

from kubernetes import client

from scheduler.tools.devcluster import kwok, rest

RESYNC_ANNOTATION = "gangscheduler.io/kwok-resync"
SECONDS = re.compile(r"[0-9]+([.][0-9]+)?")  # the stages' test() of a number of seconds
GRACE_S = 10.0  # the kubelet status manager's sync period: sooner is not a lost write yet


def overdue(pod: dict[str, Any], now: float, grace_s: float = GRACE_S) -> str | None:
    """The kwok stage (``kwok-stages.yaml``) that *pod* should have gone through more than
    *grace_s* before *now* (seconds since the epoch), or None. A pod no stage would move
    (Running with no simulated runtime, unbound, finished and not deleted) is never overdue."""
    meta = pod.get("metadata") or {}
    notes = meta.get("annotations") or {}
    phase = (pod.get("status") or {}).get("phase")
    deleting = epoch(meta.get("deletionTimestamp"))
    if deleting is not None:
        began = deleting - float(meta.get("deletionGracePeriodSeconds") or 0)
        if phase in ("Succeeded", "Failed"):
            return "pod-remove" if began + grace_s < now else None
        shutdown = _seconds(notes.get(kwok.SIMULATED_SHUTDOWN))
        due = min(deleting, began + shutdown) if shutdown is not None else deleting
        return "pod-terminate" if due + grace_s < now else None
    if phase == "Pending" and (pod.get("spec") or {}).get("nodeName"):
        created = epoch(meta.get("creationTimestamp"))
        return "pod-start" if created is not None and created + grace_s < now else None
    if phase == "Running":
        started, runtime = (epoch(notes.get(kwok.SIMULATED_STARTED_AT)),
                            _seconds(notes.get(kwok.SIMULATED_RUNTIME)))
        if started is not None and runtime is not None and started + runtime + grace_s < now:
            return "pod-exit"
    return None


def resync(api: client.ApiClient, namespace: str,
           grace_s: float = GRACE_S) -> list[tuple[str, str]]:
    """Touch every pod in *namespace* whose kwok stage is overdue; (pod, stage) of each.
    A pod that changed or went in the meantime is skipped (the touch is a merge patch that
    only adds the annotation; a 404 means there is nothing left to replay)."""
    core = client.CoreV1Api(api)
    now = time.time()
    touched = []
    for pod in rest.call(core.list_namespaced_pod, namespace)["items"]:
        stage = overdue(pod, now, grace_s)
        if stage is None:
            continue
        name = pod["metadata"]["name"]
        body = {"metadata": {"annotations": {RESYNC_ANNOTATION: f"{now:.3f} {stage}"}}}
        try:
            rest.call(core.patch_namespaced_pod, name, namespace, body)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            continue
        touched.append((name, stage))
    return touched


def epoch(stamp: object) -> float | None:
    """An RFC 3339 time (the apiserver's whole seconds, or kwok's up to 9 fraction digits)
    as seconds since the epoch; None if absent or not a time."""
    if not isinstance(stamp, str):
        return None
    whole, _, fraction = stamp.removesuffix("Z").partition(".")
    try:
        seconds = datetime.fromisoformat(whole + "+00:00").timestamp()
        return seconds + (float(f"0.{fraction}") if fraction else 0.0)
    except ValueError:
        return None


def _seconds(value: object) -> float | None:
    """A simulation annotation's number of seconds (what the stages accept), or None."""
    if not isinstance(value, str) or not SECONDS.fullmatch(value):
        return None
    return float(value)
