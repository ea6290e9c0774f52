"""`explain` for a Job that Kueue holds back: which layer holds it, in Kueue's own words.

Why: under Kueue (``scheduler.run.kueue_mode``) a Job waits suspended, with no pods, until
Kueue admits its Workload by quota. gang-scheduler has nothing of it to place, so "no pods
right now" would send the user looking in the wrong layer. The answer names the Workload and
quotes Kueue's condition (``QuotaReserved`` or ``Admitted``, whichever says why not), e.g.
"held by Kueue: not admitted yet (Workload job-a-1b2c3: couldn't assign flavors to pod set
main: insufficient unused quota for nvidia.com/gpu in flavor gpu, 8 more needed)".

The words are pure (``hold_text``); ``kueue_hold`` reads the Workloads through the caller's
client and is silent where Kueue is not installed or not readable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from scheduler.kube.client import KubeClient
from scheduler.kube.client import path_segment as seg
from scheduler.model.workloads import JobInfo
from scheduler.run.kueue_mode import QUEUE_NAME_LABEL

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2"
#: Kueue's conditions that say why a Workload is not admitted, the most telling first.
WHY_NOT = ("QuotaReserved", "Admitted", "Evicted")


def held_by_kueue(job: JobInfo) -> bool:
    """A suspended Job that names a Kueue LocalQueue: Kueue decides when it runs."""
    return job.suspended and QUEUE_NAME_LABEL in job.labels


def hold_text(job: JobInfo, workload: Mapping[str, Any] | None) -> str:
    """Why Kueue holds *job*, from its Workload (None: Kueue has made none yet)."""
    if workload is None:
        return (f"held by Kueue: not admitted yet (no Workload for it yet: Kueue has not taken "
                f"it up; is LocalQueue {job.labels.get(QUEUE_NAME_LABEL, '?')} there?)")
    name = str((workload.get("metadata") or {}).get("name") or "?")
    conditions = {str(c.get("type")): c for c in
                  (workload.get("status") or {}).get("conditions") or () if isinstance(c, dict)}
    if (conditions.get("Admitted") or {}).get("status") == "True":
        return (f"held by Kueue: Workload {name} is admitted; its Job is resumed next "
                "(Kueue unsuspends it)")
    why = next((str(c["message"]) for kind in WHY_NOT
                if (c := conditions.get(kind)) is not None and c.get("message")),
               "no condition yet")
    text = f"held by Kueue: not admitted yet (Workload {name}: {why})"
    evicted = conditions.get("Evicted") or {}
    if evicted.get("status") == "True" and evicted.get("message") and evicted["message"] != why:
        text += f"; Kueue evicted it before: {evicted['message']}"
    return text


def workload_of(job: JobInfo, workloads: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The Workload Kueue made for *job* (it owns it by the Job's uid)."""
    for w in workloads:
        owners = (w.get("metadata") or {}).get("ownerReferences") or ()
        if any(o.get("kind") == "Job" and o.get("uid") == job.uid for o in owners):
            return w
    return None


def kueue_hold(client: KubeClient, jobs: Iterable[JobInfo]) -> str | None:
    """The hold of the first of *jobs* Kueue holds back (None: none is, or Kueue's Workloads
    cannot be read: then the ordinary answer stands)."""
    held = [j for j in jobs if held_by_kueue(j)]
    if not held:
        return None
    job = held[0]
    resp = client.request("GET", f"{WORKLOADS}/namespaces/{seg(job.namespace)}/workloads")
    if not resp.ok:
        return None
    items = (resp.json() or {}).get("items") or ()
    return hold_text(job, workload_of(job, items))
